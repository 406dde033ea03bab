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

from census.units import one_line

MIN_NAME = 24
ELLIPSIS = "…"
_CAST = re.compile(r"\((?:unsigned )?(?:int|long|char|bool|short)\)")
# A qualifier is an identifier before `::`. Matching from the start of each word only, and
# possessively, keeps this linear: a 1 MiB name is one scan, not a retry from every letter.
_SCOPE = re.compile(r"\(anonymous namespace\)::|<unnamed>::|(?<!\w)(\w++)::")
_IDENTIFIER_START = re.compile(r"[A-Za-z_]")


def simplify(name: str) -> str:
    """A C++ kernel name without what rarely tells kernels apart: `void `, integer casts in
    template arguments and namespace qualifiers."""
    text = " ".join(name.split())
    text = text.removeprefix("void ")
    return _SCOPE.sub(_unqualify, _CAST.sub("", text))


# What a simplified kernel name carries that tells least, dropped before anything is cut: the
# lambdas nested in a functor's type (`[lambda() (instance 3)]::operator ()() `), each kept only
# by its argument types where it has any (`lambda(BFloat16)`).
_EMPTY_LAMBDA = re.compile(r"::\[lambda\(\) \(instance \d+\)\]")
_LAMBDA = re.compile(r"\[lambda(\([^()]*\))? \(instance \d+\)\]")
_PARENS = re.compile(r"[()]")
_ENDS_NAME = re.compile(r"[\w>]\Z")


def compact(text: str) -> str:
    """A simplified name (simplify) without its parameter lists, its own and those of the
    functions in its template arguments, and with its lambdas as `lambda(ARGS)`: the function's
    name and its template arguments, what tells kernels of one name apart."""
    text = text.replace("operator ()() ", "").replace("<void ", "<")
    text = _EMPTY_LAMBDA.sub("", text.replace(", void ", ", "))
    text = _LAMBDA.sub(lambda m: "lambda" + (m[1] or ""), text)
    kept, at = [], 0
    stack: list[bool] = []  # whether each open parenthesis starts a parameter list
    inside = 0  # how many of those are open
    for m in _PARENS.finditer(text):
        if m[0] == "(":
            before = text[max(0, m.start() - 6) : m.start()]
            params = bool(_ENDS_NAME.search(before)) and not before.endswith("lambda")
            if params and not inside:
                kept.append(text[at : m.start()])
            stack.append(params)
            inside += params
        elif stack and stack.pop():
            inside -= 1
            if not inside:
                at = m.end()
    return "".join(kept) + ("" if inside else text[at:])


def _unqualify(m: re.Match[str]) -> str:
    """What stays of a qualifier: nothing; of a word that does not start like an identifier,
    its part before the first letter or underscore (`9ab::` leaves `9`)."""
    word = m[1]
    if word is None:
        return ""
    start = _IDENTIFIER_START.search(word)
    return m[0] if start is None else word[: start.start()]


