"""What a notebook user meets: dir(census), short reprs, HTML cards, Options in the API."""

from __future__ import annotations

import dataclasses

import pytest

import census
from census.errors import CensusError, UsageError
from census.render.notebook import REPR_CHARS
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
    assert repr(a).endswith(
        ": 20 steps, 247 kernels/step, step 11.70 ms, GPU busy 4.94 ms; host-bound: GPU idle 58% "
        "of the step, mostly in other host work (5.56 ms/step)>"
    )
    assert repr(a).startswith("<Census '")
    assert repr(d) == (
        "<CensusDiff 'eager -> compiled': compiled is faster than eager: step time -2.55 ms/step "
        "(-21.8%) = GPU busy -645.5 µs + GPU idle -1.90 ms, kernels/step -22>"
    )
    verdict = repr(d).split("': ", 1)[1].rsplit(", kernels/step", 1)[0]
    assert census.explain(d)[0].startswith(f"{verdict}; mostly")  # the CLI's first sentence
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
    row = "<td>step time</td><td>11.70 ms</td><td>9.15 ms</td><td>-2.55 ms</td>"
    assert row.replace(" ms", "\u00a0ms") in d._repr_html_()  # a number and its unit kept together


def test_html_card_says_what_is_not_comparable_first(pair) -> None:
    _, d = pair
    problems = dataclasses.replace(d.comparability, problems=("different GPUs <x>",))
    page = dataclasses.replace(d, comparability=problems, labels=("<b>", "c"))._repr_html_()
    assert page.index("not directly comparable") < page.index("<table>")
    assert "&lt;x&gt;" in page and "<b>&lt;b&gt;</b>" in page
    assert repr(dataclasses.replace(d, comparability=problems)).startswith(
        "<CensusDiff 'eager -> compiled': NOT COMPARABLE (1 problem)"
    )


def test_reprs_and_cards_are_rendered_from_views(pair, monkeypatch) -> None:
    """census.api.notebook hands census.render.notebook a view (the limiter and the first line
    computed by census.api): with the functions that compute them broken, the views render the
    reprs and cards the results show."""
    from census.api import census_view, diff_view
    from census.findings import limiter
    from census.render import notebook

    a, d = pair
    shown = [repr(a), a._repr_html_(), repr(d), d._repr_html_()]
    views = census_view(a), diff_view(d)

    def broken(*_args: object) -> None:
        raise AssertionError("computed while rendering")

    for name in ("find_limiter", "summary_lead"):
        monkeypatch.setattr(limiter, name, broken)
    assert [notebook.census_repr(views[0]), notebook.census_html(views[0]),
            notebook.diff_repr(views[1]), notebook.diff_html(views[1])] == shown  # fmt: skip


# The repr and the card lead with what the CLI says first (issue #49, item 4)


@pytest.fixture(scope="module")
def samples():
    """The bundled H200 pair, whose host ran ahead of the GPU: compared on the GPU spans."""
    return census.diff("sample:eager", "sample:compiled", labels="eager,compiled")


def test_repr_leads_with_the_verdict_on_the_gpu_when_the_host_ran_ahead(samples) -> None:
    assert repr(samples) == (
        "<CensusDiff 'eager -> compiled': compiled is faster than eager on the GPU: GPU span "
        "-1.76 ms/step (-11.5%) (beyond the ±166.9 µs spread of one capture each), kernels/step "
        "-22>"
    )
    assert repr(samples.a) == (
        "<Census 'sample:eager': 20 steps, 251 kernels/step, GPU span 15.32 ms (the host ran "
        "ahead by ~3 steps); GPU-bound: GPU busy 97% of the step>"
    )


def test_cards_say_the_verdict_the_limiter_and_the_span_under_the_name_given(samples) -> None:
    import html

    page = html.unescape(samples._repr_html_()).replace("\u00a0", " ")
    verdict = census.explain(samples)[0]
    assert page.index(verdict) < page.index("<table>")
    assert "<p>eager: GPU-bound: GPU busy 97% of the step</p>" in page
    assert "<p>compiled: GPU-bound: GPU busy 96% of the step</p>" in page
    launched = page.split("<caption>Work launched", 1)[1]
    assert launched.index("GPU span") < launched.index("GPU kernels")  # the step's GPU time first
    assert "<td>GPU span (first to last GPU op)</td><td>15.32 ms</td><td>13.56 ms</td>" in page
    card = html.unescape(samples.a._repr_html_()).replace("\u00a0", " ")
    assert card.startswith("<div><p><b>sample:eager</b>: 20 steps; GPUs NVIDIA H200</p>")
    assert "<p><b>the host ran ahead of the GPU by ~3 steps: step and phase times below are " in (
        card
    )
    assert ".cache" not in card and ".cache" not in repr(samples.a)


def test_an_experiment_shows_itself_in_one_line(ab_demo) -> None:
    exp = census.load_experiment(ab_demo)
    text = repr(exp)
    assert len(text) <= REPR_CHARS
    assert text == (
        "<Experiment 'eager -> compiled': no difference between eager and compiled is settled: "
        "compiled − eager = -1.48 ms/step (95% CI -3.76 ms to +792.1 µs; 3/4 pairs agree) over 8 "
        "uncaptured arms; about 28 arms would resolve a difference of this size at this spread "
        "(80% power); captured>"
    )


# API mistakes raise CensusError (issue #49, item 5)


def test_labels_are_taken_as_the_cli_takes_them(samples) -> None:
    assert samples.labels == ("eager", "compiled")
    for wrong in ("eager", "a,b,c", ("a",), ("a", 2), 5):
        with pytest.raises(
            CensusError, match=r"^labels .*: give two labels separated by a comma, "
        ):
            census.diff(samples.a, samples.b, labels=wrong)


def test_frames_take_a_path_and_refuse_anything_else_with_a_census_error(samples, ab_demo) -> None:
    assert census.frames.kernels("sample:eager").equals(census.frames.kernels(samples.a))
    assert len(census.frames.arms(str(ab_demo))) == len(
        census.frames.arms(census.load_experiment(ab_demo))
    )
    with pytest.raises(CensusError, match=r"^census\.frames\.kernels takes a Census or what "):
        census.frames.kernels(3)
    with pytest.raises(
        CensusError, match=r"^census\.frames\.metrics takes a CensusDiff .*not Census"
    ):
        census.frames.metrics(samples.a)
    with pytest.raises(CensusError, match=r"^census\.frames\.arms takes an Experiment or a "):
        census.frames.arms(samples)
    for call in (lambda: census.summarize(None), lambda: census.diff(1, "sample:eager"),
                 lambda: census.load_experiment(5)):  # fmt: skip
        with pytest.raises(CensusError, match=r": give a path \(an export, a report, a capture "):
            call()


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


def test_a_diff_with_a_side_without_steps_has_a_whole_repr() -> None:
    """Issue #59: no `step  ()` where a side has no step ranges; the problem is said instead."""
    a = census.summarize("sample:eager")
    b = census.summarize("sample:compiled", steps="^no such step$")
    assert repr(census.diff(a, b)) == (
        "<CensusDiff 'eager -> compiled': NOT COMPARABLE (1 problem); compiled has no step "
        "ranges: whole captures are compared, not steps; kernels -440>"
    )
