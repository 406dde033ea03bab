"""Terminal tables that fit the terminal: every column is kept, numbers are never cut, and names
are shortened so that different names stay different.

A table wider than the terminal first shortens its name column (down to MIN_NAME columns); if it
still does not fit, its value columns are split over several tables, each repeating the names.
"""

from __future__ import annotations

import re

from rich.console import Console
from rich.markup import escape
from rich.table import Table

MIN_NAME = 24
ELLIPSIS = "…"
_CAST = re.compile(r"\((?:unsigned )?(?:int|long|char|bool|short)\)")
_SCOPE = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|[A-Za-z_]\w*)::")


def simplify(name: str) -> str:
    """A C++ kernel name without what rarely tells kernels apart: `void `, integer casts in
    template arguments and namespace qualifiers."""
    text = " ".join(name.split())
    text = text.removeprefix("void ")
    return _SCOPE.sub("", _CAST.sub("", text))


def _cut(text: str, width: int, at: int | None = None) -> str:
    """`text` in `width` columns: whole, or its start and end around an ellipsis; with `at`,
    the start, an ellipsis and a window that begins a little before position `at`."""
    if len(text) <= width:
        return text
    if at is None:
        head = (width - 1) * 3 // 5
        return text[:head] + ELLIPSIS + text[len(text) - (width - 1 - head) :]
    base = re.match(r"[^<(]*", text).end()  # the function's own name, before its arguments
    lead = min(base, max(6, (width - 1) // 2 - 2))
    start = max(lead, at - 6)
    room = width - lead - 1
    window = text[start : start + room]
    if start + room < len(text):
        window = window[:-1] + ELLIPSIS
    return text[:lead] + (ELLIPSIS if start > lead else "") + window


def _common_prefix(texts: list[str]) -> int:
    first, last = min(texts), max(texts)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return n


def short_names(names: list[str], width: int) -> list[str]:
    """Each name in at most `width` columns; names that differ are shown differently (by the
    part where they differ, when cutting would hide it; by a `#n` suffix as a last resort)."""
    full = [simplify(n) for n in names]
    shown = [_cut(f, width) for f in full]
    for source in (full, [" ".join(n.split()) for n in names]):
        for _ in range(4):
            groups = _collisions(names, shown)
            if not groups:
                return shown
            for group in groups:
                at = _common_prefix([source[i] for i in group])
                for i in group:
                    shown[i] = _cut(source[i], width, at)
    for group in _collisions(names, shown):
        for k, i in enumerate(group[1:], start=2):
            tag = f" #{k}"
            shown[i] = _cut(shown[i], width - len(tag)) + tag
    return shown


def _collisions(names: list[str], shown: list[str]) -> list[list[int]]:
    """Groups of indexes whose shown texts are equal though their names are not."""
    by_text: dict[str, list[int]] = {}
    for i, text in enumerate(shown):
        by_text.setdefault(text, []).append(i)
    return [g for g in by_text.values() if len({names[i] for i in g}) > 1]


def _column_width(head: str, cells: list[str]) -> int:
    """A value column's width: its widest cell, and no narrower than its header's longest word."""
    words = max((len(w) for w in head.split()), default=0)
    width = max([words, *(len(c) for c in cells)])
    return max(width, len(head)) if len(head) <= width + 2 else width  # short heads: one line


def fit_tables(
    title: str,
    head: list[str],
    rows: list[list[str]],
    width: int,
    keys: int = 1,
    left: int | None = None,
) -> list[tuple[str, Table]]:
    """(title, table) of one or more rich tables of `rows` that fit `width` columns. The first `keys` columns
    are names (left-aligned; the first is shortened if needed and repeated in every part); the
    rest are values, never cut and never wrapped (right-aligned unless among the first `left`
    columns)."""
    left = keys if left is None else left
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in head]
    value_widths = [
        _column_width(h, list(c)) for h, c in zip(head[keys:], cols[keys:], strict=True)
    ]
    key_widths = [max([len(head[i]), *(len(c) for c in cols[i])]) for i in range(keys)]
    fixed_keys = sum(w + 3 for w in key_widths[1:])

    def cost(widths: list[int], name: int) -> int:
        return 1 + name + 3 + fixed_keys + sum(w + 3 for w in widths)

    name_natural = key_widths[0] if keys else 0
    groups: list[list[int]] = []
    current: list[int] = []
    for i in range(len(value_widths)):
        if (
            current
            and cost([value_widths[j] for j in (*current, i)], min(name_natural, MIN_NAME)) > width
        ):
            groups.append(current)
            current = []
        current.append(i)
    groups.append(current)
    name_width = min(
        [name_natural, *(width - cost([value_widths[j] for j in g], 0) for g in groups)]
    )
    name_width = max(name_width, min(name_natural, MIN_NAME))
    names = short_names([r[0] for r in rows], name_width) if keys else []
    tables: list[tuple[str, Table]] = []
    for part, group in enumerate(groups, start=1):
        suffix = f" ({part}/{len(groups)})" if len(groups) > 1 else ""
        t = Table()
        # Fixed widths: what was measured here is what rich draws, so every part fits.
        for i in range(keys):
            w = name_width if i == 0 else key_widths[i]
            t.add_column(escape(head[i]), no_wrap=True, width=w)
        for j in group:
            justify = "left" if keys + j < left else "right"
            t.add_column(escape(head[keys + j]), justify=justify, width=value_widths[j])
        for r, row in enumerate(rows):
            key_cells = [names[r], *row[1:keys]] if keys else []
            t.add_row(*(escape(c) for c in key_cells), *(escape(row[keys + j]) for j in group))
        tables.append((title + suffix, t))
    return tables


def print_fit(
    console: Console, title: str, head: list[str], rows: list[list[str]], left: int = 1
) -> None:
    """Print `rows` as fit_tables lays them out, each part under its title line."""
    for part_title, table in fit_tables(title, head, rows, console.width, left=left):
        console.print(f"[italic]{escape(part_title)}[/italic]", highlight=False)
        console.print(table)