def _cut(text: str, width: int, at: int | None = None) -> str:
    """`text` in `width` columns: whole, or its start and end around an ellipsis; with `at`,
    the start, an ellipsis and a window that begins a little before position `at`."""
    if len(text) <= width:
        return text
    if at is None:
        head = (width - 1) * 3 // 5
        return text[:head] + ELLIPSIS + text[len(text) - (width - 1 - head) :]
    base = re.match(r"[^<(]*", text).end()  # the function's own name, before its arguments
    # the name kept whole where the window still has room beside it; else its start
    lead = base if base + 8 <= width else min(base, max(6, (width - 1) // 2 - 2))
    room = width - lead - 1
    start = max(lead, _word_start(text, at, max(1, min(12, room - 3))))
    start = max(lead, min(start, len(text) - room))  # a window at the end fills its room
    window = text[start : start + room]
    if start + room < len(text):
        window = window[:-1] + ELLIPSIS
    return text[:lead] + (ELLIPSIS if start > lead else "") + window


def _word_start(text: str, at: int, back: int) -> int:
    """Where the window showing position `at` begins: the start of the word or template
    argument `at` is in, when that is at most `back` characters before it; else `at` - `back`
    (so that `at` is inside the window, before the ellipsis that may end it)."""
    for i in range(at - 1, max(-1, at - back - 1), -1):
        if text[i] in " <:":
            return i + (text[i] != "<")
    return max(0, at - back)


def _head(text: str, width: int) -> str:
    """A compact name in `width` columns: a name with template arguments by its start (its
    function's name first); a plain one by its start and end (`triton_..._view_11`)."""
    if len(text) <= width or "<" not in text:
        return _cut(text, width)
    return text[: width - 1] + ELLIPSIS


def _common_prefix(texts: list[str]) -> int:
    first, last = min(texts), max(texts)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return n


def short_names(names: list[str], width: int) -> list[str]:
    """Each name in at most `width` columns; names that differ are shown differently. A name is
    shown by its function's name and template arguments (compact) first, its parameters only
    where they alone tell it apart, and its namespaces only where those alone do; cut, it keeps
    the function's name whole where that leaves room and the part where it differs from the
    names it would be confused with; a `#n` suffix is the last resort."""
    full = [simplify(n) for n in names]
    short = [compact(f) for f in full]
    shown = [_head(s, width) for s in short]
    raw = [" ".join(n.split()) for n in names]
    for source, before in ((short, None), (full, short), (raw, full)):
        for _ in range(4):
            groups = _collisions(names, shown)
            if not groups:
                return shown
            for group in groups:
                if before is not None and len({before[i] for i in group}) > 1:
                    continue  # told apart by the shorter form: not by this one's extra text
                at = _common_prefix([source[i] for i in group])
                for i in group:
                    shown[i] = _cut(source[i], width, at)
    for group in _collisions(names, shown):
        order = list(dict.fromkeys(names[i] for i in group))  # equal names keep equal texts
        for i in group:
            k = order.index(names[i]) + 1
            if k > 1:
                tag = f" #{k}"
                room = width - len(tag)
                text = shown[i] if len(shown[i]) <= room else shown[i][: room - 1] + ELLIPSIS
                shown[i] = text + tag
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
    title: str, head: list[str], rows: list[list[str]], width: int, left: int = 1
) -> list[tuple[str, Table]]:
    """(title, table) of one or more rich tables of `rows` that fit `width` columns. The first
    column holds names: shortened if needed (to MIN_NAME at least) and repeated in every part;
    the others hold values, never cut (right-aligned unless among the first `left` columns)."""
    title, head = one_line(title), [one_line(h) for h in head]
    rows = [[one_line(c) for c in r] for r in rows]  # names and texts from the export, labels
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in head]
    widths = [_column_width(h, list(c)) for h, c in zip(head[1:], cols[1:], strict=True)]
    natural = max([len(head[0]), *(len(c) for c in cols[0])])

    def cost(group: list[int], name: int) -> int:  # rich's box: a border and two pads a column
        return 1 + name + 3 + sum(widths[j] + 3 for j in group)

    groups: list[list[int]] = [[]]
    for i in range(len(widths)):
        if groups[-1] and cost([*groups[-1], i], min(natural, MIN_NAME)) > width:
            groups.append([])
        groups[-1].append(i)
    name_width = min([natural, *(width - cost(g, 0) for g in groups)])
    name_width = max(name_width, min(natural, MIN_NAME))
    names = short_names([r[0] for r in rows], name_width)
    tables: list[tuple[str, Table]] = []
    for part, group in enumerate(groups, start=1):
        suffix = f" ({part}/{len(groups)})" if len(groups) > 1 else ""
        t = Table()
        # Fixed widths: what was measured here is what rich draws, so every part fits.
        t.add_column(escape(head[0]), no_wrap=True, width=name_width)
        for j in group:
            justify = "left" if 1 + j < left else "right"
            t.add_column(escape(head[1 + j]), justify=justify, width=widths[j])
        for name, row in zip(names, rows, strict=True):
            t.add_row(escape(name), *(escape(row[1 + j]) for j in group))
        tables.append((title + suffix, t))
    return tables


def print_fit(
    console: Console, title: str, head: list[str], rows: list[list[str]], left: int = 1
) -> None:
    """Print `rows` as fit_tables lays them out, each part under its title line."""
    for part_title, table in fit_tables(title, head, rows, console.width, left=left):
        console.print(f"[italic]{escape(part_title)}[/italic]", highlight=False)
        console.print(table)
