"""The training-use policy: the training token's robots.txt group, noai directives, TDMRep.

TDMRep cases are written from the W3C TDM Reservation Protocol (Community Group Final
Report, 2024, https://www.w3.org/community/reports/tdmrep/; written here from its text): the
``tdmrep.json`` file of section 3.2 (an array of ``location`` / ``tdm-reservation`` /
``tdm-policy`` rules, first matching location decides), the HTTP headers of section 3.3
and the HTML ``<meta>`` of section 3.4, with the protocol's processing order (file, then
header, then meta; a later source supersedes, an absent value never resets).
"""

from __future__ import annotations

import json

import pytest

from afm.consent.directives import page_signals, robots_directives
from afm.consent.robots import RobotsTxt, rules_from_fetch
from afm.consent.tdmrep import parse_tdmrep, tdm_from_fetch
from afm.consent.training import FileContext, TrainingPolicy

POLICY = TrainingPolicy(crawl_agent="afmbot", training_agents=("afmbot-extended",))

# Apple's own pattern: Applebot may crawl, Applebot-Extended (training) may not.
SPLIT = b"User-agent: afmbot-extended\nDisallow: /\n\nUser-agent: *\nAllow: /\n"


def _robots(body: bytes, status: int = 200):
    return rules_from_fetch(status, body)


def test_training_token_disallowed_but_crawl_allowed():
    rules = _robots(SPLIT)
    url = "https://press.example/news/1"
    assert rules.allowed(url, "afmbot")  # the crawler may fetch it
    ctx = FileContext("https://press.example/robots.txt", 1_700_000_000.0, 200)
    decision = POLICY.decide(url, robots=rules, robots_file=ctx)
    assert decision.use == "optout"
    [ev] = decision.evidence
    assert ev["signal"] == "robots.txt" and ev["agent"] == "afmbot-extended"
    assert ev["rule"] == "Disallow: /" and ev["line"] == 2 and ev["group"] == "afmbot-extended"
    assert ev["file"] == "https://press.example/robots.txt" and ev["status"] == 200
    assert ev["fetched_at"] == "2023-11-14T22:13:20+00:00"


def test_training_token_not_named_falls_back_to_the_crawl_token():
    # A file that names only the crawler: its decision stands for training too.
    rules = _robots(b"User-agent: afmbot\nDisallow: /private\n")
    assert POLICY.decide("https://a.example/ok", robots=rules).use == "allowed"
    assert POLICY.decide("https://a.example/private/x", robots=rules).use == "optout"
    # A group naming the training token decides alone, even against a stricter crawl group.
    rules = _robots(b"User-agent: afmbot\nDisallow: /\n\nUser-agent: afmbot-extended\nAllow: /\n")
    assert POLICY.decide("https://a.example/x", robots=rules).use == "allowed"


def test_training_token_allows_part_of_the_site():
    rules = _robots(b"User-agent: afmbot-extended\nDisallow: /\nAllow: /public/\n")
    assert POLICY.decide("https://a.example/public/p", robots=rules).use == "allowed"
    assert POLICY.decide("https://a.example/p", robots=rules).use == "optout"


def test_robots_error_rules_apply_to_training():
    url = "https://a.example/x"
    assert POLICY.decide(url, robots=_robots(b"", 404)).use == "allowed"  # no file
    for status in (500, 503, 429):  # RFC 9309 2.3.1.4: disallow all
        decision = POLICY.decide(url, robots=_robots(b"", status))
        assert decision.use == "optout"
        assert "disallow all" in decision.evidence[0]["detail"]
    assert POLICY.decide(url, robots=rules_from_fetch(None, None, error="timeout")).use == "optout"


