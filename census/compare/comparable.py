"""Whether two captures can be compared: one check, made once per diff, whose findings every
output states first (the explanation's first line, the JSON's `comparability`, the warnings).

Problems void or qualify the comparison (different tracers, nsys against torch.profiler, said
first; different GPUs, step counts or tracing; a side without
steps; nsys slowing the sides differently or reversing the calibration runs' delta); notes are
differences worth knowing that do not (nsys versions, step names, sliced exports). `hidden` names
the kinds of explanation sentence a problem makes meaningless (`verdict`: the captured step
times say nothing about which side is faster; `gpu`: one side recorded no CUDA work, so GPU
busy and idle say nothing either).
"""

from __future__ import annotations

from dataclasses import dataclass

from census.metrics import GPU_SPAN_NS, STEP_TIME_NS
from census.model.census import Census

# Above this ratio between the two sides' nsys overheads (captured / uncaptured step time), the
# captured step times are not comparable.
OVERHEAD_RATIO_LIMIT = 1.2


@dataclass(frozen=True)
class Comparability:
    """What one diff's check found (module docstring): problems, notes, and the kinds of sentence
    the problems hide."""

    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    hidden: frozenset[str] = frozenset()

    def as_dict(self) -> dict[str, list[str]]:
        """The problems and notes, as the JSON's `comparability`."""
        return {"problems": list(self.problems), "notes": list(self.notes)}


def check_comparable(
    a: Census,
    b: Census,
    labels: tuple[str, str],
    uncaptured_ns: tuple[float | None, float | None] = (None, None),
) -> Comparability:
    """The Comparability of B against A (module docstring); `uncaptured_ns`: each side's calibration
    mean, for nsys's overhead."""
    la, lb = labels
    sides = ((la, a), (lb, b))
    notes: list[str] = []
    problems, hidden = _tracing(sides)
    problems[:0] = _tracers(a, b, labels)  # said first: every other figure is read through it
    missing = [label for label, c in sides if not c.steps]
    if missing:
        problems.append(f"{' and '.join(missing)} {'have' if len(missing) > 1 else 'has'} no "
                        "step ranges: whole captures are compared, not steps")  # fmt: skip
    ga, gb = _gpus(a), _gpus(b)
    if ga != gb:
        problems.append(f"different GPUs ({la}: {ga}; {lb}: {gb})")
    if a.steps and b.steps and a.step_count != b.step_count:
        problems.append(f"different numbers of steps ({a.step_count} and {b.step_count}): "
                        "per-step means are compared")  # fmt: skip
    elif a.steps and b.steps and sorted(a.steps.names) != sorted(b.steps.names):
        notes.append(f"different step names in {la} and {lb}")
    overhead = _overhead_problems(a, b, labels, uncaptured_ns)
    if overhead:  # the captured step-time delta is no verdict on speed
        problems += overhead
        hidden.add("verdict")
    ahead = [label for label, c in sides if c.host_ran_ahead()]
    if len(ahead) == 1:
        notes.append(f"{ahead[0]}'s host ran ahead of its GPU and the other's did not: steps and "
                     "phases are compared by their GPU spans, not their NVTX ranges")  # fmt: skip
    if a.source.nsys_version != b.source.nsys_version and not (a.source.tracer or b.source.tracer):
        notes.append(f"different nsys versions: {la} {a.source.nsys_version}, "
                     f"{lb} {b.source.nsys_version}")  # fmt: skip
    notes += [f"some of {label}'s kernels were launched before the profiler started (their "
              "launching call is not in the trace)" if c.source.tracer else
              f"{label} is a sliced export: some kernels have no launching API row"
              for label, c in sides if c.sliced]  # fmt: skip
    return Comparability(tuple(problems), tuple(notes), frozenset(hidden))


