"""What a notebook user meets: dir(census), short reprs, HTML cards, Options in the API."""

from __future__ import annotations

import dataclasses

import pytest

import census
from census.errors import UsageError
from census.notebook import REPR_CHARS
from tests.helpers.exports import launch_bound


@pytest.fixture(scope="module")
def pair():
    a = census.summarize(str(launch_bound("eager")))  # the launch-bound demo's captures
    return a, census.diff(a, str(launch_bound("compiled")), labels=("eager", "compiled"))


def test_dir_lists_the_public_api() -> None:
    names = set(dir(census))
    for name in ("summarize", "diff", "explain", "frames", "steps", "step", "phase", "Options",
                 "Census", "CensusDiff", "CensusError", "load_experiment"):  # fmt: skip
        assert name in names, name


def test_reprs_are_short_and_say_the_headline(pair) -> None:
    a, d = pair
    assert repr(a).endswith(": 20 steps, 247 kernels/step, step 11.70 ms, GPU busy 4.94 ms>")
    assert repr(a).startswith("<Census '")
    assert repr(d) == "<CensusDiff 'eager -> compiled': step -2.55 ms (-21.8%), kernels/step -22>"
    long_path = "/" + "x" * 5000 + "/capture.sqlite"
    long = dataclasses.replace(a, source=dataclasses.replace(a.source, path=long_path),
                               warnings=("w",) * 3)  # fmt: skip
    text = repr(long)
    assert len(text) <= REPR_CHARS
    assert text.endswith(", 3 warnings>")
    hostile = dataclasses.replace(d, labels=("e\x1b[2J" * 50, "c\n"))
    assert len(repr(hostile)) <= REPR_CHARS
    assert "\x1b" not in repr(hostile) and "\n" not in repr(hostile)


def test_html_cards_keep_the_two_kinds_of_numbers_apart(pair) -> None:
    a, d = pair
    for page in (a._repr_html_(), d._repr_html_()):
        tables = page.split("<table>")[1:]
        window = [t for t in tables if "step&#x27;s NVTX range" in t]
        launched = [t for t in tables if "not clipped to the step" in t]
        assert len(window) == 1 and len(launched) == 1
        assert "GPU busy in the step window" in window[0] and "union" not in window[0]
        assert "non-NCCL union (unclipped)" in launched[0] and "GPU busy" not in launched[0]
    assert "<td>step time</td><td>11.70 ms</td><td>9.15 ms</td><td>-2.55 ms</td>" in d._repr_html_()


def test_html_card_says_what_is_not_comparable_first(pair) -> None:
    _, d = pair
    problems = dataclasses.replace(d.comparability, problems=("different GPUs <x>",))
    page = dataclasses.replace(d, comparability=problems, labels=("<b>", "c"))._repr_html_()
    assert page.index("not directly comparable") < page.index("<table>")
    assert "&lt;x&gt;" in page and "<b>&lt;b&gt;</b>" in page
    assert repr(dataclasses.replace(d, comparability=problems)).startswith(
        "<CensusDiff 'eager -> compiled': NOT COMPARABLE (1 problem)"
    )


def test_summarize_and_diff_take_options() -> None:
    opts = census.Options(phases_regex="")
    by_options = census.summarize("sample:eager", opts)
    assert by_options == census.summarize("sample:eager", phases="")
    assert by_options.steps[0].phases == ()
    assert census.summarize("sample:eager", opts, phases=None) == by_options
    with_phases = census.summarize("sample:eager", opts, phases=census.Options().phases_regex)
    assert with_phases.steps[0].phases != ()
    d = census.diff("sample:eager", "sample:compiled", ("e", "c"), opts)
    assert d.phases == {}
    with pytest.raises(UsageError, match=r"options must be a census\.Options, not str"):
        census.summarize("sample:eager", "^step")
    with pytest.raises(UsageError, match="unknown keyword 'step': the step selection is one of"):
        census.summarize("sample:eager", step="^x")


def test_phase_frame_adds_up_to_the_steps_and_per_phase(ab_demo) -> None:
    c = census.summarize(ab_demo / "a")
    frame = census.frames.phases(c)
    assert list(frame.columns[:3]) == ["step", "step_name", "phase"]
    assert str(frame["kernel_count"].dtype) == "int64"
    per_phase = c.per_phase()
    for name, rows in frame.groupby("phase"):
        assert rows["duration_ns"].sum() / c.step_count == per_phase[name]["duration_ns"], name
    by_step = frame.groupby("step")["kernel_count"].sum().tolist()
    assert by_step == [s.metrics.kernel_count for s in c.steps]


def test_arm_frame_has_every_measured_step(ab_demo) -> None:
    exp = census.load_experiment(str(ab_demo))  # a str, as a notebook writes it
    frame = census.frames.arms(exp)
    assert len(frame) == sum(len(a.step_time_ns) for a in exp.arms)
    assert frame.attrs["labels"] == {"a": exp.labels[0], "b": exp.labels[1]}
    first = exp.arms[1]
    rows = frame[frame.arm == first.index]
    assert rows["step_time_ns"].tolist() == list(first.step_time_ns)
    assert set(rows["label"]) == {exp.labels[first.side == "b"]}
    assert frame[frame.discarded]["arm"].unique().tolist() == [0]
