"""Inductor's own map of a compiled run's kernels (#56): kernel name -> the aten ops it fused.

The code Inductor generates for a graph defines each kernel as `NAME = async_compile.KIND(...)`
under a comment that states the ops it fused, topologically sorted and uncut, e.g.

    # Topologically Sorted Source Nodes: [x, add], Original ATen: [aten.native_layer_norm, aten.add]
    triton_per_fused_add_native_layer_norm_0 = async_compile.triton(...)

Inductor writes every module it generates into its cache folder ($TORCHINDUCTOR_CACHE_DIR), which
it writes anyway: `census capture` points that at a folder inside the capture being assembled
(INDUCTOR_DIR), for its calibration run and its captured run, unless the user set the variable
(then their cache is left as it is and no map is kept). Once the program ended, the modules are
read into INDUCTOR_MAP (`{"triton_per_fused_add_native_layer_norm_0": ["aten::native_layer_norm",
"aten::add"]}`: op names as a trace writes them) and the folder (modules, compiled kernels,
Triton's cache) is removed. Kernels under no such comment are left out: Inductor's C++ kernels
(`cpp_fused_...`, on the CPU) carry none; their names still list their ops. A name defined in
several modules (the `_0` of a forward and of a backward graph) keeps the union of their ops, in
the order first met. census.sources.inductor_map reads the map back.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

INDUCTOR_MAP = "inductor_map.json"  # beside the export in a capture folder
INDUCTOR_DIR = "inductor"  # Inductor's cache folder while the capture is assembled
CACHE_VAR = "TORCHINDUCTOR_CACHE_DIR"

_DEFINITION = re.compile(r"(?P<name>[A-Za-z_]\w*) = async_compile\.\w+\(")
_ORIGINAL = re.compile(r"Original ATen: \[(?P<ops>[^\]]*)\]")
_COMMENT = ("#", "//")  # Python's comment, and C++'s where a C++ wrapper writes the module


def inductor_env(
    work: Path | None, environ: dict[str, str] | os._Environ = os.environ
) -> dict[str, str]:
    """$TORCHINDUCTOR_CACHE_DIR pointed at `work`/INDUCTOR_DIR; nothing where the user set it
    (or without `work`)."""
    if work is None or CACHE_VAR in environ:
        return {}
    return {CACHE_VAR: str((work / INDUCTOR_DIR).absolute())}


def op_name(text: str) -> str:
    """`aten.native_layer_norm` -> `aten::native_layer_norm` (a namespace's first dot); a name
    without one (a higher-order op) as it is."""
    space, dot, name = text.strip().partition(".")
    return f"{space}::{name}" if dot else space


def kernel_ops(code: str) -> dict[str, list[str]]:
    """The kernels one generated module defines, each with the ops its comment block (the
    comment and blank lines right above its definition: older torch left a blank line between)
    states; a kernel with no `Original ATen` there is left out."""
    lines = code.splitlines()
    found: dict[str, list[str]] = {}
    for i, line in enumerate(lines):
        match = _DEFINITION.match(line)
        if match is None:
            continue
        j = i - 1
        while j >= 0 and (not lines[j].strip() or lines[j].lstrip().startswith(_COMMENT)):
            j -= 1
        comment = "\n".join(lines[j + 1 : i])
        stated = _ORIGINAL.search(comment)
        ops = [op_name(o) for o in stated["ops"].split(",") if o.strip()] if stated else []
        if ops:
            found[match["name"]] = ops
    return found


def read_generated(folder: Path) -> dict[str, list[str]]:
    """kernel_ops over every module under `folder` (files that cannot be read are passed by)."""
    merged: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        try:
            code = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "async_compile" not in code:
            continue
        for name, ops in kernel_ops(code).items():
            known = merged.setdefault(name, [])
            known.extend(o for o in ops if o not in known)
    return merged


def keep_inductor_map(work: Path) -> Path | None:
    """Read work/INDUCTOR_DIR into work/INDUCTOR_MAP and remove the folder; the map's path, or
    None when no module stated a kernel's ops (an eager run; the user's own cache folder)."""
    folder = work / INDUCTOR_DIR
    if not folder.is_dir():
        return None
    try:
        kernels = read_generated(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not kernels:
        return None
    target = work / INDUCTOR_MAP
    target.write_text(json.dumps(kernels, indent=1, sort_keys=True), encoding="utf-8")
    return target
