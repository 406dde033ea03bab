"""A result's short repr and HTML card in a notebook, as every other output is made: its view
(census.api's census_view, diff_view, experiment_view: the limiter, the first line, the verdict,
computed there) rendered by census.render.notebook, which computes nothing. census/__init__.py
installs `shown_as` as the model's (census.model.shown), so that the model imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def shown_as(name: str) -> Callable[[Any], str]:
    """census.render.notebook's renderer `name` (census_repr, census_html, diff_repr, diff_html,
    experiment_repr) of a result's view: a Census, a CensusDiff or an Experiment in, text out."""
    from census.render import notebook

    render = getattr(notebook, name)
    return lambda result: render(result_view(result))


def result_view(result: Any) -> Any:
    """The view of a Census, a CensusDiff or an Experiment (census.api builds each)."""
    from census.api import census_view, diff_view, experiment_view
    from census.compare.ab.experiment import Experiment
    from census.compare.diff import CensusDiff
    from census.model.census import Census

    if isinstance(result, Census):
        return census_view(result)
    if isinstance(result, CensusDiff):
        return diff_view(result)
    if isinstance(result, Experiment):
        return experiment_view(result)
    raise TypeError(f"no view of a {type(result).__name__}")
