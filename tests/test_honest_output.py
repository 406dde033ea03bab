"""Output that cannot mislead: the clipped step window and the unclipped launched work never share
a table; terminal tables fit 80 columns with every column whole and names told apart; dashboards
say when there is nothing to draw, name their colours and keep their titles clear. And what census
says when it cannot back a claim: sides without steps, no step range matched, a table missing,
sides not comparable, identical arms, a difference under a nanosecond, steps of no time."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from census.api import census_view, diff_view, summarize
from census.capture.arms import arm_order
from census.cli import app
from census.compare.ab.experiment import Experiment
from census.compare.ab.stats import analyze
from census.compare.diff import diff_census
from census.compare.explain import explain_diff
from census.metrics import LABELS
from census.model.ab import Arm
from census.render.diff_table import render_diff_table
from census.render.fit import MIN_NAME, short_names
from census.render.html import render_diff_html, render_summary_html
from census.render.json_docs import diff_json, summary_json
from census.render.markdown import render_diff_markdown
from census.render.table import render_summary
from census.units import fmt_ns
from tests.helpers.browser import CHROMIUM, check_page
from tests.helpers.exports import launch_bound
from tests.helpers.files import fixture_file
from tests.helpers.terminal import cells, headings, terminal_tables
from tests.nsysdb import Export

runner = CliRunner()
BUSY, UNION = LABELS["gpu_busy_ns"], LABELS["non_nccl_union_ns"]


@pytest.fixture(scope="module")
def eager():
    return summarize(launch_bound("eager"))


@pytest.fixture(scope="module")
def pair():
    a, b = summarize(launch_bound("eager")), summarize(launch_bound("compiled"))
    d = diff_census(a, b, ("eager", "compiled"))
    return d, explain_diff(d)


def test_a_step_of_the_real_sample_has_less_busy_time_than_union(eager) -> None:
    """The premise, on a real H200 capture: the clipped and the unclipped numbers disagree."""
    crossing = [s.name for s in eager.steps if s.gpu_busy_ns < s.metrics.non_nccl_union_ns]
    assert len(crossing) == 10 and crossing[0] == "step 5"
    s5 = eager.steps[0]
    assert (s5.gpu_busy_ns, s5.metrics.non_nccl_union_ns) == (4_926_088, 4_939_657)


def test_terminal_summary_keeps_window_and_launched_work_apart(eager) -> None:
    text = render_summary(census_view(eager), width=160)
    tables = terminal_tables(text)
    assert any(BUSY in "\n".join(t) for t in tables)
    assert any(UNION in "\n".join(t) for t in tables)
    for t in tables:
        body = "\n".join(t)
        assert not ("GPU busy" in body and "union" in body), body
    assert "Step window (the step's NVTX range; GPU time clipped to it)" in text
    assert "Work launched in the step (GPU time not clipped to the step)" in text


def test_diff_in_every_format_keeps_window_and_launched_work_apart(pair) -> None:
    d, why = pair
    for t in terminal_tables(render_diff_table(diff_view(d, explanation=why), width=160)):
        body = "\n".join(t)
        assert not ("GPU busy" in body and "union" in body), body
    md = render_diff_markdown(diff_view(d, explanation=why))
    sections = md.split("####")
    rows = [[ln for ln in s.splitlines() if ln.startswith("|")] for s in sections]
    assert any(BUSY in "\n".join(r) for r in rows) and any(UNION in "\n".join(r) for r in rows)
    for r in rows:
        assert not ("GPU busy" in "\n".join(r) and "union" in "\n".join(r))
    page = render_diff_html(diff_view(d, explanation=why))
    for table in re.findall(r"<table>.*?</table>", page):
        assert not ("GPU busy" in table and "union" in table)


def test_json_documents_carry_each_rule(eager, pair) -> None:
    for doc in (summary_json(census_view(eager)), diff_json(diff_view(*pair))):
        rules = doc["definitions"]
        assert "clipped to the step's range" in rules["gpu_busy_ns"]
        assert "not a superset of non_nccl_union_ns" in rules["gpu_busy_ns"]
        assert "not clipped to the step's range" in rules["non_nccl_union_ns"]
        assert rules["phase.gpu_busy_ns"].endswith("clipped to the time the phase owns")


# Terminal tables at 80 columns and wider


@pytest.mark.parametrize("width", [80, 100, 132])
def test_diff_tables_fit_and_keep_every_column_whole(width: int, fixture) -> None:
    a = summarize(fixture("h200_eager_3steps.sqlite"))
    b = summarize(fixture("h200_compiled_3steps.sqlite"))
    d = diff_census(a, b, ("h200_eager_3steps", "h200_compiled_3steps"))
    text = render_diff_table(diff_view(d), top=15, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "A = h200_eager_3steps, B = h200_compiled_3steps" in text
    heads = {h for t in terminal_tables(text) for h in headings(t)}
    for col in ("Kernel", "Change", "Class", "A count", "B count", "A time", "B time", "Δ time",
                "Δ launch API calls", "Δ D2D bytes", "Delta %"):  # fmt: skip
        assert col in heads, col
    for t in terminal_tables(text):
        for line in t:
            if line.startswith("│"):
                assert "…" not in "".join(cells(line)[1:]), line  # only names are shortened
    kernel_tables = [t for t in terminal_tables(text) if "Kernel" in t[1]]
    names = [cells(ln)[0] for ln in kernel_tables[0] if ln.startswith("│")]
    assert len(names) == 15 and len(set(names)) == 15


@pytest.mark.parametrize("name", ["h200_eager_3steps.sqlite", "nsysai_mfu_2gpu_before.sqlite"])
def test_summary_fits_80_columns_with_distinct_kernel_names(name: str, fixture) -> None:
    census = summarize(fixture(name))
    text = render_summary(census_view(census), top=15, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    table = next(t for t in terminal_tables(text) if "kernel" in t[1] and "class" in t[1])
    shown = [cells(ln) for ln in table if ln.startswith("│")]
    assert len({r[0] for r in shown}) == len(shown) == 15
    assert [r[3] for r in shown] == [fmt_ns(k.time_ns) for k in census.kernels[:15]]


def test_every_real_kernel_name_stays_distinct_when_shortened(fixture) -> None:
    for name in ("h200_eager_3steps.sqlite", "nsysai_mfu_2gpu_before.sqlite"):
        names = [k.name for k in summarize(fixture(name)).kernels]
        for width in (MIN_NAME, 32, 48, 64):
            shown = short_names(names, width)
            assert len(set(shown)) == len(set(names)) and max(map(len, shown)) <= width


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(st.sampled_from("ab<>, xy"), max_size=34), min_size=1, max_size=12),
    st.integers(MIN_NAME, 60),
)
@example(parts=[" ", " ", "  "], width=24)  # equal names stay equal beside one that differs
def test_short_names_tell_different_names_apart(parts, width: int) -> None:
    """Long shared prefixes and suffixes around a small difference, in any width: names that
    differ are shown differently, and none is wider than the column."""
    prefix, suffix = "void at::native::elementwise_kernel<", ">(int, T2, T3)" * 3
    names = [prefix + part + suffix for part in parts]
    shown = short_names(names, width)
    assert max(map(len, shown)) <= width
    for i in range(len(names)):
        for j in range(i):
            assert (names[i] == names[j]) == (shown[i] == shown[j])


def test_markdown_shortens_kernel_names_as_the_terminal_does(pair) -> None:
    from census.render.fit import short_names
    from census.render.markdown import MARKDOWN_NAME_CHARS, _cell, render_diff_markdown

    d, why = pair
    text = render_diff_markdown(diff_view(d, explanation=why), top=15)
    table = text.split("kernel changes", 1)[1].split("\n\n", 2)[1].splitlines()[2:]
    full = [k.name for k in d.kernels if k.bucket != "unchanged"][:15]
    shown = short_names(full, MARKDOWN_NAME_CHARS)
    assert len(table) == 15 and len(set(shown)) == 15
    assert all(len(name) <= MARKDOWN_NAME_CHARS for name in shown)
    assert any(len(name) > MARKDOWN_NAME_CHARS for name in full)  # some were cut
    assert [row.split(" | ")[0] for row in table] == [f"| {_cell(n)}" for n in shown]


# Dashboards


def no_kernel_export(tmp_path: Path) -> Path:
    e = Export()
    e.range("step 0", 0, 100)
    return e.write(tmp_path / "nokern.sqlite")


def test_a_capture_without_kernels_gets_sentences_not_empty_axes(tmp_path: Path) -> None:
    page = render_summary_html(census_view(summarize(no_kernel_export(tmp_path)), "nokern"))
    assert page.count("no kernels in this capture") == 3
    assert "no launch API calls in this capture" in page
    assert "no device-to-device copies in the steps" in page
    specs = json.loads(page.split('id="figures">', 1)[1].split("</script>", 1)[0])
    assert len(specs) == 1  # only the step chart has something to draw


def figure_specs(page: str) -> list[dict]:
    return json.loads(page.split('id="figures">', 1)[1].split("</script>", 1)[0])


def test_titles_sit_above_the_charts_where_the_toolbar_cannot_cover_them(pair) -> None:
    page = render_diff_html(diff_view(*pair))
    specs = figure_specs(page)
    assert specs and all("title" not in s["layout"] for s in specs)
    assert page.count("<div class='panel'><h3>") == len(specs)


def test_kernel_change_colours_have_a_legend_and_the_waterfall_has_values(pair) -> None:
    d, why = pair
    specs = figure_specs(render_diff_html(diff_view(d, explanation=why)))
    changes = next(s for s in specs if any(t.get("orientation") == "h" for t in s["data"]))
    names = {t["name"] for t in changes["data"]}
    assert names == {"added (only in compiled)", "removed (only in eager)"}
    waterfall = next(s for s in specs if s["data"][0]["type"] == "waterfall")
    assert waterfall["data"][0]["text"] == ["11.70 ms", "-645.5 µs", "-1.90 ms", "9.15 ms"]


def test_the_terminal_summary_names_what_the_user_gave() -> None:
    r = runner.invoke(app, ["summary", "--sample", "eager"], env={"COLUMNS": "200"})
    first, second = r.stdout.splitlines()[:2]
    assert r.exit_code == 0 and second.startswith("sample:eager  nsys 2025.3.2.0 · ")
    assert first == (  # how to read the times, then what limits the step
        "the host ran ahead of the GPU by ~3 steps: step and phase times below are the GPU's (GPU "
        "span: first to last GPU op launched in the range); GPU-bound: GPU busy 97% of the step"
    )
    r = runner.invoke(app, ["summary", str(launch_bound("eager"))], env={"COLUMNS": "200"})
    assert r.stdout.splitlines()[0] == (  # a host-bound capture: where the host was meanwhile
        "host-bound: GPU idle 58% of the step, mostly in other host work (5.56 ms/step), most "
        "inside backward (52% of the idle)"
    )


def test_dashboard_subtitles_name_what_the_user_gave(tmp_path: Path) -> None:
    out = tmp_path / "s.html"
    r = runner.invoke(app, ["dashboard", "sample:eager", "--html", str(out)])
    assert r.exit_code == 0, r.stderr
    sub = out.read_text("utf-8").split("<div class='sub'>", 1)[1].split("</div>", 1)[0]
    assert sub.startswith("sample:eager · nsys 2025.3.2.0") and ".cache" not in sub
    out = tmp_path / "d.html"
    r = runner.invoke(app, ["diff", "sample:eager", "sample:compiled", "--html", str(out)])
    sub = out.read_text("utf-8").split("<div class='sub'>", 1)[1].split("</div>", 1)[0]
    assert sub == "eager: sample:eager vs compiled: sample:compiled"


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium on this machine")
def test_a_dashboard_without_kernels_draws_in_a_browser(tmp_path: Path) -> None:
    page = tmp_path / "n.html"
    page.write_text(
        render_summary_html(census_view(summarize(no_kernel_export(tmp_path)), "n")), "utf-8"
    )
    dom = check_page(page, figures=1)
    assert "no kernels in this capture" in dom


# What census says when it cannot back a claim


def test_a_capture_without_steps_has_no_empty_per_step_columns(fixture) -> None:
    out = runner.invoke(
        app, ["summary", str(fixture("nsysai_mock.sqlite"))], env={"COLUMNS": "200"}
    ).stdout
    assert "per step" not in out
    assert "│ GPU kernels                │        2 │\n" in out


def test_whole_capture_totals_are_never_called_the_step_s(tmp_path: Path) -> None:
    """Without step ranges the census keys are the whole capture's: every format says so, and
    the dashboard's kernel table has no per-step column (it was 0 for every kernel)."""
    e = Export()
    e.launch("k", 10, 20, 30)
    path = e.write(tmp_path / "a.sqlite")
    title = "The whole capture (no step ranges: every kernel, launch and copy in it)"
    for args in (["summary", str(path)], ["summary", str(path), "--format", "markdown"],
                 ["diff", str(path), str(path)], ["diff", str(path), str(path), "--format", "markdown"]):  # fmt: skip
        out = runner.invoke(app, args, env={"COLUMNS": "200"}).stdout
        assert title in out and "launched in the step" not in out, args
    page = render_summary_html(census_view(summarize(path), "a"))
    assert "Kernels: the whole capture (no step ranges, so none per step)" in page
    columns = json.loads(page.split('id="kernel-data">', 1)[1].split("</script>", 1)[0])["columns"]
    assert [c["label"] for c in columns] == ["kernel", "class", "count", "time"]
    assert "launched in the step" not in summarize(path)._repr_html_()


