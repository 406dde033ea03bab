"""The data: a capture's Census (census.model.census), one step and its phases (step.py), the
steps as columns (step_table.py), the ranks' NCCL kernels (ranks.py), the A/B experiment's
records (ab.py), and how a result shows itself in a notebook (shown.py). Integer ns and bytes;
the lowest stage above the definitions: it imports no later stage (no renderer, no engine)."""
