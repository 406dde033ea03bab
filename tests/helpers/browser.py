"""Dashboards opened in a real headless Chromium, offline (the tests that need one are skipped
without it)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)
needs_browser = pytest.mark.skipif(
    CHROMIUM is None, reason="no headless Chromium on this machine (apt-get install chromium)"
)


def render_in_browser(page: Path) -> tuple[str, list[str]]:
    """The DOM after scripts ran, and every console line Chromium logged."""
    profile = tempfile.mkdtemp(prefix="census-chromium-")
    try:
        r = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--virtual-time-budget=20000",
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    return r.stdout, console


def check_page(page: Path, figures: int) -> str:
    """The page's DOM, once it drew `figures` charts as SVG with no console message and no
    <img> (a hostile name shown as markup)."""
    dom, console = render_in_browser(page)
    assert console == [], console
    assert 'data-charts-ready="true"' in dom
    for i in range(figures):
        block = dom.split(f'id="fig-{i}"', 1)[1][:200_000]
        assert "<svg" in block[:5000], f"figure {i} has no SVG"
    assert "<img" not in dom
    return dom
