"""What is computed from one Census and said about it: the limiter and the run-ahead sentence
(limiter.py), the tail steps (tails.py), the NCCL wait split (nccl_wait.py) and the distributed
view (nccl_ranks.py), the spread over ranks (spread.py), its kernels by operation (ops.py: aten ops and
Inductor fused groups, per step, the unattributed apart). Pure on the model: no I/O, no engine."""
