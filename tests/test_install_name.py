"""Every install command census shows installs census (issue #59, install and names).

The distribution `census` on PyPI is another project (a US Census Bureau API wrapper), so
`pip install 'census[dask]'` installs that one and no Dask. Each `pip install ...` in README.md,
docs/, bench/README.md, .ci/run and census's own strings (error messages and --help texts) must
name this project: a path (`.`, `'.[dask]'`), the distribution pyproject.toml declares, or one of
the packages census depends on (torch and its declared dependencies).
"""

from __future__ import annotations

import ast
import re
import shlex

from census.load.scheduler import INSTALL_HINT
from tests.helpers.files import REPO

INSTALL = re.compile(r"pip3? install\s+([^`\n;&|)]*)")  # up to a code span's end, `&&`, `;`, `)`
PYPI_CENSUS = "census"  # the US Census Bureau API wrapper on PyPI, not this project
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "bench/README.md"]


def canonical(name: str) -> str:
    """A distribution name as PyPI compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_name() -> str:
    """pyproject.toml's [project] name (read without tomllib, which Python 3.10 lacks)."""
    return re.search(r'^name = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)[1]


def declared_names() -> set[str]:
    """The project's distribution and every package its [project] tables declare a dependency on
    (torch included, the capture extra's), canonical."""
    text = (REPO / "pyproject.toml").read_text()
    tables = text[text.index("[project]") : text.index("[project.scripts]")]
    needs = re.findall(r'"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?\s*[<>=!~]', tables)
    return {canonical(project_name()), *map(canonical, needs)}


def census_strings() -> list[str]:
    """Every string literal in census's source (implicit concatenations joined, as Python
    joins them), rich's `\\[` escape undone: what its messages and help texts can say."""
    texts: list[str] = []
    for path in sorted((REPO / "census").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value.replace("\\[", "["))
    return texts


def install_commands() -> list[str]:
    """Each `pip install ...` the pages, CI and census's strings show, as written."""
    texts = [page.read_text() for page in PAGES]
    texts += [(REPO / ".ci/run").read_text(), *census_strings()]
    return [m[0].strip() for text in texts for m in INSTALL.finditer(text)]


def requirements(command: str) -> list[str]:
    """The requirements one install command names (its options left out)."""
    args = shlex.split(INSTALL.match(command)[1].replace("\\\n", " "))
    return [arg for arg in args if not arg.startswith("-")]


def test_the_distribution_is_not_pypis_census() -> None:
    assert canonical(project_name()) != PYPI_CENSUS


def test_every_install_command_installs_this_project() -> None:
    commands = install_commands()
    # the scan sees what a user reads: README's first line, the Dask hint, CI's install
    assert "pip install ." in commands
    assert INSTALL_HINT in commands
    assert "pip install -q -e '.[test]'" in commands
    allowed = declared_names() - {PYPI_CENSUS}
    wrong = []
    for command in commands:
        for requirement in requirements(command):
            if requirement == "..." or re.fullmatch(r"\.(\[[a-z,]+\])?", requirement):
                continue  # words left out, or this folder: the project itself
            name = re.match(r"[A-Za-z0-9._-]*", requirement)[0]
            if canonical(name) not in allowed:
                wrong.append(command)
    assert not wrong, f"install commands that name another distribution: {wrong}"