def test_both_sides_without_steps_have(tmp_path: Path) -> None:
    e = Export()
    e.launch("k", 10, 20, 30)
    a, b = e.write(tmp_path / "a.sqlite"), e.write(tmp_path / "b.sqlite")
    r = runner.invoke(app, ["diff", str(a), str(b), "--format", "json"])
    assert "a and b have no step ranges" in r.stderr


def test_no_step_ranges_names_the_texts_and_a_steps_regex(tmp_path: Path) -> None:
    e = Export()
    for i in range(3):
        e.range(f"iteration {i}", i * 100, i * 100 + 90)
        e.range("fwd", i * 100, i * 100 + 40)
    e.launch("k", 10, 20, 30)
    path = e.write(tmp_path / "x.sqlite")
    r = runner.invoke(app, ["summary", str(path), "--json"])
    assert (
        "warning: no NVTX step ranges matched --steps '^(step\\b|ProfilerStep#)': per-step "
        "figures are unavailable; its most frequent ranges: 'fwd' ×3, 'iteration 0' ×1, "
        "'iteration 1' ×1, 'iteration 2' ×1; try --steps '^iteration\\b'"
    ) in r.stderr
    r = runner.invoke(app, ["summary", str(path), "--json", "--steps", "^iteration\\b"])
    assert json.loads(r.stdout)["timing"]["per_step"]["step_time_ns"] == 90


