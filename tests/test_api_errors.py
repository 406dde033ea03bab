"""API mistakes raise CensusError in the API's words (issue #59): never a raw AttributeError or
TypeError, never the CLI's flags, never the cache's paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import census
from census.errors import CensusError, InputError, UsageError

FRESH_LOAD = """
import census
try:
    census.load
except AttributeError as exc:
    print(type(exc).__name__, isinstance(exc, census.CensusError), exc)
"""


def test_explain_of_a_census_says_it_takes_a_diff() -> None:
    c = census.summarize("sample:eager")
    with pytest.raises(UsageError, match=r"^census.explain takes the CensusDiff .* not a Census"):
        census.explain(c)


def test_an_unknown_name_in_a_fresh_interpreter_names_the_public_api() -> None:
    out = subprocess.run([sys.executable, "-c", FRESH_LOAD], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("NoSuchName True census.load is an internal stage, not the API")
    assert "census.summarize" in out.stdout and "census.load_experiment" in out.stdout


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    assert not hasattr(census, "no_such_name")
    assert getattr(census, "no_such_name", 7) == 7
    with pytest.raises(CensusError, match="census has no attribute 'no_such_name'; the public"):
        census.no_such_name  # noqa: B018


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"steps": "("}, r"^steps='\(' is not a valid regular expression"),
        ({"phases": "["}, r"^phases='\[' is not a valid regular expression"),
        ({"steps": 5}, r"^steps= takes a regular expression \(a str\), not int"),
        ({"skip_first": -1}, r"^skip_first= takes a whole number 0 or more, not -1"),
    ],
)
def test_keywords_are_named_as_the_api_names_them(keywords: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        census.summarize("sample:eager", **keywords)
    assert "--" not in str(caught.value)


@pytest.mark.parametrize(
    ("fields", "message", "flag"),
    [
        ({"steps_regex": "("}, r"^steps_regex='\(' is not a valid regular expression", "--steps"),
        (
            {"phases_regex": "["},
            r"^phases_regex='\[' is not a valid regular expression",
            "--phases",
        ),
        ({"steps_regex": 5}, r"^steps_regex= takes a regular expression \(a str\), not int", None),
        (
            {"skip_first": -1},
            r"^skip_first= takes a whole number 0 or more, not -1",
            "--skip-first",
        ),
    ],
)
def test_options_fields_are_named_as_options_names_them(
    fields: dict, message: str, flag: str | None
) -> None:
    """census.Options built in Python names its own fields; the command line, its flags."""
    from typer.testing import CliRunner

    from census.cli import app

    with pytest.raises(UsageError, match=message) as caught:
        census.Options(**fields)
    assert "--" not in str(caught.value)
    if flag is not None:
        [value] = fields.values()
        r = CliRunner().invoke(app, ["summary", "sample:eager", flag, str(value)])
        assert r.exit_code == 2 and r.stderr.startswith(f"Error: {flag} ")


def test_load_experiment_of_a_missing_folder_says_it_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-experiment"
    with pytest.raises(InputError) as caught:
        census.load_experiment(missing)
    assert str(caught.value).startswith(f"{missing}: does not exist; census.load_experiment reads")
    assert "ab.json:" not in str(caught.value) and "Errno" not in str(caught.value)
