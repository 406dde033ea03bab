"""The package's layout is its pipeline: imports point down the stages only, with no circles.

Every import is read from the source (function-level ones too), so a lazy import that climbs
back up a stage fails here as surely as one at the top of a module. Files and functions stay
small, and no test module imports another (tests share tests/conftest.py and tests/helpers/).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "census"

# Stages in the order data moves; a module may import its own stage or an earlier one. The top
# level is ordered too: units, errors, the files and the heap, the keys and the definitions, then
# the model, what is found in one Census, and the pipeline's stages.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("census.units",),
    ("census.errors",),
    ("census.paths", "census.heap"),
    ("census.metrics",),
    ("census.definitions",),
    ("census.model",),
    ("census.findings",),
    ("census.capture",),
    ("census.sources",),
    ("census.sqlite",),
    ("census.load",),
    ("census.compare",),
    ("census.compare.ab",),  # the A/B arms' statistics, above the diff and its gates
    ("census.render",),
    ("census.store",),
    ("census.options",),
    ("census.api",),
    ("census.frames",),
    ("census.cli", "census.__main__"),
)

# Imports no floor order may ever allow, whatever the floors become: (importer, what it may not
# import, why). Lazy imports count as any other.
FORBIDDEN: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("census.model", ("census.render", "census.findings", "census.compare", "census.load",
                      "census.sqlite", "census.sources", "census.capture", "census.store",
                      "census.api", "census.cli"),
     "the model is the data: a repr asks census.model.shown, which census/__init__ points at "
     "census.render.notebook"),
    ("census.render", ("census.load", "census.sqlite", "census.sources", "census.capture",
                       "census.store", "census.api", "census.cli"),
     "a renderer formats the view it is given: it never reaches the engine"),
)  # fmt: skip
MAX_TOP_LEVEL = 10  # modules directly in census/, __init__.py and __main__.py counted


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
    """The stage of `module`: its most specific prefix's (census.compare.ab.stats is
    census.compare.ab's, not census.compare's)."""
    found = [(len(p), i) for i, prefixes in enumerate(FLOORS) for p in prefixes
             if module == p or module.startswith(p + ".")]  # fmt: skip
    if not found:
        raise AssertionError(f"{module} belongs to no stage: add it to FLOORS")
    return max(found)[1]


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    # The package's __init__ is the lazy public API: it names modules as strings only.
    return {m: {i for i in _imports(p) if i != "census"} for m, p in mods.items() if m != "census"}


def test_every_module_has_a_stage() -> None:
    for module in _graph():
        _floor(module)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of `graph` (module -> modules it imports) from a lower stage to a higher."""
    return [
        f"{m} (stage {_floor(m)}) imports {i} (stage {_floor(i)})"
        for m, deps in graph.items()
        for i in deps
        if _floor(i) > _floor(m)
    ]


def test_no_import_climbs_up_the_pipeline() -> None:
    assert upward_imports(_graph()) == []


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
    # the A/B statistics are a stage above the diff: the diff (or its gates) reaching into them
    # climbs; an experiment explained with the diff does not
    assert _floor("census.compare.ab.stats") > _floor("census.compare.diff")
    assert upward_imports(
        {
            "census.compare.diff": {"census.compare.ab.stats"},
            "census.compare.gates": {"census.compare.ab"},
        }
    ) == [
        "census.compare.diff (stage 11) imports census.compare.ab.stats (stage 12)",
        "census.compare.gates (stage 11) imports census.compare.ab (stage 12)",
    ]
    assert upward_imports({"census.compare.ab.experiment": {"census.compare.diff"}}) == []


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def forbidden_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of `graph` that FORBIDDEN names, with why it is forbidden."""
    return sorted(
        f"{m} imports {d}: {why}"
        for low, banned, why in FORBIDDEN
        for m, deps in graph.items() if _within(m, low)
        for d in deps if any(_within(d, b) for b in banned)
    )  # fmt: skip


def test_no_forbidden_import() -> None:
    """The model imports no renderer (nor any stage that computes), and no renderer imports the
    engine (load/, sqlite/, sources/, capture/), lazy imports included."""
    assert forbidden_imports(_graph()) == []


def top_level_modules(package: Path) -> list[str]:
    """The .py files directly in `package`."""
    return sorted(p.name for p in package.glob("*.py"))


def test_the_top_level_stays_small() -> None:
    """At most MAX_TOP_LEVEL modules directly in census/: the rest lives in its stage's folder."""
    top = top_level_modules(PACKAGE)
    assert len(top) <= MAX_TOP_LEVEL, top