def test_a_steps_suggestion_needs_numbered_texts() -> None:
    from census.load.steps import _steps_suggestion

    def suggest(counts):
        return _steps_suggestion(counts, lambda pattern: True)

    assert suggest([("aten::mm", 18088), ("aten::add", 900)]).startswith(
        "none looks like a numbered step"
    )
    assert suggest([("iter_1", 1), ("iter_2", 1), ("fwd", 9)]) == "try --steps '^iter_?[0-9]'"
    assert suggest([("ProfilerStep#3", 1), ("ProfilerStep#4", 1)]) == (
        "try --steps '^ProfilerStep\\b'"
    )
    assert suggest([("layer 1", 5)]).startswith("none looks")  # one number is no series


def test_a_steps_suggestion_offers_only_ranges_that_launch_gpu_work(tmp_path: Path) -> None:
    """A data loader's numbered ranges on a thread of their own (no launch inside) outnumber
    the loop's: the suggestion skips them (issue #49: 8 steps of 0 kernels, "GPU idle 100%")."""
    e = Export()
    for i in range(4):  # the loader, ahead of the loop, in a process of its own
        e.range(f"batch {i}", i * 100, i * 100 + 90, pid=2)
    for i in range(2):
        e.range(f"iteration {i}", 1000 + i * 100, 1000 + i * 100 + 90)
        e.launch("k", 1000 + i * 100 + 10, 1000 + i * 100 + 20, 1000 + i * 100 + 30)
    e.launch("outside", 50, 60, 70)  # in a batch's time, but in the loop's process
    r = runner.invoke(app, ["summary", str(e.write(tmp_path / "x.sqlite")), "--json"])
    assert "'batch 3' ×1, 'iteration 0' ×1; try --steps '^iteration\\b'" in r.stderr
    e = Export()
    for i in range(3):
        e.range(f"batch {i}", i * 100, i * 100 + 90)
    e.launch("k", 500, 510, 520)  # after every range
    r = runner.invoke(app, ["summary", str(e.write(tmp_path / "y.sqlite")), "--json"])
    assert r.stderr.rstrip().endswith(
        "the numbered ranges ('batch N') hold no GPU work launches: mark the steps with "
        "census.steps() or NVTX ranges 'step N', or name them with --steps"
    ), r.stderr


