"""`afm inspect` / `afm extract` and the web-filter registry."""

from __future__ import annotations

import gzip
import json

import pytest
from click.testing import CliRunner

from afm.app.commands.filters.inspect import extract_cmd, inspect_cmd, inspect_page
from afm.pipelines.curate.stages import FilterSetupError
from afm.pipelines.curate.stages import document_filters as web_filters

PAGE = ("<html><head><title>Library budget</title></head><body><nav>Home | News</nav><article>"
        + "<p>The city council approved the new library budget on Tuesday after a long debate, "
          "and construction will start in the spring with the doors opening in two years.</p>" * 4
        + "<p>Questions can be sent to jane.doe@gmail.com or by phone on (415) 555-2671.</p>"
        + "</article></body></html>")


def test_registry_order_config_and_disable():
    names = [f.name for f in web_filters(strict=False)]
    assert names[:3] == ["language", "safety", "pii"]
    assert set(names) <= {"language", "safety", "pii", "quality", "quality_model", "math"}
    filters = web_filters({"language": {"keep": ["en", "fr"], "min_score": 0.5}, "safety": False},
                          strict=False)
    assert filters[0].cfg.keep == ["en", "fr"] and filters[0].cfg.min_score == 0.5
    assert "safety" not in [f.name for f in filters]


def test_a_stage_off_by_default_runs_only_when_asked():
    skipped: dict[str, str] = {}
    names = [f.name for f in web_filters(strict=False, skipped=skipped)]
    assert "quality_model" not in names and "off by default" in skipped["quality_model"]
    assert "quality_model" in [f.name for f in web_filters({"quality_model": True})]
    result = CliRunner().invoke(inspect_cmd, ["--help"])
    assert "--with" in result.output


def test_registry_rejects_unknown_names_and_fields():
    with pytest.raises(FilterSetupError, match="unknown filters"):
        web_filters({"langauge": {}})
    with pytest.raises(FilterSetupError, match="min_scor"):
        web_filters({"language": {"min_scor": 0.5}})


def test_inspect_builds_a_stage_as_curate_does():
    """One builder: the math source's own defaults apply in `afm inspect` as in `afm curate`."""
    (math,) = [f for f in web_filters(source="math", strict=False) if f.name == "math"]
    assert math.cfg.require_math is True


def test_inspect_page_html_runs_every_filter():
    result = inspect_page(PAGE.encode(), html=True, url="https://city.example.org/news/1")
    assert set(result) == {"text", "language", "decisions", "pii", "redacted_text"}
    names = [d["filter"] for d in result["decisions"]]
    assert names[:4] == ["extract", "language", "safety", "pii"]
    assert result["language"] == "en"
    assert result["pii"] == {"email": 1, "phone": 1}
    assert "jane.doe@gmail.com" in result["text"] and "<EMAIL>" in result["redacted_text"]
    for d in result["decisions"]:
        assert set(d) == {"filter", "keep", "reason", "signals", "details"}


def test_inspect_stops_after_failed_extraction():
    result = inspect_page(b"\x89PNG\r\n\x1a\n\x00\x00binary", html=True)
    assert [d["filter"] for d in result["decisions"]] == ["extract"]
    assert result["decisions"][0]["reason"] == "binary_content" and result["text"] == ""


def test_cli_inspect_json_txt_and_html_gz(tmp_path):
    txt = tmp_path / "note.txt"
    txt.write_text("Bonjour à tous, la réunion du conseil municipal aura lieu mardi soir à la mairie.")
    runner = CliRunner()
    res = runner.invoke(inspect_cmd, [str(txt), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["language"] == "fr"
    lang = next(d for d in out["decisions"] if d["filter"] == "language")
    assert lang["keep"] is False and lang["reason"] == "language_not_kept"
    page = tmp_path / "page.html.gz"
    page.write_bytes(gzip.compress(PAGE.encode()))
    res = runner.invoke(inspect_cmd, [str(page), "--url", "https://city.example.org/n"])
    assert res.exit_code == 0, res.output


def test_cli_extract_prints_text_or_nothing(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(PAGE)
    runner = CliRunner()
    res = runner.invoke(extract_cmd, [str(page)])
    assert res.exit_code == 0 and "library budget" in res.stdout and "Home | News" not in res.stdout
    empty = tmp_path / "empty.html"
    empty.write_bytes(b"")
    res = runner.invoke(extract_cmd, [str(empty)])
    assert res.exit_code == 0 and res.stdout == ""