LAYOUT_DOC = PACKAGE.parent / "docs" / "layout.md"


def map_entries(doc: str) -> dict[str, str]:
    """docs/layout.md's map of census/ (its first code block): each entry's name (`api.py`,
    `load/`), the text of its lines (a name at two spaces' indent starts an entry)."""
    block = doc.split("```", 2)[1]
    entries: dict[str, str] = {}
    name = None
    for line in block.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name = line.split()[0]
            entries[name] = ""
        if name is not None:
            entries[name] += line + "\n"
    return entries


def unnamed_modules(doc: str, modules: list[Path]) -> list[str]:
    """The modules of census/ (paths relative to it) that the map does not name: a top-level one
    needs its own entry; one in a folder its file name (and any subfolder's `sub/`) in its
    folder's entry; a folder's __init__.py the folder's entry."""
    entries = map_entries(doc)
    missing = []
    for path in modules:
        parts = path.parts
        if len(parts) == 1:
            named = parts[0] in entries
        else:
            text = entries.get(parts[0] + "/")
            words = [f"{sub}/" for sub in parts[1:-1]]
            if parts[-1] != "__init__.py":
                words.append(parts[-1])
            named = text is not None and all(w in text for w in words)
        if not named:
            missing.append(str(path))
    return missing


def test_the_layout_doc_names_every_module() -> None:
    """docs/layout.md's map names every module of census/: the map stays honest."""
    modules = [p.relative_to(PACKAGE) for p in sorted(PACKAGE.rglob("*.py"))]
    assert unnamed_modules(LAYOUT_DOC.read_text(encoding="utf-8"), modules) == []


def test_the_new_rules_can_fail(tmp_path: Path) -> None:
    """A model module importing a renderer (lazily), a renderer importing the engine, an
    eleventh top-level module and a module missing from the map are all seen."""
    model = tmp_path / "census_like.py"
    model.write_text("def __repr__(self):\n    from census.render.notebook import census_repr\n")
    assert "census.render.notebook" in _imports(model)
    graph = {"census.model.census": _imports(model), "census.render.views": {"census.load.finish"},
             "census.render.table": {"census.model.census", "census.findings.limiter"}}  # fmt: skip
    assert [line.split(":")[0] for line in forbidden_imports(graph)] == [
        "census.model.census imports census.render.notebook",
        "census.render.views imports census.load.finish",
    ]
    assert _floor("census.model.census") < _floor("census.render.notebook")
    assert _floor("census.units") < _floor("census.errors") < _floor("census.definitions")
    for i in range(MAX_TOP_LEVEL + 1):
        (tmp_path / f"m{i}.py").write_text("")
    assert len(top_level_modules(tmp_path)) > MAX_TOP_LEVEL
    doc = "```\ncensus/\n  api.py   x\n  load/    finish.py (x), and\n           more.py\n```\n"
    found = [Path("api.py"), Path("load/finish.py"), Path("load/more.py"), Path("load/__init__.py")]
    assert unnamed_modules(doc, found) == []
    assert unnamed_modules(doc, [*found, Path("units.py"), Path("load/gone.py"),
                                 Path("compare/ab/stats.py")]) == [
        "units.py", "load/gone.py", "compare/ab/stats.py"]  # fmt: skip


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
