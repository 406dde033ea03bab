"""rich renderables -> text: every terminal renderer returns a string; the CLI prints it."""

from __future__ import annotations

import io
from collections.abc import Callable

from rich.console import Console


def rich_text(
    draw: Callable[[Console], None], width: int | None = None, color: bool = False
) -> str:
    """What `draw` prints on a console `width` columns wide (80 by default), with ANSI styles
    only when `color`."""
    buf = io.StringIO()
    draw(Console(file=buf, width=width or 80, force_terminal=color, no_color=not color))
    return buf.getvalue()
