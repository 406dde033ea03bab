"""Every module of the engine (census/load/, census/sqlite/) and every public function, class and
method in it says what it is: a docstring, read from the source."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "census"
DOCUMENTED = ("load", "sqlite")  # the folders held to it


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


def test_the_engine_is_documented() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for folder in DOCUMENTED
        for path in sorted((PACKAGE / folder).glob("*.py"))
        for name in undocumented(path)
    ]
    assert found == []


def test_the_check_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    pass\n"
        "def _g():\n    pass\n"
        "class C:\n    '''Doc.'''\n    def m(self):\n        pass\n    def _n(self):\n        pass\n"
        "class _D:\n    def m(self):\n        pass\n"
    )
    assert undocumented(module) == ["(module)", "f", "C.m"]
