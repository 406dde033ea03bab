"""Reading the tables rich draws in census's terminal output."""

from __future__ import annotations


def terminal_tables(text: str) -> list[list[str]]:
    """The lines of each rich table drawn in `text` (from its top border to its bottom one)."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("┏"):
            current = []
        if current is not None:
            current.append(line)
        if line.startswith("└"):
            tables.append(current)
            current = None
    return tables


def cells(line: str) -> list[str]:
    """The cells of one row of a terminal table."""
    return [c.strip() for c in line.strip("│").split("│")]


def headings(table: list[str]) -> list[str]:
    """The column headings of one rich table, each joined over the lines it is wrapped on."""
    head = [cells(ln.replace("┃", "│")) for ln in table if ln.startswith("┃")]
    return [" ".join(w for w in col if w) for col in zip(*head, strict=True)]
