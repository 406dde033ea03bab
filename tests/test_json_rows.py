"""The per-step lists written as text (census.render.json_rows) against json.dumps of their
dicts, byte for byte: on every shared export and the bundled samples, with and without the
idle split and phases; and json_rows.dumps against json.dumps."""

from __future__ import annotations

import json

import pytest

from census import api
from census.render import json_docs, json_rows
from tests.helpers.files import FIXTURES, fixture_file

EXPORTS = sorted(p.name for p in FIXTURES.glob("*.sqlite"))
OPTIONS = [{}, {"idle": False}, {"phases": ""}]


@pytest.mark.parametrize("options", OPTIONS, ids=["default", "no-idle", "no-phases"])
@pytest.mark.parametrize("name", [*EXPORTS, "sample:eager", "sample:compiled"])
def test_rows_as_text_are_json_dumps_of_the_rows(name, options):
    path = name if name.startswith("sample:") else fixture_file(name)
    census = api.summarize(path, use_cache=False, **options)
    steps = census.steps
    assert json_rows.steps_text(steps).text() == json.dumps([json_docs._step(s) for s in steps])
    assert json_rows.timing_text(steps).text() == json.dumps(
        [json_docs._step_timing(s) for s in steps]
    )
    view = api.census_view(census)
    whole = json_docs.summary_json(view, 5)
    doc = json_docs.summary_json(view, 5, rows_as_text=True)
    assert json_rows.dumps(doc) == json.dumps(whole)
    assert "".join(json_rows.dump_pieces(doc)) == json.dumps(whole)


def test_dumps_writes_raw_text_where_it_is_and_the_rest_as_json_does():
    doc = {
        "a": 1,
        "b": {"c": json_rows.Raw(lambda: ["[1", ", 2]"]), "d": [None, "x\u00e9\n"]},
        "e": 2.5,
    }
    plain = {"a": 1, "b": {"c": [1, 2], "d": [None, "x\u00e9\n"]}, "e": 2.5}
    assert json_rows.dumps(doc) == json.dumps(plain)
    assert json_rows.dumps(plain) == json.dumps(plain)
    named = {"s": json_rows.Raw(lambda: ["[]"]), "t": 'a "quoted" \\ name'}
    assert json_rows.dumps(named) == json.dumps({"s": [], "t": 'a "quoted" \\ name'})
