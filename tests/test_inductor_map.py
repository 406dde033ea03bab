"""Inductor's map kept by a capture (#56): its generated code read into kernel name -> aten ops.

On this CPU machine torch.compile runs for real in a subprocess with the capture's environment:
Inductor writes its modules into the capture being assembled, not the user's cache. Its C++
kernels carry no `Original ATen` comment (only its extern calls do), so a CPU run keeps no map.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from census.capture.inductor import (
    CACHE_VAR,
    INDUCTOR_DIR,
    INDUCTOR_MAP,
    inductor_env,
    keep_inductor_map,
    read_generated,
)
from census.capture.run import CaptureSpec, step_env
from census.errors import InputError
from census.sources.inductor_map import inductor_map

COMPILE = """
import torch
f = torch.compile(lambda x, w: torch.nn.functional.gelu(x @ w + 1).sum(-1))
print(f(torch.randn(4, 8), torch.randn(8, 8)).shape)
"""


def test_inductor_cache_goes_into_the_capture_unless_the_user_set_it(tmp_path: Path) -> None:
    assert inductor_env(tmp_path, {}) == {CACHE_VAR: str((tmp_path / INDUCTOR_DIR).absolute())}
    assert inductor_env(tmp_path, {CACHE_VAR: "/mine"}) == {}
    spec = CaptureSpec("x", ("python", "t.py"))
    for run in ("capture", "calibration"):
        env = step_env(spec, run, tmp_path)
        assert env.get(CACHE_VAR) == (None if CACHE_VAR in os.environ else
                                      str((tmp_path / INDUCTOR_DIR).absolute()))  # fmt: skip


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler for torch.compile")
def test_cpu_compile_writes_into_the_capture_and_keeps_no_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    monkeypatch.delenv(CACHE_VAR, raising=False)
    env = {**os.environ, **step_env(CaptureSpec("x", ("python",)), "capture", tmp_path),
           "TORCHINDUCTOR_COMPILE_THREADS": "1"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True,
                         text=True, check=False, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    code = [p.read_text() for p in (tmp_path / INDUCTOR_DIR).rglob("*.py")]
    code = [c for c in code if "async_compile" in c]
    defined = [n for c in code for n in re.findall(r"^(cpp_fused_\w+) = async_compile", c, re.M)]
    assert defined and all("gelu" in n for n in defined)  # C++ kernels, named by their ops
    # Original ATen is stated above the extern mm call, never above a C++ kernel's definition
    assert any("Original ATen: [aten.mm" in c or "Original ATen: [aten.addmm" in c for c in code)
    assert read_generated(tmp_path / INDUCTOR_DIR) == {}
    assert keep_inductor_map(tmp_path) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the modules removed, no map


def test_inductor_map_read_back(tmp_path: Path) -> None:
    assert inductor_map(tmp_path) is None
    (tmp_path / INDUCTOR_MAP).write_text(json.dumps({"triton_poi_fused_add_0": ["aten::add"]}))
    assert inductor_map(tmp_path) == {"triton_poi_fused_add_0": ("aten::add",)}
    for bad in ("[1, 2]", '{"k": "aten::add"}', "{not json"):
        (tmp_path / INDUCTOR_MAP).write_text(bad)
        with pytest.raises(InputError) as info:
            inductor_map(tmp_path)
        assert str(info.value) == (f"{tmp_path / INDUCTOR_MAP}: not an Inductor map (a JSON "
                                   "object: kernel name -> op names)")  # fmt: skip
