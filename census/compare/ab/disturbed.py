"""Disturbed arms (project issue #22, "arms that lie"): a measured arm that ran beside something
the experiment's typical arm did not, with the reason, from what the arm recorded of its
surroundings (Arm.env, ArmEnv; each rank's under torchrun) and from its own step times.

"Typical" is the median over the experiment's measured arms, both sides pooled, and its spread
the scaled MAD (MAD_SIGMA × the median absolute deviation, a standard deviation for normal
data). Pooling the sides is what keeps a command's own difference from being called a
disturbance: half the arms are B, so a figure B changes in every B arm moves the median between
the sides and widens the MAD past the gap, and no arm stands out. A figure is disturbed when it
lies on the harmful side of typical by more than the larger of an absolute floor (tiny natural
variation never flags) and OUTLIER_SIGMAS spreads:

- other processes' CPU: other_cpu_cores > typical + max(OTHER_CORES_FLOOR, k·spread);
- the 1-minute load, only where other_cpu_cores was not recorded (it lags a minute and counts
  this process): load1 > typical + max(LOAD1_FLOOR, k·spread);
- this process's CPU share: cpu_share < typical − max(CPU_SHARE_DROP × typical, k·spread);
- the GPU's SM clock: gpu_sm_clock_mhz < typical − max(SM_CLOCK_DROP × typical, k·spread);
- a clock-throttle reason of DISTURBING_THROTTLE seen in at most TYPICAL_SHARE of the arms
  (in more it is how the machine runs, not what set one arm apart);
- its steps: their MAD over their median exceeds max(STEP_SPREAD_FLOOR, STEP_SPREAD_RATIO × the
  typical arm's), e.g. steps alternating 2 and 6.5 ms beside a CPU hog. A robust spread moves
  only when a large share of the steps moved, which is when the arm's median moved too.

A figure is judged only over at least MIN_TYPICAL_ARMS arms that recorded it: an arm without
env (an old ab.json, a machine without /proc or NVML) is never flagged by env. What a flag
does to the verdict is census.compare.ab.stats' (the refit without the disturbed arms).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from census.findings.tails import MAD_SIGMA, median_mad
from census.model.ab import Arm, ArmEnv
from census.units import fmt_ns

# Hampel-type outlier rules use 3 spreads; 5 because a flag can overturn a verdict and a MAD
# of 8 arms is itself uncertain by about ±30%, so 3 would flag clean arms of a small experiment
OUTLIER_SIGMAS = 5.0
# fewer arms than one block of four give no typical arm to stand out from
MIN_TYPICAL_ARMS = 4
# a whole core of other work: less is the machine's daemons, shells, the census parent
OTHER_CORES_FLOOR = 1.0
# runnable tasks beyond typical; the 1-minute average smooths a burst over the next arms
LOAD1_FLOOR = 1.5
# a fifth of the process's usual CPU time lost to the run queue; natural jitter is a few %
CPU_SHARE_DROP = 0.2
# a tenth of the usual SM clock; boost clocks jitter by a few 15 MHz bins
SM_CLOCK_DROP = 0.1
# NVML's throttle reasons that slow a GPU without the workload asking (power capping at the
# board's limit, an idle GPU at the read and application clocks are the normal run of things,
# and the SM clock rule sees their effect)
DISTURBING_THROTTLE = frozenset({"hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal"})
# a reason seen in more than this share of the arms is the machine's, not one arm's
TYPICAL_SHARE = 0.5
# steps' MAD over their median: clean GPU arms measure 1-12% (tests/data ab-demo and
# ab-deepspeed); 15% and 5 × typical are both far beyond that
STEP_SPREAD_FLOOR = 0.15
STEP_SPREAD_RATIO = 5.0
# fewer steps show no pattern
MIN_STEPS_FOR_SPREAD = 5


@dataclass(frozen=True)
class Typical:
    """The typical arm's value of one figure: the median and the scaled MAD."""

    median: float
    spread: float


def typical_of(values: Iterable[float]) -> Typical | None:
    """The median and MAD_SIGMA × MAD of `values`; None for fewer than MIN_TYPICAL_ARMS."""
    xs = list(values)
    if len(xs) < MIN_TYPICAL_ARMS:
        return None
    mid, mad = median_mad(xs)
    return Typical(mid, MAD_SIGMA * mad)


@dataclass(frozen=True)
class EnvRule:
    """One ArmEnv figure: disturbed beyond typical by more than max(floor, k · spread) in the
    harmful direction; a relative floor is a share of the typical value."""

    name: str  # the ArmEnv field
    high: bool  # disturbed above typical (else below)
    floor: float
    relative: bool
    says: str  # the reason, formatted with the arm's value v and the typical t
    unless: str | None = None  # skipped for an arm that recorded this (better) field


