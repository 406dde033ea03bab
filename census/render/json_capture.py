"""`census capture --json`: the `census summary --json` document of the capture's folder (a
launcher's ranks: the rank folder's), and the capture's own facts: "folder" and "run" (its
run.json: the command, nsys's command, the machine, the versions and the calibration run)."""

from __future__ import annotations

import json

from census.render.json_docs import document, ranks_json, summary_json
from census.render.json_rows import Raw
from census.render.views import CaptureView, RanksView


def render_capture_json(view: CaptureView, top: int = 20, indent: int | None = None) -> str | Raw:
    """The capture's document: its summary's, as `census summary FOLDER --json` prints it, with
    "folder" and "run" (null where the folder holds no run.json); compact in pieces as
    census.render.json_docs.render_summary_json's."""
    own = {"folder": view.folder, "run": view.run}
    if isinstance(view.summary, RanksView):
        return json.dumps({**ranks_json(view.summary, top), **own}, indent=indent)
    doc = summary_json(view.summary, top, indent is None)
    return document({**doc, "capture": view.summary.overhead, **own}, indent)
