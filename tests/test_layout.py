"""The package's layout is its pipeline: imports point down the stages only, with no circles.

Every import is read from the source (function-level ones too), so a lazy import that climbs
back up a stage fails here as surely as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "census"

# Stages in the order data moves; a module may import its own stage or an earlier one.
FLOORS: tuple[tuple[str, ...], ...] = (
    (
        "census.errors",
        "census.paths",
        "census.units",
        "census.definitions",
        "census.model",
        "census.notebook",
    ),
    ("census.capture",),
    ("census.sources",),
    ("census.load",),
    ("census.census",),
    ("census.compare",),
    ("census.render",),
    ("census.store",),
    ("census.api", "census.frames"),
    ("census.cli", "census.__main__"),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> set[str]:
    """census modules that `path` imports anywhere in its body."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("census"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("census"):
            known = _modules()
            subs = {f"{node.module}.{a.name}" for a in node.names}
            found = subs & set(known)
            out.update(found or {node.module})
    return out


def _floor(module: str) -> int:
    for i, prefixes in enumerate(FLOORS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} belongs to no stage: add it to FLOORS")


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    # The package's __init__ is the lazy public API: it names modules as strings only.
    return {m: {i for i in _imports(p) if i != "census"} for m, p in mods.items() if m != "census"}


def test_every_module_has_a_stage() -> None:
    for module in _graph():
        _floor(module)


def test_no_import_climbs_up_the_pipeline() -> None:
    upward = [
        f"{m} (stage {_floor(m)}) imports {i} (stage {_floor(i)})"
        for m, deps in _graph().items()
        for i in deps
        if _floor(i) > _floor(m)
    ]
    assert upward == []


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (module -> modules it imports), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for dep in sorted(graph.get(node, ())):
            found = visit(dep, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for module in sorted(graph):
        found = visit(module, [])
        if found:
            return found
    return None


def test_no_import_circles() -> None:
    assert find_circle(_graph()) is None


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """An upward import, even inside a function, and a circle are both seen."""
    low = tmp_path / "low.py"
    low.write_text("def f():\n    from census.cli.app import app\n")
    assert "census.cli.app" in _imports(low)
    assert _floor("census.cli.app") > _floor("census.load.passes")
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def test_files_and_functions_stay_small() -> None:
    """Files under ~400 lines, functions under ~50, as the house style asks (with slack for
    the HTML page's templates)."""
    long_files = [
        f"{p.relative_to(PACKAGE)}: {n}"
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 420
    ]
    assert long_files == []


def test_only_the_api_calls_the_store() -> None:
    """The cache of later stages' outputs is the API's business: no stage reads or writes it."""
    callers = sorted(
        m for m, deps in _graph().items()
        if not m.startswith("census.store") and any(d.startswith("census.store") for d in deps)
    )  # fmt: skip
    assert callers == ["census.api"]