ENV_RULES = (
    EnvRule("other_cpu_cores", True, OTHER_CORES_FLOOR, False,
            "other processes used {v:,.1f} CPU cores (typical {t:,.1f})"),
    EnvRule("load1", True, LOAD1_FLOOR, False, "1-minute load {v:,.1f} (typical {t:,.1f})",
            unless="other_cpu_cores"),
    EnvRule("cpu_share", False, CPU_SHARE_DROP, True, "CPU share {v:.2f} (typical {t:.2f})"),
    EnvRule("gpu_sm_clock_mhz", False, SM_CLOCK_DROP, True,
            "SM clock {v:,.0f} MHz (typical {t:,.0f})"),
)  # fmt: skip


def find_disturbed(arms: list[Arm]) -> dict[int, str]:
    """Arm.index -> why, for every measured arm that is disturbed (the module's rule); the
    reasons of one arm joined by "; ", in the order of the rules."""
    measured = [a for a in arms if not a.discarded]
    found: dict[int, list[str]] = {}
    for prefix, envs in env_series(measured).items():
        for index, why in env_flags(envs):
            found.setdefault(index, []).append(prefix + why)
    for index, why in step_flags(measured):
        found.setdefault(index, []).append(why)
    return {a.index: "; ".join(found[a.index]) for a in measured if a.index in found}


def env_series(measured: list[Arm]) -> dict[str, dict[int, ArmEnv]]:
    """The envs to judge, by Arm.index, each series against its own typical: under torchrun
    each rank's ("rank 3: "; the arm's own env merges them, census.capture.arms), else the
    arm's own ("")."""
    out: dict[str, dict[int, ArmEnv]] = {}
    for arm in measured:
        ranked = [(f"rank {r.rank}: ", r.env) for r in arm.ranks if r.env is not None]
        for prefix, env in ranked or [("", arm.env)]:
            if env is not None:
                out.setdefault(prefix, {})[arm.index] = env
    return out


def env_flags(envs: dict[int, ArmEnv]) -> list[tuple[int, str]]:
    """(Arm.index, reason) for each figure of ENV_RULES and each throttle reason that sets an
    arm apart from the typical arm of `envs`."""
    out = []
    for rule in ENV_RULES:
        out += _rule_flags(rule, envs)
    return out + throttle_flags(envs)


def _rule_flags(rule: EnvRule, envs: dict[int, ArmEnv]) -> list[tuple[int, str]]:
    values = {i: v for i, e in envs.items() if (v := getattr(e, rule.name)) is not None}
    typical = typical_of(values.values())
    if typical is None:
        return []
    margin = max(rule.floor * abs(typical.median) if rule.relative else rule.floor,
                 OUTLIER_SIGMAS * typical.spread)  # fmt: skip
    harm = 1.0 if rule.high else -1.0  # the direction that slows an arm
    skip = {i for i, e in envs.items() if rule.unless and getattr(e, rule.unless) is not None}
    return [(i, rule.says.format(v=v, t=typical.median)) for i, v in values.items()
            if i not in skip and harm * (v - typical.median) > margin]  # fmt: skip


def throttle_flags(envs: dict[int, ArmEnv]) -> list[tuple[int, str]]:
    """(Arm.index, "GPU throttled: ...") for arms showing a DISTURBING_THROTTLE reason that at
    most TYPICAL_SHARE of the arms of `envs` show, over at least MIN_TYPICAL_ARMS arms."""
    if len(envs) < MIN_TYPICAL_ARMS:
        return []
    seen = [r for e in envs.values() for r in set(e.gpu_throttle) if r in DISTURBING_THROTTLE]
    rare = {r for r in seen if seen.count(r) <= TYPICAL_SHARE * len(envs)}
    out = []
    for i, e in envs.items():
        reasons = [r for r in dict.fromkeys(e.gpu_throttle) if r in rare]
        if reasons:
            out.append((i, "GPU throttled: " + ", ".join(reasons)))
    return out


def step_spread(arm: Arm) -> float | None:
    """The MAD of the arm's steps over their median; None with fewer than MIN_STEPS_FOR_SPREAD
    steps or a median of 0."""
    if len(arm.step_time_ns) < MIN_STEPS_FOR_SPREAD:
        return None
    mid, mad = median_mad(arm.step_time_ns)
    return mad / mid if mid > 0 else None


def step_flags(measured: list[Arm]) -> list[tuple[int, str]]:
    """(Arm.index, reason) for arms whose steps spread far beyond the typical arm's (the
    module's rule), with the spread, the median and the range that were seen."""
    spreads = {a.index: s for a in measured if (s := step_spread(a)) is not None}
    typical = typical_of(spreads.values())
    if typical is None:
        return []
    limit = max(STEP_SPREAD_FLOOR, STEP_SPREAD_RATIO * typical.median)
    return [(a.index, _spread_reason(a, spreads[a.index], typical.median))
            for a in measured if spreads.get(a.index, 0.0) > limit]  # fmt: skip


def _spread_reason(arm: Arm, spread: float, typical: float) -> str:
    t = arm.step_time_ns
    return (f"its steps spread ±{100 * spread:.0f}% around their median {fmt_ns(arm.median_ns)}, "
            f"from {fmt_ns(min(t))} to {fmt_ns(max(t))} (typical arm ±{100 * typical:.1f}%)")  # fmt: skip
