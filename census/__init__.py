"""census: explain why one PyTorch training run is faster than another, from Nsight Systems.

The public API, imported lazily so that `import census` (and `census --help`) stays fast:

- `census.summarize(path, options=None, *, steps=..., phases=..., ...) -> Census`: a
  `.sqlite`, `.nsys-rep`, capture folder, rank folder or `sample:NAME`.
- `census.diff(a, b, labels=None, options=None, *, steps=..., ...) -> CensusDiff`: each side
  a Census or a path.
- `census.explain(d) -> list[str]`: the explanation of a diff, headline first.
- `census.load_experiment(folder) -> Experiment`: a `census ab` folder read back.
- `census.frames`: pandas DataFrames of a Census, a CensusDiff or an Experiment for notebooks.
- `census.steps(loader)`, `census.step(i)`, `census.phase(name)`: NVTX ranges for training loops.
- `census.record(name, value)`, `census.count(name, n=1)`: a value per measured step and a
  counter, kept in a timed run's record (`census ab` arms); no-ops anywhere else.
- `census.Options`, `census.CensusError` (and its subclasses in census.errors).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"
CENSUS_VERSION = 1  # version of the JSON contract, bumped on incompatible change

_LAZY = {
    "summarize": "census.api",
    "diff": "census.api",
    "explain": "census.api",
    "Options": "census.api",
    "step": "census.capture.steps",
    "steps": "census.capture.steps",
    "phase": "census.capture.steps",
    "record": "census.capture.steps",
    "count": "census.capture.steps",
    "CensusError": "census.errors",
    "Census": "census.model.census",
    "CensusDiff": "census.compare.diff",
    "load_experiment": "census.api",
}
__all__ = ["CENSUS_VERSION", "__version__", "frames", *_LAZY]


def __dir__() -> list[str]:
    """The public API, for `dir(census)` and notebook completion (the names load lazily)."""
    return sorted({*__all__, *globals()} - {"annotations", "import_module", "Any"})


def _notebook(name: str) -> Any:
    """The model's repr or card `name` (imported on the first repr): the result's view rendered
    by census.render.notebook (census.api.notebook.shown_as); installed below, so that the model
    imports no renderer."""
    return import_module("census.api.notebook").shown_as(name)


import_module("census.model.shown").install(_notebook)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value  # looked up once: `census.phase` runs in training loops
        return value
    if name == "frames":
        return import_module("census.frames")
    if name.startswith("__"):  # a protocol's probe (copy, pickle, inspect): the usual answer
        raise AttributeError(name)
    from importlib.util import find_spec

    stage = name.isidentifier() and find_spec(f"{__name__}.{name}") is not None
    raise import_module("census.errors").NoSuchName(name, sorted(__all__), stage)