def _tracers(a: Census, b: Census, labels: tuple[str, str]) -> list[str]:
    """The problem of two sides traced by different tracers (nsys, torch.profiler): the counts
    stay comparable, the times carry each tracer's own overhead."""
    ta, tb = a.source.traced_by, b.source.traced_by
    if (a.source.tracer or "nsys") == (b.source.tracer or "nsys"):
        return []
    return [
        f"{labels[0]} was traced by {ta}, {labels[1]} by {tb}: kernel, "
        "launch and copy counts (and copy bytes) stay comparable; times differ by the two "
        "tracers' overheads as well as by the runs"
    ]


def _tracing(sides: tuple[tuple[str, Census], ...]) -> tuple[list[str], set[str]]:
    """What the sides' tracing leaves unknown: a side that traced CUDA graphs whole (their
    kernels), a side without CUDA trace (all its GPU work); the kinds of sentence it hides."""
    problems: list[str] = []
    hidden: set[str] = set()
    graph = [label for label, c in sides if c.graph_trace_mode]
    if graph:
        problems.append(
            f"{' and '.join(graph)} traced CUDA graphs as whole graphs, hiding their kernels: "
            "kernel counts, classes, kernel time and launch counts are not compared (capture "
            "again with --cuda-graph-trace=node)"
        )
        hidden |= {"kernels", "launch"}
    blind = [label for label, c in sides if not_cuda_traced(c)]
    if blind:
        problems.append(
            f"{' and '.join(blind)} recorded no CUDA kernels and no CUDA API calls (was nsys run "
            "without `-t cuda`?): GPU busy and idle, kernels, launches and copies are unknown "
            "there, not zero, and are not compared; only step times are"
        )
        hidden |= {"gpu", "kernels", "launch", "copies", "idle", "nccl"}
    return problems, hidden


def not_cuda_traced(c: Census) -> bool:
    """Whether a capture recorded no GPU work and no CUDA call at all: no kernel, no launch, no
    graph launch (nsys run without `-t cuda`, whose tables census reads as empty)."""
    t = c.totals
    return t.kernel_count == 0 and t.launch_api_count == 0 and t.graph_launch_count == 0


def step_clock(a: Census, b: Census) -> str:
    """ "gpu" when either side's host ran ahead of its GPU (census.definitions.HOST_AHEAD_RULE):
    both sides' steps are then timed by their GPU spans; else "host" (their NVTX ranges)."""
    return "gpu" if a.host_ran_ahead() or b.host_ran_ahead() else "host"


def _gpus(c: Census) -> str:
    """`2 × NVIDIA H200`, or `none`."""
    counts: dict[str, int] = {}
    for g in c.source.gpus:
        counts[g.name or "unknown"] = counts.get(g.name or "unknown", 0) + 1
    return ", ".join(f"{n} × {name}" for name, n in sorted(counts.items())) or "none"


def _overhead_problems(
    a: Census, b: Census, labels: tuple[str, str], uncaptured: tuple[float | None, float | None]
) -> list[str]:
    """What the calibration runs (the same programs without nsys) say about the captured step
    times: nsys slowed the sides differently, or the deltas disagree in sign."""
    ua, ub = uncaptured  # on the clock the steps are compared by (step_clock)
    ta, tb = a.per_step_timing(), b.per_step_timing()
    key = GPU_SPAN_NS if step_clock(a, b) == "gpu" else STEP_TIME_NS
    if not ua or not ub or ta is None or tb is None or not ta[key] or not tb[key]:
        return []
    out, by = [], a.source.profiler
    ra, rb = ta[key] / ua, tb[key] / ub
    if max(ra, rb) / min(ra, rb) > OVERHEAD_RATIO_LIMIT:
        out.append(f"{by} slowed the sides differently (x{ra:.2f} and x{rb:.2f} against their "
                   "calibration runs): captured step times are not comparable")  # fmt: skip
    captured = tb[key] - ta[key]
    if (ub - ua) * captured < 0:
        out.append(
            f"the captured and uncaptured step-time deltas disagree in sign ({labels[1]} − "
            f"{labels[0]}: {captured / 1e6:+.2f} ms under {by}, {(ub - ua) / 1e6:+.2f} ms in the "
            f"calibration runs): {by} changed the comparison; `census ab` decides"
        )
    return out
