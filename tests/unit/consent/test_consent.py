"""Consent read exactly: every signal publishers use, for every training token, read the
same by the crawler and curate, and never lost when curate re-reads a page.

Each test names what it was written from: RFC 9110 (HTTP semantics, sections 5.2-5.3),
W3C TDMRep (Community Group Final Report, 2024), draft-ietf-aipref-vocab-07 and
draft-ietf-aipref-attach-05 (2026-08, read from the working group's repository),
Cloudflare's Content Signals Policy (contentsignals.org, 2025-09; the managed robots.txt
of developers.cloudflare.com "robots.txt setting") and RFC 9309.
"""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from afm.consent.agents import AI_TRAINING_TOKENS, AgentError, expand_agents
from afm.consent.directives import page_signals, robots_directives
from afm.consent.preferences import aipref_training, signal_training
from afm.consent.robots import rules_from_fetch
from afm.consent.training import ConsentSettings, TrainingPolicy
from afm.crawler.config import CrawlConfig
from afm.filters.optout import OptoutConfig, OptoutFilter
from afm.readers import Record
from afm.readers.warc import read_warc

POLICY = ConsentSettings().training_policy("afmbot")
HTML = b"<html><head><title>t</title></head><body><p>text</p></body></html>"


def _page_from_warc(headers: list[tuple[str, str]], warc_fields: dict | None = None) -> dict:
    """One page as curate meets it: written to a WARC by warcio, read back by afm."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html"), *headers],
                            protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record(
        "https://p.example/a", "response", payload=io.BytesIO(HTML), length=len(HTML),
        http_headers=http, warc_headers_dict={"WARC-Date": "2025-05-01T00:00:00Z",
                                              **(warc_fields or {})}))
    [item] = [i for i in read_warc(io.BytesIO(buf.getvalue()), "p.warc.gz")
              if isinstance(i, Record)]
    return item.value


def _curate(page: dict, cfg: OptoutConfig | None = None):
    return OptoutFilter(cfg or OptoutConfig())(page)


# ---- re-reading keeps what the crawler saw ---------------------------------------------


def test_second_x_robots_tag_line_does_not_hide_noai():
    """RFC 9110 5.3: repeated field lines are one list; the crawler saw ``noai`` and
    decided optout, so curate reading the crawler's WARC must too."""
    lines = [("X-Robots-Tag", "noai"), ("X-Robots-Tag", "noarchive")]
    assert POLICY.decide("https://p.example/a", signals=page_signals(lines, HTML, True, POLICY.agents)).optout
    decision = _curate(_page_from_warc(lines))
    assert decision.reason == "optout"
    assert decision.details["evidence"][0]["signal"] == "noai"


@pytest.mark.parametrize("lines", [
    [("tdm-reservation", "1"), ("tdm-reservation", "1")],  # two field lines
    [("tdm-reservation", "1, 1")],  # combined by a proxy (RFC 9110 5.3)
    [("tdm-reservation", "1,\r\n 1")],  # an obsolete line fold (RFC 9112 5.2)
    [("tdm-reservation", "1"), ("tdm-reservation", "0")],  # conflicting: a 1 is not outvoted
])
def test_repeated_and_folded_tdm_reservation_reserves(lines):
    """TDMRep 3.3: ``tdm-reservation: 1`` reserves TDM rights; the same value on several
    field lines, or combined into one, is still that value."""
    decision = _curate(_page_from_warc(lines))
    assert decision.reason == "optout"
    assert decision.details["evidence"][0]["signal"] == "tdm-reservation"


def test_tdm_reservation_zero_and_protocol_errors_stay_unset_or_allowed():
    """TDMRep: 0 does not reserve; any other value is a protocol error (unset)."""
    assert _curate(_page_from_warc([("tdm-reservation", "0, 0")])).keep
    assert _curate(_page_from_warc([("tdm-reservation", "2"), ("tdm-reservation", "yes")])).keep


