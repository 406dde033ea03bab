"""Code names a metric key by census/metrics.py's constants (`STEP_TIME_NS`), never by a string
literal: a literal equal to a key anywhere in census/ outside metrics.py fails here, so a renamed
or mistyped key cannot hide in a string (issue #54)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from census import metrics

PACKAGE = Path(__file__).resolve().parents[1] / "census"
NAMED = (
    *metrics.METRICS,
    *metrics.TIMING_METRICS,
    metrics.GPU_START_METRIC,
    *metrics.PHASE_METRICS,
    metrics.PHASE_SPAN_METRIC,
    *metrics.IDLE_METRICS,
)
KEYS = frozenset(m.name for m in NAMED)
# Files that may still spell keys as literals, with how many (none: every key is named).
ALLOWED: dict[str, int] = {}


def key_literals(path: Path, keys: frozenset[str] = KEYS) -> list[tuple[int, str]]:
    """(line, key) of each string constant in `path` equal to one of `keys`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in keys
    )


def literal_counts(root: Path = PACKAGE) -> Counter[str]:
    """Per file under `root` (its path from `root`'s parent), the key literals in it;
    metrics.py, where the keys are declared, is left out."""
    counts: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        if name != f"{root.name}/metrics.py" and (found := key_literals(path)):
            counts[name] = len(found)
    return counts


def test_every_key_has_its_constant() -> None:
    """metrics.py names each key once as an upper-case constant equal to it, and no constant
    names a key that is not declared."""
    constants = {
        name: value
        for name, value in vars(metrics).items()
        if name.isupper() and isinstance(value, str) and name == value.upper()
    }
    assert set(constants.values()) == KEYS
    assert set(metrics.COPY_COLUMNS) | set(metrics.MEMSET_KEYS) <= KEYS


def test_no_metric_key_is_a_string_literal() -> None:
    """Outside metrics.py, census/ spells no metric key as a string; the allowlist is exact
    (a file that no longer needs its entry, or needs fewer, fails too)."""
    counts = literal_counts()
    extra = {f: n for f, n in counts.items() if n > ALLOWED.get(f, 0)}
    detail = [
        f"{f}:{line}: {key!r} (use census.metrics.{key.upper()})"
        for f in extra
        for line, key in key_literals(PACKAGE.parent / f)
    ]
    assert detail == [], "metric keys written as string literals"
    stale = {f: n for f, n in ALLOWED.items() if counts.get(f, 0) != n}
    assert stale == {}, "ALLOWED is stale: set these files' counts to what they now hold"


def test_the_check_can_fail(tmp_path: Path) -> None:
    """A key as a literal (a subscript, a dict key, a tuple member) is found; a constant, an
    f-string mentioning a key and a docstring naming one are not."""
    root = tmp_path / "census"
    root.mkdir()
    (root / "metrics.py").write_text('STEP_TIME_NS = "step_time_ns"\n')
    (root / "bad.py").write_text(
        '"""Uses step_time_ns."""\n'
        "from census.metrics import STEP_TIME_NS\n"
        'x = row["gpu_busy_ns"] + row[STEP_TIME_NS]\n'
        'y = {"kernel_count": 1, "other": 2}\n'
        'z = ("h2d_bytes", f"{x} step_time_ns")\n'
    )
    assert key_literals(root / "bad.py") == [
        (3, "gpu_busy_ns"),
        (4, "kernel_count"),
        (5, "h2d_bytes"),
    ]
    assert literal_counts(root) == {"census/bad.py": 3}