@pytest.mark.fixtures
def test_a_missing_memset_table_means_zero_memsets_unwarned() -> None:
    """nsys writes CUPTI_ACTIVITY_KIND_MEMSET only when memsets ran (issue #59: no warning for
    what a normal capture simply lacks); the missing MEMCPY table is still warned."""
    r = runner.invoke(app, ["summary", str(fixture_file("nsysai_mock.sqlite")), "--json"])
    assert r.exit_code == 0 and "MEMSET" not in r.stderr and "memset" not in r.stderr
    assert json.loads(r.stdout)["totals"]["memset_count"] == 0


@pytest.mark.fixtures
def test_incomparable_sides_are_said_first_and_voided_sentences_withheld() -> None:
    eager = fixture_file("h200_eager_3steps.sqlite")
    graph = fixture_file("flameox_nsight-2025.5.2_cudagraph.sqlite")
    for fmt in ("json", "markdown", "table"):
        r = runner.invoke(app, ["diff", str(eager), str(graph), "--labels", "node,graph",
                                "--format", fmt], env={"COLUMNS": "400"})  # fmt: skip
        assert r.exit_code == 0
        out = " ".join(r.stdout.split())
        assert "not directly comparable: graph traced CUDA graphs as whole graphs" in out, fmt
        assert "kernels (" not in out and "over 0 calls" not in out
        if fmt != "json":  # JSON also carries it as data (comparability, warnings)
            assert out.count("traced CUDA graphs as whole graphs") == 1, fmt  # once, first
    doc = json.loads(runner.invoke(app, ["diff", str(eager), str(graph), "--format", "json",
                                         "--labels", "node,graph"]).stdout)  # fmt: skip
    first = doc["explanation"][0]
    assert first.startswith("not directly comparable: graph traced CUDA graphs")
    assert "graph has no step ranges: whole captures are compared" in first
    assert "different GPUs (node: 1 × NVIDIA H200; graph: 1 × NVIDIA GeForce RTX 3060)" in first
    assert first == "not directly comparable: " + "; ".join(doc["comparability"]["problems"])
    assert len(doc["comparability"]["problems"]) == 3
    assert not any("kernels" in s and "Triton" in s for s in doc["explanation"])