def test_curate_honours_the_crawlers_stored_optout_and_reports_the_disagreement():
    """A page the crawler stored as ``AFM-Training-Use: optout`` is never allowed by a
    re-reading that sees nothing (here: its evidence came from a signal curate's config
    does not read); the reject says the two disagree."""
    evidence = json.dumps([{"signal": "noai", "source": "X-Robots-Tag header"}])
    page = _page_from_warc([], {"AFM-Training-Use": "optout", "AFM-Training-Evidence": evidence})
    decision = _curate(page)
    assert decision.reason == "optout"
    assert decision.details["disagreement"] == "crawler optout, curate allowed"
    [ev] = decision.details["evidence"]
    assert ev["signal"] == "crawler decision" and ev["evidence"][0]["signal"] == "noai"
    # a stored "allowed" never overrules an opt-out found now; the difference is reported
    page = _page_from_warc([("X-Robots-Tag", "noai")], {"AFM-Training-Use": "allowed"})
    decision = _curate(page)
    assert decision.reason == "optout"
    assert decision.details["disagreement"] == "crawler allowed, curate optout"
    # switched off, the stored decision is not read
    page = _page_from_warc([], {"AFM-Training-Use": "optout"})
    assert _curate(page, OptoutConfig(crawler_decision=False)).keep


def test_scoped_x_robots_tag_lines():
    """Google's X-Robots-Tag syntax: ``googlebot: noindex, nofollow`` scopes both; an
    unscoped field line applies to every crawler even after another's scoped line."""
    agents = ("afmbot", "afmbot-extended")
    assert robots_directives(["otherbot: noai"], agents) == set()
    assert robots_directives(["otherbot: noindex", "noai"], agents) == {"noai"}
    assert robots_directives(["afmbot-extended: noai, noimageai"], agents) == {"noai", "noimageai"}
    # a proxy may have joined an unscoped line onto a scoped one: the opt-out counts
    assert robots_directives(["otherbot: noindex, noai"], agents) == {"noai"}
    assert robots_directives(["max-snippet: 20, noai"], agents) == {"noai"}


# ---- the crawler and curate share one policy -------------------------------------------


GOOGLE_ONLY = (b"User-agent: Googlebot\nDisallow: /private/\n\n"
               b"User-agent: *\nAllow: /\n")


def test_fallback_first_is_read_the_same_by_the_crawler_and_curate():
    """RFC 9309 2.2.1 group selection with the fallback token placed before ``*``
    (Applebot's own order): curate reads ``fallback_first`` from the same settings."""
    from afm.consent.snapshots import SnapshotIndex, make_snapshot

    settings = {"fallback_agent": "Googlebot", "fallback_first": True}
    crawl_policy = CrawlConfig(**settings).training_policy()
    url = "https://g.example/private/x"
    rules = rules_from_fetch(200, GOOGLE_ONLY)
    assert crawl_policy.decide(url, robots=rules).optout
    snap = make_snapshot("https://g.example/robots.txt", "robots.txt",
                         fetched_at=dt.datetime(2025, 1, 1, tzinfo=dt.UTC), status=200,
                         body=GOOGLE_ONLY)
    flt = OptoutFilter(OptoutConfig(**settings), index=SnapshotIndex([snap]))
    assert flt({"url": url, "text": "t"}).reason == "optout"
    assert flt.policy == crawl_policy  # one policy object, field for field
    # without fallback_first the * group applies first, for both
    assert not CrawlConfig(fallback_agent="Googlebot").training_policy().decide(url, robots=rules).optout


def test_earlier_crawl_config_names_still_work():
    cfg = CrawlConfig(optout_directives=[], training_agent="CCBot")
    assert cfg.directives == [] and "CCBot" in cfg.training_policy().training_agents


# ---- training tokens as a set --------------------------------------------------------------


def test_single_training_agent_adds_to_afms_own_token():
    """Setting ``training_agent: CCBot`` must not let through the hosts that opted out of
    afm's own token."""
    rules = rules_from_fetch(200, b"User-agent: afmbot-extended\nDisallow: /\n")
    policy = ConsentSettings(training_agent="CCBot").training_policy("afmbot")
    assert policy.training_agents == ("afmbot-extended", "CCBot")
    assert policy.decide("https://a.example/x", robots=rules).optout
    assert ConsentSettings(training_agents=[]).training_policy("afmbot").training_agents == (
        "afmbot-extended",)


