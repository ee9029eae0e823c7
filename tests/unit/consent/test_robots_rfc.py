"""robots.txt decisions against Google's robots.txt test suite (../shared/eval).

Three of Google's ``ID_Encoding`` expectations contradict RFC 9309 2.2.2's text and its
Table 1 (percent-encoded unreserved octets are decoded, octets outside US-ASCII in the URI
are encoded before matching); the RFC wins (docs/crawler.md), and these cases are checked
with the RFC's answer (:data:`RFC_OVER_GOOGLE`).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from afm.app.commands.crawler.crawl import robots_group
from afm.consent.robots import check_urls

#: (Allow rule, URL) -> the RFC's answer where Google's test expects the opposite.
RFC_OVER_GOOGLE = {
    ("/foo/bar/ツ", "http://foo.bar/foo/bar/ツ"): True,  # URI octets encoded: /foo/bar/%E3%83%84
    ("/foo/bar/%E3%83%84", "http://foo.bar/foo/bar/ツ"): True,  # the same
    ("/foo/bar/%62%61%7A", "http://foo.bar/foo/bar/baz"): True,  # Table 1, last row
}


def _rfc_answer(case):
    allow = case["robots_txt"].rsplit("Allow: ", 1)[-1].strip() if "Allow: " in case["robots_txt"] else ""
    return RFC_OVER_GOOGLE.get((allow, case["url"]), case["allowed"])


def _cases(shared_eval):
    path = shared_eval / "robots_cases.jsonl"
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{**c, "allowed": _rfc_answer(c)} for c in cases]


def test_rfc_over_google_is_three_cases(shared_eval):
    raw = [json.loads(line) for line in (shared_eval / "robots_cases.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    assert sum(_rfc_answer(c) != c["allowed"] for c in raw) == len(RFC_OVER_GOOGLE)


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
