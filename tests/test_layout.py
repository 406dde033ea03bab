"""The package's layout is its pipeline: imports point down the stages only, with no circles.

Every import is read from the source (function-level ones too), so a lazy import that climbs
back up a stage fails here as surely as one at the top of a module. Files and functions stay
small, and no test module imports another (tests share tests/conftest.py and tests/helpers/).
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
        "census.metrics",
        "census.definitions",
        "census.triton_names",
        "census.step_model",
        "census.step_table",
        "census.model",
        "census.limiter",
        "census.notebook",
        "census.nccl_wait",
        "census.rank_model",
        "census.nccl_ranks",
    ),
    ("census.capture",),
    ("census.sources",),
    ("census.sqlite",),
    ("census.load",),
    ("census.census", "census.rank_census"),
    ("census.findings",),
    ("census.compare",),
    ("census.render",),
    ("census.store",),
    ("census.options", "census.sides", "census.api", "census.frames"),
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


def test_files_stay_small() -> None:
    """Files under ~400 lines, as the house style asks (with slack for the HTML page's
    templates)."""
    long_files = [
        f"{p.relative_to(PACKAGE)}: {n}"
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 420
    ]
    assert long_files == []


MAX_FUNCTION_LINES = 50
# Functions still longer than that, in modules whose owners are splitting them. Each entry is
# (module, qualified name); the test fails once one is short, so that it leaves this list.
STILL_LONG: set[tuple[str, str]] = set()


def function_lengths(path: Path) -> dict[str, int]:
    """Every function and method of `path` (nested ones too, named `outer.inner` or
    `Class.method`) and its length: its lines from `def` to its last line, docstring, comments
    and blank lines included, decorators not."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                lengths[name] = max(lengths.get(name, 0), child.end_lineno - child.lineno + 1)
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return lengths


def test_functions_stay_small() -> None:
    """No function or method of census/ is longer than MAX_FUNCTION_LINES, from its `def` line to
    its last line, docstring included (function_lengths), but those in STILL_LONG."""
    lengths = {
        (module, name): n
        for module, path in _modules().items()
        for name, n in function_lengths(path).items()
    }
    too_long = {key for key, n in lengths.items() if n > MAX_FUNCTION_LINES}
    shown = [f"{m}.{f}: {lengths[m, f]} lines" for m, f in sorted(too_long - STILL_LONG)]
    assert shown == [], f"split these into functions of {MAX_FUNCTION_LINES} lines or fewer"
    assert sorted(STILL_LONG - too_long) == [], "short (or gone) now: remove from STILL_LONG"


def test_function_lengths_count_from_def_to_the_last_line(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "@decorator\n"
        "def f():\n"
        '    """Doc."""\n'
        "\n"
        "    def inner():\n"
        "        return 1\n"
        "    return inner\n"
        "class C:\n"
        "    async def g(self):\n"
        "        pass\n"
    )
    assert function_lengths(source) == {"f": 6, "f.inner": 2, "C.g": 2}


TESTS = PACKAGE.parent / "tests"


def imported_test_modules(path: Path) -> set[str]:
    """The test modules (tests/test_*.py) that `path` imports, anywhere in its body."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "tests" if node.level else (node.module or "")
            if node.level and node.module:
                base = f"tests.{node.module}"
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        found.update(n for n in names if n.split(".")[-1].startswith("test_") and
                     n.startswith("tests."))  # fmt: skip
    return found


def test_no_test_module_imports_another() -> None:
    """Tests share helpers through tests/conftest.py (fixtures) and tests/helpers/ (plain
    modules), never by importing a test module: that runs its tests' module code twice and ties
    one subject's file to another's."""
    imports = {
        str(p.relative_to(TESTS)): sorted(found)
        for p in sorted(TESTS.rglob("*.py"))
        if (found := imported_test_modules(p))
    }
    assert imports == {}


def test_the_test_import_check_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text(
        "from tests.test_engine import real_exports\n"
        "import tests.test_ranks\n"
        "from tests import test_gpu_span\n"
        "from .test_cli import runner\n"
        "from tests.helpers.exports import small_export\n"
        "from tests.conftest import DATA\n"
    )
    assert imported_test_modules(module) == {
        "tests.test_engine", "tests.test_ranks", "tests.test_gpu_span", "tests.test_cli"}  # fmt: skip


# census/sqlite/'s one door: its package (read_batches and the ranges it reads) and its notes.
SQLITE_DOOR = {"census.sqlite", "census.sqlite.notes"}


def test_the_sqlite_reader_has_one_door() -> None:
    """Outside census/sqlite/, nothing imports the file-format reader's modules (btree, pages,
    plan, columns) but through the package itself: what reads a table asks read_batches."""
    inside = sorted(
        f"{m} imports {d}" for m, deps in _graph().items() if not m.startswith("census.sqlite")
        for d in deps if d.startswith("census.sqlite") and d not in SQLITE_DOOR
    )  # fmt: skip
    assert inside == []
    assert _floor("census.sqlite.pages") < _floor("census.load.kernels")


def test_only_the_api_calls_the_store() -> None:
    """The cache of later stages' outputs is the API's business: no stage reads or writes it."""
    callers = sorted(
        m for m, deps in _graph().items()
        if not m.startswith("census.store") and any(d.startswith("census.store") for d in deps)
    )  # fmt: skip
    assert callers == ["census.api"]