CLOUDFLARE_MANAGED = b"""# BEGIN Cloudflare Managed content

User-Agent: *
Content-signal: search=yes, ai-train=no
Allow: /

User-agent: Amazonbot
Disallow: /

User-agent: Applebot-Extended
Disallow: /

User-agent: CCBot
Disallow: /

User-agent: GPTBot
Disallow: /

# END Cloudflare Managed Content
User-agent: *
Disallow: /lp
"""


def test_preset_honours_what_the_publisher_said_to_any_ai_crawler():
    """RFC 9309 2.2.1: each token's own group decides for it; with the AI-training preset
    any token whose group disallows opts the page out, and the evidence names it."""
    rules = rules_from_fetch(200, b"User-agent: GPTBot\nUser-agent: CCBot\nDisallow: /\n")
    own = ConsentSettings().training_policy("afmbot")
    assert not own.decide("https://a.example/x", robots=rules).optout
    preset = ConsentSettings(training_agents=["preset:ai-training"]).training_policy("afmbot")
    assert set(AI_TRAINING_TOKENS) == set(preset.training_agents)
    [ev] = preset.decide("https://a.example/x", robots=rules).evidence
    assert ev["signal"] == "robots.txt" and ev["agents"] == ["GPTBot", "CCBot"]
    assert ev["rule"] == "Disallow: /" and ev["line"] == 3
    # Cloudflare's managed file: its per-token groups, and its Content-signal for everyone
    evidence = preset.decide("https://a.example/x", robots=rules_from_fetch(200, CLOUDFLARE_MANAGED)).evidence
    robots = [e for e in evidence if e["signal"] == "robots.txt"]
    assert sorted(a for e in robots for a in e["agents"]) == sorted(
        ["Amazonbot", "Applebot-Extended", "CCBot", "GPTBot"])


@pytest.mark.parametrize("bad", ["GPT Bot", "bot/1.0", "preset:everything", "préset"])
def test_training_agents_are_checked(bad):
    with pytest.raises(AgentError):
        expand_agents([bad])
    with pytest.raises(AgentError):
        OptoutFilter(OptoutConfig(training_agents=[bad]))


# ---- Content Signals ---------------------------------------------------------------------


def test_content_signal_in_cloudflares_managed_robots_txt():
    """Cloudflare's managed robots.txt (``User-Agent: *`` / ``Content-signal: search=yes,
    ai-train=no`` / ``Allow: /``): "If a content-signal = no, you may not collect content
    for the corresponding use"; ai-train is "training or fine-tuning AI models"."""
    rules = rules_from_fetch(200, CLOUDFLARE_MANAGED)
    decision = POLICY.decide("https://a.example/article", robots=rules)
    [ev] = [e for e in decision.evidence if e["signal"] == "content-signal"]
    assert ev["rule"] == "Content-Signal: search=yes, ai-train=no" and ev["line"] == 4
    assert ev["label"] == "ai-train" and "afmbot" in ev["agents"]
    off = ConsentSettings(content_signals=False).training_policy("afmbot")
    assert not off.decide("https://a.example/article", robots=rules).optout


@pytest.mark.parametrize(("value", "expected"), [
    ("search=yes, ai-train=no", "disallow"),
    ("search=yes,ai-train=no", "disallow"),  # as Cloudflare Pages writes it
    ("ai-train=no, search=yes, ai-input=yes", "disallow"),  # contentsignals.org's example
    ("AI-Train=No", "disallow"),
    ("ai-train=yes", "allow"),
    ("search=yes, ai-input=no", "unknown"),  # "neither grants nor restricts"
    ("ai-train=yes, ai-train=no", "disallow"),
])
def test_content_signal_values(value, expected):
    assert signal_training(value).value == expected


