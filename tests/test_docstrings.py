"""Every module of census/ and every public function, class and method in it says what it is: a
docstring, read from the source. And what the docstrings and comments name of the package is
there: a file (`load/figures.py`, `tests/test_layout.py`) or a dotted name (`census.load.pool`,
`census.api.summarize`) that no longer exists is a stale sentence."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "census"
REPO = PACKAGE.parent
# A file name (`kernels.py`, `load/figures.py`) and a dotted name of the package (`census.api`).
FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*\w+\.py)\b")
DOTTED_NAME = re.compile(r"(?<![\w.])census(?:\.[A-Za-z_]\w*)+")


def undocumented(path: Path) -> list[str]:
    """The module (if it has no docstring) and the public functions, classes and methods of
    `path` without one; a name starting with _ is private, and so is all inside it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    missing = [] if ast.get_docstring(tree) else ["(module)"]

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if child.name.startswith("_"):
                continue
            if not ast.get_docstring(child):
                missing.append(prefix + child.name)
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return missing


def every_module(check: Callable[[Path], list[str]]) -> list[str]:
    """What `check` finds in each module of census/, each finding after its file's name."""
    return [
        f"{path.relative_to(PACKAGE)}: {found}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for found in check(path)
    ]


def test_census_is_documented() -> None:
    assert every_module(undocumented) == []


def test_the_check_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    pass\n"
        "def _g():\n    pass\n"
        "class C:\n    '''Doc.'''\n    def m(self):\n        pass\n    def _n(self):\n        pass\n"
        "class _D:\n    def m(self):\n        pass\n"
    )
    assert undocumented(module) == ["(module)", "f", "C.m"]


def prose(path: Path) -> list[tuple[int, str]]:
    """The docstrings (module, classes, functions) and comments of `path`, with their lines."""
    source = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                found.append((node.body[0].lineno, doc))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
    return sorted(found)


@cache
def package_modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its folder's)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


@cache
def top_level_names(path: Path) -> frozenset[str]:
    """What `path` defines or imports at its top level (inside `if` and `try` too), and, where it
    answers attributes with a module `__getattr__` (a lazy API), every string in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", ()):
                    visit(handler.body)

    visit(tree.body)
    if "__getattr__" in names:
        names.update(
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        )
    return frozenset(names)


def names_something(dotted: str) -> bool:
    """Whether `census.a.b.c` is a module of the package, or a name defined at the top of the
    longest module it starts with (what follows that name, an attribute of it, is not checked)."""
    parts = dotted.split(".")
    modules = package_modules()
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in modules:
            return cut == len(parts) or parts[cut] in top_level_names(modules[module])
    return False


def stale_names(path: Path) -> list[str]:
    """The file names and dotted package names in `path`'s docstrings and comments that name
    nothing: a file is looked for beside `path`, in census/ and in the repository's root."""
    stale = []
    for line, text in prose(path):
        for match in FILE_NAME.finditer(text):
            name = match.group(1)
            if not any((where / name).is_file() for where in (path.parent, PACKAGE, REPO)):
                stale.append(f"{line}: {name}")
        stale += [f"{line}: {m.group(0)}" for m in DOTTED_NAME.finditer(text)
                  if not names_something(m.group(0))]  # fmt: skip
    return stale


def test_docstrings_name_what_exists() -> None:
    assert every_module(stale_names) == []


def test_the_stale_name_check_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Made by census.engine, read by merge.py (tests/test_layout.py holds it)."""\n'
        "# census/load/kernels.py and load/figures.py exist; load/merge.py does not\n"
        "def f():\n"
        '    """census.load.pool.map_processes, census.cli.app and census.summarize exist;\n'
        '    census.compare.ab.sequential.looks_of and census.load.no_such_module do not."""\n'
    )
    assert stale_names(module) == [
        "1: merge.py",
        "1: census.engine",
        "2: load/merge.py",
        "4: census.compare.ab.sequential.looks_of",
        "4: census.load.no_such_module",
    ]