# Degenerate arms: no difference is "no difference", a zero time no division


def experiment(a: tuple[int, ...], b: tuple[int, ...], arms: int = 4) -> Experiment:
    order = arm_order(arms)
    runs = tuple(Arm(s, i, i == 0, a if s == "a" else b) for i, s in enumerate(order))
    return Experiment(("A", "B"), {"a": ["a"], "b": ["b"]}, runs, analyze(list(runs)), None, "x")


def test_identical_arms_are_no_difference_never_slower_by_0_ns() -> None:
    for steps in ((1000, 1000, 1000), (1000, 1001, 1000, 999), (7,)):
        st = experiment(steps, steps, 8).stats
        assert st.verdict == "no difference"
        assert (st.delta_median_ns, st.ci95_ns, st.residual_sd_ns) == (0.0, (0.0, 0.0), 0.0)
        assert st.pairs_agreeing == 4 and st.arms_needed is None


def test_an_exact_difference_without_spread_is_settled() -> None:
    st = experiment((1000,) * 3, (1005,) * 3).stats
    assert st.verdict == "slower" and st.residual_sd_ns == 0
    assert st.ci95_ns[0] == st.ci95_ns[1] == pytest.approx(5)
    assert st.pairs_agreeing == 2


def test_a_difference_under_a_nanosecond_is_never_claimed() -> None:
    # every arm of B is exactly 0.5 ns slower: a difference under the record's unit
    st = experiment((1000, 1000), (1000, 1001)).stats
    assert abs(st.delta_median_ns) < 1 and st.verdict == "no difference"
    assert st.arms_needed is None


def test_zero_time_steps_render_without_dividing_by_zero() -> None:
    from census.api import experiment_view
    from census.render import render
    from census.render.ab import delta_line, e2e_rows

    for a, b in (((0, 0), (0, 0)), ((0, 0), (5, 5)), ((5, 5), (0, 0))):
        exp = experiment(a, b)
        assert e2e_rows(exp)[1][5] == ""  # no throughput to compare with a step of no time
        assert "()" not in delta_line(exp)
        view = experiment_view(exp)
        assert "B − A" in render(view, "terminal", width=200)
        assert "| throughput |" in render(view, "markdown")
        assert "<html" in render(view, "html").lower()
        json.loads(render(view, "json"))
