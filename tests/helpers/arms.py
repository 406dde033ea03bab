"""Hand-made arms of the disturbed-arms tests: quiet and hogged environments, and the unstable
experiment (measured A B B A | B A A B, the B arms 2 and 8 beside a CPU hog)."""

from __future__ import annotations

from census.capture.arms import arm_order
from census.model.ab import Arm, ArmEnv

QUIET = ArmEnv(cpu_share=0.97, other_cpu_cores=0.1, load1=0.5, gpu_sm_clock_mhz=1980)
HOG = ArmEnv(cpu_share=0.42, other_cpu_cores=3.8, load1=4.5, gpu_sm_clock_mhz=1980)
HOG_REASON = "other processes used 3.8 CPU cores (typical 0.1); CPU share 0.42 (typical 0.97)"


def arms_from(medians_ms: list[float], envs: list[ArmEnv | None] | None = None) -> list[Arm]:
    """A warm arm, then arms in ABBA BAAB order with steps (m − 1 ns, m, m + 1 ns)."""
    order = arm_order(len(medians_ms) - 1)
    envs = envs or [QUIET] * len(order)
    return [Arm(side, i, i == 0, tuple(int(m * 1e6) + d for d in (-1, 0, 1)), env=env)
            for i, (side, m, env) in enumerate(zip(order, medians_ms, envs, strict=True))]  # fmt: skip


# measured A B B A | B A A B: A 100, 102, 98, 100 ms; the B arms at 2 and 8 beside a CPU hog
# (106 ms), the clean B arms 102.5 ms
UNSTABLE_MEDIANS = [150.0, 100.0, 106.0, 102.5, 102.0, 102.5, 98.0, 100.0, 106.0]
UNSTABLE_ENVS = [QUIET, QUIET, HOG, QUIET, QUIET, QUIET, QUIET, QUIET, HOG]