def test_decide_agrees_with_allowed_on_every_rfc_case(shared_eval):
    """The evidence-carrying decision is the crawler's decision, on the RFC suite."""
    cases = [json.loads(line) for line in
             (shared_eval / "robots_cases.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    cases = [c for c in cases if not c["google_only"]]
    assert cases
    for case in cases:
        robots = RobotsTxt.parse(case["robots_txt"].encode("utf-8"))
        verdict = robots.decide(case["url"], case["user_agent"])
        assert verdict.allowed == robots.allowed(case["url"], case["user_agent"]), case
        if not verdict.allowed:
            assert verdict.rule is not None and not verdict.rule.allow


def test_robots_switch_off():
    off = TrainingPolicy(robots=False)
    assert off.decide("https://a.example/x", robots=_robots(SPLIT)).use == "allowed"


# ---- noai / noimageai ---------------------------------------------------------------------


@pytest.mark.parametrize(("values", "expected"), [
    (["noai"], {"noai"}),
    (["noindex, noai, noimageai"], {"noindex", "noai", "noimageai"}),
    (["afmbot-extended: noai"], {"noai"}),  # scoped to our training token
    (["otherbot: noai"], set()),  # scoped to someone else
    (["none"], {"noindex", "nofollow"}),
    (["unavailable_after: 25 Jun 2030 15:00:00 PST"], set()),
])
def test_robots_directives(values, expected):
    assert robots_directives(values, ("afmbot", "afmbot-extended")) == expected


def test_noai_header_and_meta():
    html = b'<html><head><meta name="robots" content="noai, noimageai"></head></html>'
    signals = page_signals([], html, True, POLICY.agents)
    decision = POLICY.decide("https://a.example/", signals=signals)
    assert decision.use == "optout"
    assert decision.evidence == [{"signal": "noai", "source": "meta robots", "fetched_at": None},
                                 {"signal": "noimageai", "source": "meta robots", "fetched_at": None}]
    signals = page_signals([("X-Robots-Tag", "noai")], b"", False, POLICY.agents)
    assert POLICY.decide("https://a.example/", signals=signals).evidence[0]["source"] == \
        "X-Robots-Tag header"
    # noimageai on a text page: DeviantArt asks training sets to exclude content carrying
    # either directive; honoured by default, and can be switched off
    signals = page_signals([("X-Robots-Tag", "noimageai")], b"", False, POLICY.agents)
    assert POLICY.decide("https://a.example/", signals=signals).use == "optout"
    noai_only = TrainingPolicy(directives=("noai",))
    assert noai_only.decide("https://a.example/", signals=signals).use == "allowed"


def test_meta_named_after_our_token():
    html = b'<meta content="noai" name="afmbot-extended">'
    assert page_signals([], html, True, POLICY.agents).directives == {"noai": "meta robots"}
    html = b'<meta name="otherbot" content="noai">'
    assert page_signals([], html, True, POLICY.agents).directives == {}


# ---- TDMRep --------------------------------------------------------------------------------

# A tdmrep.json in the shape of the W3C report's section 3.2 example.
W3C_TDMREP = json.dumps([
    {"location": "/", "tdm-reservation": 1,
     "tdm-policy": "https://provider.com/policies/policy.json"},
]).encode()
W3C_TDMREP_PATHS = json.dumps([
    {"location": "/images/*", "tdm-reservation": 1,
     "tdm-policy": "https://provider.com/policies/policy.json"},
    {"location": "/text/*", "tdm-reservation": 0},
    {"location": "/*.epub$", "tdm-reservation": 1},
]).encode()


def _tdm(body: bytes, status: int = 200):
    return tdm_from_fetch(status, body)


def test_tdmrep_file_whole_origin():
    tdm = _tdm(W3C_TDMREP)
    decision = POLICY.decide("https://provider.com/any/page", tdm=tdm,
                             tdm_file=FileContext("https://provider.com/.well-known/tdmrep.json",
                                                  None, 200))
    assert decision.use == "optout"
    [ev] = decision.evidence
    assert ev["signal"] == "tdm-reservation" and ev["source"] == "tdmrep.json"
    assert ev["policy"] == "https://provider.com/policies/policy.json"
    assert ev["file"].endswith("/.well-known/tdmrep.json")


def test_tdmrep_file_first_matching_location_decides():
    tdm = _tdm(W3C_TDMREP_PATHS)
    assert POLICY.decide("https://p.com/images/a.png", tdm=tdm).use == "optout"
    assert POLICY.decide("https://p.com/text/a.html", tdm=tdm).use == "allowed"
    assert POLICY.decide("https://p.com/books/b.epub", tdm=tdm).use == "optout"
    assert POLICY.decide("https://p.com/books/b.epub?x=1", tdm=tdm).use == "allowed"  # $ anchor
    assert POLICY.decide("https://p.com/other", tdm=tdm).use == "allowed"  # no rule: unset


def test_tdmrep_header_supersedes_file_and_meta_supersedes_header():
    tdm = _tdm(W3C_TDMREP)  # file: reserved
    header0 = page_signals([("tdm-reservation", "0")], b"", False, POLICY.agents)
    assert POLICY.decide("https://p.com/x", tdm=tdm, signals=header0).use == "allowed"
    meta1 = b'<meta name="tdm-reservation" content="1">'
    both = page_signals([("tdm-reservation", "0")], meta1, True, POLICY.agents)
    decision = POLICY.decide("https://p.com/x", tdm=None, signals=both)
    assert decision.use == "optout" and decision.evidence[0]["source"] == "tdm-reservation meta"
    # an absent value never resets one found earlier
    nothing = page_signals([], b"<p>no meta</p>", True, POLICY.agents)
    assert POLICY.decide("https://p.com/x", tdm=tdm, signals=nothing).use == "optout"


def test_tdmrep_header_with_policy():
    signals = page_signals([("tdm-reservation", "1"),
                            ("tdm-policy", "https://provider.com/policies/policy.json")],
                           b"", False, POLICY.agents)
    [ev] = POLICY.decide("https://p.com/x", signals=signals).evidence
    assert ev["source"] == "tdm-reservation header"
    assert ev["policy"] == "https://provider.com/policies/policy.json"


@pytest.mark.parametrize("value", ["2", "yes", "", "true"])
def test_tdmrep_protocol_errors_are_unset(value):
    signals = page_signals([("tdm-reservation", value)], b"", False, POLICY.agents)
    assert POLICY.decide("https://p.com/x", signals=signals).use == "allowed"
    rules = parse_tdmrep(json.dumps([{"location": "/", "tdm-reservation": value}]))
    assert rules[0].reservation is None


def test_tdmrep_fetch_error_rules_are_robots_txt_rules():
    assert _tdm(b"", 404).kind == "absent"
    assert POLICY.decide("https://p.com/x", tdm=_tdm(b"", 404)).use == "allowed"
    for status in (500, 503, 429):
        tdm = _tdm(b"", status)
        assert tdm.kind == "reserved_all"
        assert POLICY.decide("https://p.com/x", tdm=tdm).use == "optout"
    unreachable = tdm_from_fetch(None, None, error="connection refused")
    assert POLICY.decide("https://p.com/x", tdm=unreachable).use == "optout"
    # kept like robots.txt: 24 h at most, an unreachable file retried after 600 s
    fetched = tdm_from_fetch(200, b"[]", fetched_at=1000.0)
    assert not fetched.expired(1000.0 + 24 * 3600 - 1) and fetched.expired(1000.0 + 24 * 3600)
    assert tdm_from_fetch(None, None, fetched_at=1000.0).expired(1600.0)
    # A soft 404 (HTML answered with 200) does not implement the protocol: unset.
    soft = _tdm(b"<html>Not found</html>")
    assert soft.kind == "invalid"
    assert POLICY.decide("https://p.com/x", tdm=soft).use == "allowed"


def test_tdmrep_switch_off():
    off = TrainingPolicy(tdmrep=False)
    signals = page_signals([("tdm-reservation", "1")], b"", False, off.agents)
    assert off.decide("https://p.com/x", tdm=_tdm(W3C_TDMREP), signals=signals).use == "allowed"


def test_every_signal_is_evidence_in_order():
    signals = page_signals([("X-Robots-Tag", "noai"), ("tdm-reservation", "1")], b"", False,
                           POLICY.agents)
    decision = POLICY.decide("https://p.com/x", signals=signals, robots=_robots(SPLIT))
    assert [e["signal"] for e in decision.evidence] == ["noai", "tdm-reservation", "robots.txt"]
