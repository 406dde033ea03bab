"""NVTX range texts quoted in warnings are cut to one short line (issue #59): a range whose
text is a 600-character payload with a newline and a home path is not copied into a warning."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import census
from census.sources.samples import sample_path

PAYLOAD = "/home/someone/" + "x" * 290 + "\n" + "config=" + "y" * 288  # 600 characters


def test_a_long_range_text_is_quoted_on_one_short_line(tmp_path: Path) -> None:
    copy = tmp_path / "long-text.sqlite"
    shutil.copyfile(sample_path("eager") / "capture.sqlite", copy)
    with sqlite3.connect(copy) as conn:  # the 20 'optimizer' ranges: the most frequent text
        conn.execute("UPDATE StringIds SET value = ? WHERE value = 'optimizer'", (PAYLOAD,))
    assert len(PAYLOAD) == 600
    c = census.summarize(copy, steps="^no such step$")
    hint = next(w for w in c.warnings if w.startswith("no NVTX step ranges matched"))
    assert "\n" not in hint and "y" * 60 not in hint
    assert "its most frequent ranges: '/home/someone/" + "x" * 45 + "…' ×20, " in hint
    assert len(hint) < 400, len(hint)
