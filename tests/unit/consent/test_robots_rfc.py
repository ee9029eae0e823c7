"""robots.txt decisions against Google's robots.txt test suite (../shared/eval)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from afm.app.commands.crawler.crawl import robots_group
from afm.consent.robots import check_urls


def _cases(shared_eval):
    path = shared_eval / "robots_cases.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_all_rfc_cases(shared_eval):
    cases = [c for c in _cases(shared_eval) if not c["google_only"]]
    assert len(cases) == 72
    wrong = [c for c in cases if check_urls(c["robots_txt"], c["user_agent"], [c["url"]])[0] != c["allowed"]]
    assert not wrong, json.dumps(wrong[:3], indent=1)


def test_google_only_cases(shared_eval):
    cases = [c for c in _cases(shared_eval) if c["google_only"]]
    wrong = [c for c in cases if check_urls(c["robots_txt"], c["user_agent"], [c["url"]])[0] != c["allowed"]]
    assert not wrong, json.dumps(wrong[:3], indent=1)


def test_cli_agrees_with_rfc_cases(shared_eval, tmp_path):
    """`afm robots check` prints the expected verdict for every RFC case."""
    runner = CliRunner()
    cases = [c for c in _cases(shared_eval) if not c["google_only"]]
    for i, case in enumerate(cases):
        robots = tmp_path / f"robots-{i}.txt"
        robots.write_bytes(case["robots_txt"].encode("utf-8"))
        if not case["user_agent"] or not case["url"]:
            pytest.fail("RFC cases all have an agent and a URL")
        result = runner.invoke(
            robots_group, ["check", "--robots", str(robots), "--agent", case["user_agent"], case["url"]]
        )
        assert result.exit_code == 0, result.output
        verdict = "allowed" if case["allowed"] else "disallowed"
        assert f"{verdict} {case['url']}" in result.stdout.splitlines(), (case, result.stdout)