def test_content_signal_in_the_star_group_reaches_a_token_with_its_own_group():
    """The policy is stated "as a condition of accessing this website": a token's own
    group that says nothing about ai-train takes the ``*`` group's signal; one that says
    ``ai-train=yes`` keeps it."""
    silent = rules_from_fetch(200, b"User-agent: *\nContent-Signal: ai-train=no\n\n"
                                   b"User-agent: afmbot\nAllow: /\n")
    assert POLICY.decide("https://a.example/x", robots=silent).optout
    granted = rules_from_fetch(200, b"User-agent: *\nContent-Signal: ai-train=no\n\n"
                                    b"User-agent: afmbot\nUser-agent: afmbot-extended\n"
                                    b"Content-Signal: ai-train=yes\nAllow: /\n")
    assert not POLICY.decide("https://a.example/x", robots=granted).optout


def test_content_signal_response_field():
    """Cloudflare sends the same signals as a response field (its Markdown responses)."""
    signals = page_signals([("Content-Signal", "ai-train=no, search=yes")], b"", False, POLICY.agents)
    [ev] = POLICY.decide("https://a.example/x", signals=signals).evidence
    assert ev["source"] == "Content-Signal header" and ev["label"] == "ai-train"


# ---- IETF AI preferences: Content-Usage ---------------------------------------------------

ATTACH_EXAMPLE = b"""User-Agent: *
Allow: /
Disallow: /never/
Content-Usage: train-ai=n
Content-Usage: /ai-ok/ train-ai=y

User-Agent: ExampleBot
Allow: /
Content-Usage: train-ai=y
"""


def test_content_usage_robots_rule_example_of_the_attach_draft():
    """draft-ietf-aipref-attach-05 3.4: "All other crawlers use the first group ... those
    under "/ai-ok/" have an associated usage preference of "train-ai=y" and all other
    resources have a usage preference of "train-ai=n"" (/test: n; /ai-ok/test: y)."""
    rules = rules_from_fetch(200, ATTACH_EXAMPLE)
    [ev] = POLICY.decide("https://a.example/test", robots=rules).evidence
    assert ev["signal"] == "content-usage" and ev["rule"] == "Content-Usage: train-ai=n"
    assert ev["line"] == 4 and ev["label"] == "train-ai"
    assert not POLICY.decide("https://a.example/ai-ok/test", robots=rules).optout
    # "/never/test: crawl no, usage N/A": not crawlable, so robots.txt itself opts it out
    assert [e["signal"] for e in POLICY.decide("https://a.example/never/test", robots=rules).evidence] == [
        "robots.txt"]
    # "A crawler that identifies as ExampleBot uses the second group" (afm always reads
    # its own afmbot-extended too, so this reader is built bare)
    example = TrainingPolicy(crawl_agent="ExampleBot", training_agents=("ExampleBot",))
    assert not any(e["signal"] == "content-usage"
                   for e in example.decide("https://a.example/test", robots=rules).evidence)


def test_content_usage_rules_of_equal_length_combine_most_restrictively():
    """attach-05 3.1: "If there are Content-Usage rules that have identical paths and
    conflicting usage preferences, these preferences apply separately" (vocab 5.1: any
    disallow wins)."""
    rules = rules_from_fetch(200, b"User-agent: *\nContent-Usage: /a train-ai=y\n"
                                  b"Content-Usage: /a train-ai=n\n")
    assert POLICY.decide("https://x.example/a/b", robots=rules).optout


def test_content_usage_header_example():
    """attach-05 1.2's example response: ``Content-Usage: train-ai=n``."""
    signals = page_signals([("Content-Usage", "train-ai=n")], b"", False, POLICY.agents)
    [ev] = POLICY.decide("https://a.example/x", signals=signals).evidence
    assert ev == {"signal": "content-usage", "source": "Content-Usage header",
                  "value": "train-ai=n", "label": "train-ai", "fetched_at": None}
    # two field lines are combined before parsing (RFC 9651 4.2)
    two = page_signals([("Content-Usage", "search=y"), ("Content-Usage", "train-ai=n")], b"",
                       False, POLICY.agents)
    assert POLICY.decide("https://a.example/x", signals=two).optout
    off = ConsentSettings(content_usage=False).training_policy("afmbot")
    assert not off.decide("https://a.example/x", signals=signals).optout


