"""The census cache: a second call answers from it, an edited export or option misses it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import census.api as census_api
from census.api import Options, census_view, summarize, summary_document
from tests.helpers.files import fixture_file


def test_cache_hit_equals_fresh_and_edits_miss(tmp_path: Path, monkeypatch) -> None:
    p = Path(shutil.copy(fixture_file("h200_eager_3steps.sqlite"), tmp_path / "e.sqlite"))
    first = summarize(p)
    calls = []
    import census.load.profile

    real = census.load.profile.load_profile

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(census.load.profile, "load_profile", counting)
    assert summarize(p) == first
    assert calls == []  # answered from the cache
    assert summarize(p, skip_first=1).step_count == 2 and len(calls) == 1
    os.utime(p, ns=(1, 1))  # same bytes, new mtime: a new key
    assert summarize(p) == first and len(calls) == 2


def test_unwritable_cache_only_costs_speed(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CENSUS_CACHE_DIR", str(blocker / "sub"))
    assert summarize(fixture_file("nsysai_mock.sqlite")).totals.kernel_count == 2


def test_cache_round_trip_keeps_every_step_field(tmp_path: Path) -> None:
    from tests.nsysdb import Export

    e = Export()
    e.range("step 0", 0, 1000)
    e.launch("ncclDevKernel_AllReduce_Sum_f32", 10, 100, 400)
    e.launch("gemm_kernel", 20, 200, 600)
    p = e.write(tmp_path / "nccl.sqlite")
    first = summarize(p)
    assert first.steps[0].nccl_overlap_ns == 200  # [200, 400) ran beside the NCCL kernel
    assert summarize(p) == first  # from the cache


def test_summary_document_is_cached_and_equal(tmp_path: Path) -> None:
    import json

    from census.render import render
    from census.render.json_docs import summary_json

    p = Path(shutil.copy(fixture_file("h200_compiled_3steps.sqlite"), tmp_path / "c.sqlite"))
    meta, text = summary_document(p, Options(), top=5)
    again = summary_document(p, Options(), top=5)
    assert again[0] == meta and "".join(again[1]) == "".join(text)
    census = summarize(p)
    view = census_view(census)
    assert "".join(text) == render(view, "json", top=5)  # what render returns, capture included
    assert json.loads("".join(text)) == {**summary_json(view, 5), "capture": None}
    assert meta == {"warnings": list(census.warnings)}


def test_a_document_is_written_as_made_and_read_back_whole(tmp_path: Path, monkeypatch) -> None:
    """The document's pieces are made as they are written (never a list of them), go to the
    entry, and come back from the file as written: again on each iteration, after the entry
    is removed (a sweep by another census), and, where the cache cannot be written, made
    again from the document."""
    import json

    from census.render import json_rows

    made = []
    real = json_rows.dump_pieces

    def counted(doc):
        for piece in real(doc):
            made.append(len(piece))
            yield piece

    monkeypatch.setattr(json_rows, "dump_pieces", counted)
    p = Path(shutil.copy(fixture_file("h200_compiled_3steps.sqlite"), tmp_path / "c.sqlite"))
    _, text = summary_document(p, Options(), top=5)
    count = len(made)
    assert count and not isinstance(text, list)  # made once, into the entry
    entries = list((Path(os.environ["CENSUS_CACHE_DIR"]) / "summary-json").glob("*.json"))
    assert len(entries) == 1
    entries[0].unlink()
    whole = "".join(text)
    assert "".join(text) == whole and len(made) == count  # read back, not made again
    doc = json.loads(whole)
    assert doc["census_version"] and len(doc["steps"]) == 3 and doc["capture"] is None
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CENSUS_CACHE_DIR", str(blocker / "sub"))
    again = summary_document(p, Options(), top=5)[1]
    assert "".join(again) == whole and "".join(again) == whole  # made again each time


def test_a_written_entry_is_whole_and_a_failure_writes_nothing_out(tmp_path: Path,
                                                                    monkeypatch) -> None:  # fmt: skip
    """cached_text: the entry is a hit at once, digest included, while its text is still read
    back; a render that fails midway raises before any of its text is given out, with a cache
    or without (its text made whole into a temporary file first)."""
    from census.store import cache

    p = Path(shutil.copy(fixture_file("nsysai_mock.sqlite"), tmp_path / "m.sqlite"))
    renders = []

    def render():
        renders.append(1)
        return {"warnings": []}, json_rows.Raw(lambda: ["[", "1, 2", "]"])

    from census.render import json_rows

    meta, text = cache.cached_text([p], ["o"], "t", render)
    entry = cache._entry([p], ["o"], "t")
    assert entry is not None and cache._read_text(entry) == (meta, b"[1, 2]")
    assert "".join(cache.cached_text([p], ["o"], "t", render)[1]) == "".join(text) == "[1, 2]"
    assert len(renders) == 1

    def broken():
        def make():
            yield "[1"
            raise RuntimeError("midway")

        return {"warnings": []}, json_rows.Raw(make)

    for no_cache in ("", "1"):
        monkeypatch.setenv("CENSUS_NO_CACHE", no_cache)
        with pytest.raises(RuntimeError, match="midway"):
            cache.cached_text([p], ["o"], "broken", broken)
    monkeypatch.setenv("CENSUS_NO_CACHE", "1")
    _, spooled = cache.cached_text([p], ["o"], "t", render)
    assert not isinstance(spooled, json_rows.Raw) and "".join(spooled) == "[1, 2]"


def test_a_cache_write_that_fails_midway_only_costs_speed(tmp_path: Path) -> None:
    """A cache entry that cannot be written whole (here: past the process's file size limit)
    leaves the text made again from the document, and no error."""
    import subprocess
    import sys

    p = Path(shutil.copy(fixture_file("nsysai_mock.sqlite"), tmp_path / "m.sqlite"))
    code = f"""
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
from pathlib import Path
from census.render import json_rows
from census.store import cache
text = json_rows.Raw(lambda: ["x" * 100] * 5000)
meta, got = cache.cached_text([Path({str(p)!r})], ["o"], "big", lambda: ({{"w": 1}}, text))
print(len("".join(got)), got is text)
"""
    env = {**os.environ, "CENSUS_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["500000", "True"]


def test_a_capture_folders_document_follows_its_calibration_run(tmp_path: Path) -> None:
    """The cached summary document of a capture folder holds its capture overhead as a field
    (what census.render.render returns): a calibration run recorded after it (run.json) is a
    new key, never a stale document."""
    import json

    from census.render import render

    folder = tmp_path / "capture"
    folder.mkdir()
    shutil.copy(fixture_file("h200_eager_3steps.sqlite"), folder / "capture.sqlite")
    _, text = summary_document(folder, Options(), top=5)
    assert json.loads("".join(text))["capture"] is None
    step_ns = summarize(folder).per_step_timing()["step_time_ns"]
    calibration = {"uncaptured_mean_step_time_ns": step_ns / 2}
    (folder / "run.json").write_text(json.dumps({"calibration": calibration}))
    _, text = summary_document(folder, Options(), top=5)
    doc = json.loads("".join(text))
    assert doc["capture"] == {"clock": "host", "tracer": "nsys", "captured_mean_step_time_ns": step_ns,
                              "uncaptured_mean_step_time_ns": step_ns / 2,
                              "overhead_ratio": 2.0}  # fmt: skip
    assert "".join(text) == render(census_api.summary_view(folder), "json", top=5)
    assert "".join(summary_document(folder, Options(), top=5)[1]) == "".join(text)  # cached


def test_a_field_added_to_a_model_class_round_trips_with_no_codec_edit() -> None:
    """Each model class writes and reads its own record, generically over its fields and their
    types (census.model.record): a Census with fields the cache's codec never names (an int,
    an optional text, a tuple of a new row class, an optional model object) comes back whole,
    exactly, from a cache entry's bytes."""
    from dataclasses import field, fields, make_dataclass

    from census.model.census import Census, KernelStat
    from census.model.step import IdleSplit
    from census.store.codec import dump_record, load_record

    census = summarize(fixture_file("h200_eager_3steps.sqlite"), use_cache=False)
    row = make_dataclass("Row", [("sm_count", int | None, field(default=None))],
                         bases=(KernelStat,), frozen=True)  # fmt: skip
    plus = make_dataclass("Plus", [("extra_ns", int, field(default=0)),
                                   ("note", str | None, field(default=None)),
                                   ("rows", tuple[row, ...], field(default=())),
                                   ("idle", IdleSplit | None, field(default=None))],
                          bases=(Census,), frozen=True)  # fmt: skip
    added = {
        "extra_ns": 7,
        "note": "ß",
        "idle": IdleSplit(1, 2, 3, 4, 5),
        "rows": (row("k", "gemm", 1, 2, 3, 4, sm_count=132), row("n", "other", 0, 0, 0, 0)),
    }
    wider = plus(**{f.name: getattr(census, f.name) for f in fields(Census)}, **added)
    back = load_record(b"".join(dump_record(wider)), plus)
    assert type(back) is plus and back == wider
    assert back.rows[0].sm_count == 132 and back.rows[1].sm_count is None
    assert back.steps == census.steps and back.per_step() == census.per_step()


def test_the_source_path_is_the_one_named_this_time(tmp_path: Path) -> None:
    """The cache keys an export by its resolved path, so a symlink and its file share one census;
    each output still says the path named this time, as an uncached run does (not the name the
    census was first read through)."""
    import json

    from census.api import diff_document
    from census.paths import cache_dir

    real = Path(shutil.copy(fixture_file("h200_eager_3steps.sqlite"), tmp_path / "real.sqlite"))
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    other = fixture_file("h200_compiled_3steps.sqlite")
    assert summarize(link).source.path == str(link)
    assert summarize(real).source.path == str(real)  # the census cached through the link
    assert len(list((cache_dir() / "census").iterdir())) == 1  # one census for both names
    for named in (link, real, link):
        document = json.loads("".join(summary_document(named, Options())[1]))
        assert document["source"]["path"] == str(named)
    for named in (link, real):
        document = json.loads("".join(diff_document(named, other, ("x", "y"), Options())[1]))
        assert (document["a"]["source"]["path"], document["b"]["source"]["path"]) == (
            str(named),
            str(other),
        )
