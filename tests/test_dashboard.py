"""Dashboards opened in a real headless Chromium, offline: no console messages, every chart drawn
as SVG, hostile kernel names shown as text, a number never apart from its unit."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from census.api import census_view, diff_view, experiment_view, summarize
from census.compare.diff import diff_census
from census.render import render
from census.render.html import render_diff_html, render_summary_html
from census.sources.samples import sample_path
from tests.helpers.browser import check_page, needs_browser
from tests.helpers.files import DATA
from tests.nsysdb import Export

HOSTILE = "<img src=x onerror=alert(1)> & \"quotes\" 'single' </script><b>bold</b>"


def hostile_pair(tmp_path: Path):
    a = Export()
    a.range("step 0", 0, 1000)
    a.launch(HOSTILE, 1, 10, 400)
    a.launch("void gemm<float, 128>", 2, 400, 600)
    b = Export()
    b.range("step 0", 0, 800)
    b.launch("triton_poi_fused_add_mul_0", 1, 10, 100)
    b.launch("void gemm<float, 128>", 2, 100, 300)
    return (summarize(a.write(tmp_path / "a.sqlite")), summarize(b.write(tmp_path / "b.sqlite")))


def test_hostile_names_are_escaped_in_the_markup(tmp_path: Path) -> None:
    a, b = hostile_pair(tmp_path)
    page = render_diff_html(diff_view(diff_census(a, b, ("<a>", "b&")), explanation=[]))
    assert "<img" not in page and "</script><b>" not in page.split("<script", 1)[0]
    assert "&lt;a&gt;" in page
    assert "<img" not in render_summary_html(census_view(a, "x"))


@needs_browser
def test_summary_dashboard_in_a_browser(tmp_path: Path) -> None:
    page = tmp_path / "s.html"
    page.write_text(
        render_summary_html(census_view(summarize(sample_path("eager")), "eager")), "utf-8"
    )
    assert page.stat().st_size < 5 * 1024 * 1024  # the 20-step sample
    dom = check_page(page, figures=6)
    assert "20 step(s)" in dom


@needs_browser
def test_diff_dashboard_with_hostile_names_in_a_browser(tmp_path: Path) -> None:
    a, b = hostile_pair(tmp_path)
    d = diff_census(a, b, ("eager", "compiled"))
    page = tmp_path / "d.html"
    page.write_text(render_diff_html(diff_view(d)), encoding="utf-8")
    dom = check_page(page, figures=4)
    # The name reaches the table as text: the DOM holds it escaped, never as an element.
    assert (
        "&lt;img src=x onerror=alert(1)&gt; &amp; \"quotes\" 'single' &lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;"
        in dom
    )


@needs_browser
def test_sample_diff_dashboard_in_a_browser(tmp_path: Path) -> None:
    a, b = (summarize(sample_path(n)) for n in ("eager", "compiled"))
    d = diff_census(a, b, ("eager", "compiled"))
    page = tmp_path / "d.html"
    page.write_text(render_diff_html(diff_view(d)), encoding="utf-8")
    assert page.stat().st_size < 5 * 1024 * 1024
    dom = check_page(page, figures=4)
    assert "compiled is faster than eager" in dom


def test_chart_axis_names_keep_the_part_where_kernels_differ(tmp_path: Path) -> None:
    from census.render.charts import NAME_CHARS, summary_charts

    stem = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    e = Export()
    e.range("step 0", 0, 1000)
    e.launch(stem + "std::array<char*, 3ul>>(int, T2, T3)", 10, 100, 200)
    e.launch(stem + "std::array<char*, 2ul>>(int, T2, T3)", 20, 300, 350)
    c = summarize(e.write(tmp_path / "two.sqlite"), use_cache=False)
    (chart,) = [ch for ch in summary_charts(c) if ch.figure is not None and "kernels" in ch.title]
    names = [html.unescape(n) for n in chart.figure.data[0].y]
    assert len(set(names)) == 2
    assert all(len(n.split(". ", 1)[1]) <= NAME_CHARS for n in names)
    assert any("3ul" in n for n in names) and any("2ul" in n for n in names)


# A number and its unit as census writes them (census.units.fmt_ns, fmt_bytes) with a plain space
SPLITTABLE = re.compile(r"[0-9] (?:ns|µs|ms|s|B|KiB|MiB|GiB)(?![A-Za-z0-9_])")


def _text(page: str) -> str:
    """What a page shows as text: its markup without scripts, and its kernel table's cells."""
    shown = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    found = re.search(r'id="kernel-data">(.*?)</script>', page, flags=re.S)
    cells = json.loads(found[1])["rows"] if found else []
    return shown + "".join(str(v) for row in cells for k, v in row.items() if k != "name")


@needs_browser
def test_experiment_dashboards_draw_with_no_console_error(tmp_path: Path, ab_demo: Path) -> None:
    """With its captures' diff, and without (no kernel table: its script found none, and threw
    in every browser)."""
    for folder in (ab_demo, DATA / "ab-deepspeed" / "ds"):
        text = render(experiment_view(folder), "html")
        page = tmp_path / f"{folder.name}.html"
        page.write_text(text, "utf-8")
        specs = json.loads(text.split('id="figures">', 1)[1].split("</script>", 1)[0])
        dom = check_page(page, figures=len(specs))
        # its arms' p95s rest on 20 steps each (the demo's) or on 10 (DeepSpeed's), said so
        assert ("p95 of 10 values, fewer than 20" in dom) == (folder != ab_demo)


def test_pages_never_split_a_number_from_its_unit(ab_demo: Path) -> None:
    pages = [render(experiment_view(ab_demo), "html"),
             render(diff_view("sample:eager", "sample:compiled"), "html"),
             render(census_view(summarize(sample_path("eager"))), "html")]  # fmt: skip
    for page in pages:
        text = _text(page)
        assert "\u00a0ms" in text and SPLITTABLE.search(text) is None, SPLITTABLE.search(text)