@pytest.mark.parametrize(("statement", "expected"), [
    ("train-ai=y, search=n", "allow"),  # vocab-07 section 6's example
    ("train-ai=y, train-ai, search=n, search=\"n\"", "unknown"),  # 6.5.1: last value, a boolean
    ("train-ai;allow=n, train-ai=y", "allow"),  # 6.5.2: parameters ignored
    ("Train-AI=n", "unknown"),  # 6.5.1: "keys include uppercase characters": parsing fails
    ("train-ai = n", "unknown"),  # not a Dictionary (RFC 9651)
    ("train-ai=n", "disallow"),
    ("search=n", "unknown"),
    ("train-genai=n", "disallow"),  # vocab-02/-03 label
    ("bots=n", "disallow"),  # vocab-03/-04 "Automated Processing"
    ("train-ai=y, bots=n", "allow"),  # the more specific category decides
])
def test_aipref_vocabulary(statement, expected):
    assert aipref_training(statement).value == expected


def test_explicit_permission_never_cancels_another_vocabularys_optout():
    """Precedence (vocab-07 5.1): the most restrictive statement wins across sources."""
    rules = rules_from_fetch(200, b"User-agent: *\nContent-Usage: train-ai=y\n"
                                  b"Content-Signal: ai-train=yes\n")
    signals = page_signals([("X-Robots-Tag", "noai"), ("tdm-reservation", "0")], b"", False,
                           POLICY.agents)
    assert POLICY.decide("https://a.example/x", robots=rules, signals=signals).optout
    assert not POLICY.decide("https://a.example/x", robots=rules).optout


def test_policy_fields_are_one_configuration():
    """The crawl's config and curate's optout config are the same settings."""
    shared = {f for f in ConsentSettings.__dataclass_fields__}
    assert shared <= set(CrawlConfig.__dataclass_fields__)
    assert shared <= set(OptoutConfig.__dataclass_fields__)
    assert isinstance(POLICY, TrainingPolicy)


def test_more_training_tokens_only_ever_add_opt_outs():
    """A file that names CCBot (allowed) but disallows everyone else: afm's own token is
    not named, so the crawl token's decision (the * group) stands with or without the
    preset; and a group naming afm's own token still decides for it."""
    rules = rules_from_fetch(200, b"User-agent: CCBot\nAllow: /\n\nUser-agent: *\nDisallow: /\n")
    preset = ConsentSettings(training_agents=["preset:ai-training"]).training_policy("afmbot")
    assert POLICY.decide("https://a.example/x", robots=rules).optout
    assert preset.decide("https://a.example/x", robots=rules).optout
    welcome = rules_from_fetch(200, b"User-agent: afmbot\nDisallow: /\n\n"
                                    b"User-agent: afmbot-extended\nAllow: /\n")
    assert not preset.decide("https://a.example/x", robots=welcome).optout


def test_usage_lines_outside_every_group_are_said_to_every_crawler():
    """RFC 9309 2.2 puts rules in groups; a Content-Signal / Content-Usage line before any
    user-agent line is in none, but its author meant it: it applies unless a group says
    otherwise for the token."""
    for line in (b"Content-Signal: ai-train=no\n", b"Content-Usage: train-ai=n\n"):
        rules = rules_from_fetch(200, line + b"User-agent: *\nAllow: /\n")
        assert POLICY.decide("https://a.example/x", robots=rules).optout, line
    rules = rules_from_fetch(200, b"Content-Usage: train-ai=n\nUser-agent: *\n"
                                  b"Content-Usage: train-ai=y\n")
    assert not POLICY.decide("https://a.example/x", robots=rules).optout


def test_robots_check_decides_training_use_as_the_crawler_does(tmp_path):
    from click.testing import CliRunner

    from afm.app.commands.crawler.crawl import robots_group

    robots = tmp_path / "robots.txt"
    robots.write_bytes(CLOUDFLARE_MANAGED)
    result = CliRunner().invoke(robots_group, ["check", "--robots", str(robots), "--agent", "afmbot",
                                               "--training", "preset:ai-training",
                                               "https://a.example/x"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "allowed https://a.example/x"
    assert lines[1].startswith("training optout https://a.example/x") and "GPTBot" in lines[1]
    bad = CliRunner().invoke(robots_group, ["check", "--robots", str(robots), "--agent", "afmbot",
                                            "--training", "GPT Bot", "https://a.example/x"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
