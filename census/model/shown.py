"""How a result shows itself in a notebook: its short repr and its HTML card.

The model imports no renderer. A result's `__repr__` and `_repr_html_` ask `shown(name, obj)`,
and the package's `__init__` installs what answers (census.api.notebook: the result's view,
rendered by census.render.notebook's function of that name, imported on the first repr): the
dependency points from the public API down to the model, never from the model up to render/.
"""

from __future__ import annotations

from collections.abc import Callable

# name -> the function that renders a result that way (installed by census/__init__.py)
_finder: Callable[[str], Callable[[object], str]] | None = None


def install(finder: Callable[[str], Callable[[object], str]]) -> None:
    """Set what finds the renderer of each name: census/__init__.py installs
    census.api.notebook's, so that every repr in a notebook is a card."""
    global _finder
    _finder = finder


def shown(name: str, obj: object) -> str:
    """`obj` rendered by the installed renderer `name` (census_repr, census_html, diff_repr,
    diff_html, experiment_repr); object.__repr__'s text when none is installed."""
    if _finder is None:
        return object.__repr__(obj)
    return _finder(name)(obj)
