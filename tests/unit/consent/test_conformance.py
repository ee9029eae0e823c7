"""Consent conformance: the specifications' own examples and rules, each case citing its
section. Written from the spec texts (not from any case set afm is scored on), run in
``make test``. Where a spec is silent, the choice is docs/crawler.md's ("Where the specs
are silent"), tested in the modules' own test files.
"""

from __future__ import annotations

import pytest

from afm.consent.directives import is_html, page_signals, sniffs_as_html
from afm.consent.preferences import aipref_training
from afm.consent.robots import MAX_ROBOTS_BYTES, RobotsTxt, match_form, rules_from_fetch, url_forms
from afm.consent.tdmrep import parse_tdmrep, tdm_from_fetch
from afm.consent.training import ConsentSettings
from afm.consent.urls import HostError, origin_of, parse_host

# ---- RFC 9309 2.2.2, Table 1: "Examples of Matching Percent-Encoded URI Components" -------------


@pytest.mark.parametrize(("path", "path_to_match"), [
    ("/foo/bar?baz=quz", "/foo/bar?baz=quz"),
    ("/foo/bar?baz=https://foo.bar", "/foo/bar?baz=https%3A%2F%2Ffoo.bar"),
    ("/foo/bar/\u30c4", "/foo/bar/%E3%83%84"),  # U+30C4 KATAKANA LETTER TU
    ("/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"),
    ("/foo/bar/%62%61%7A", "/foo/bar/baz"),
])
def test_rfc9309_table_1(path, path_to_match):
    assert path_to_match in url_forms(path)  # the query's data characters: both spellings
    # and as rules: each row's path, written in a rule, matches each row's form in a URL
    robots = RobotsTxt.parse(f"User-agent: *\nDisallow: /\nAllow: {path}$\n")
    assert robots.allowed("https://example.com" + path, "bot")
    assert robots.allowed("https://example.com" + path_to_match, "bot")


def test_match_form_is_one_form():
    assert match_form("/%7ejoe/%e3%83%84") == "/~joe/%E3%83%84"
    assert match_form(match_form("/a%2fb/ツ?x=%41")) == match_form("/a%2fb/ツ?x=%41")


@pytest.mark.parametrize(("rule", "url", "matches"), [
    # 2.2.2: "If a percent-encoded US-ASCII octet is encountered in the URI, it MUST be
    # unencoded prior to comparison, unless it is a reserved character ... or the
    # character is outside the unreserved character range."
    ("/~joe/", "https://example.com/%7Ejoe/index.html", True),
    ("/%7Ejoe/", "https://example.com/~joe/index.html", True),
    ("/%7ejoe/", "https://example.com/~joe/", True),
    ("/a%2Fb", "https://example.com/a/b", False),  # %2F is reserved: kept encoded
    ("/a/b", "https://example.com/a%2Fb", False),
    ("/a%2fb", "https://example.com/a%2Fb", True),  # one octet, hex case aside
    ("/%41", "https://example.com/A", True),  # unreserved ALPHA
    ("/%2A", "https://example.com/x", False),  # %2A is a literal *, not a wildcard
    # 2.2.2: "The match evaluation MUST be case sensitive."
    ("/Foo", "https://example.com/foo", False),
    # Table 1's query row, with a wildcard running into the query, either spelling
    ("/*url=https://", "https://example.com/go?url=https%3A%2F%2Fx", True),
    ("/*url=https%3A%2F%2F", "https://example.com/go?url=https://x", True),
    ("/*url=https://", "https://example.com/go?url=https://x", True),
])
def test_rfc9309_percent_encoding_rule(rule, url, matches):
    robots = RobotsTxt.parse(f"User-agent: *\nDisallow: {rule}\n")
    assert robots.allowed(url, "bot") is not matches


# ---- RFC 9309 5.1 "Simple Example" and 5.2 "Longest Match" ---------------------------------------

SIMPLE = """User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot
"""


@pytest.mark.parametrize(("agent", "path", "allowed"), [
    # "*": every crawler not named in a group
    ("otherbot", "/example/page.html", False),
    ("otherbot", "/publications/", True),
    ("otherbot", "/a/image.gif", False),
    ("otherbot", "/a/image.gif?x", True),  # $ ends the pattern
    # foobot: all disallowed except two paths
    ("foobot", "/", False),
    ("foobot", "/example/page.html", True),
    ("foobot", "/example/allowed.gif", True),
    ("foobot", "/example/other.html", False),
    # barbot and bazbot share a group (2.2.1: several user-agent lines open one group)
    ("barbot", "/example/page.html", False),
    ("bazbot", "/example/page.html", False),
    ("bazbot", "/example/other.html", True),
    # quxbot's group is empty: everything allowed (2.2.2 "no rules in the group")
    ("quxbot", "/example/page.html", True),
    # 2.2.1: the product token is matched without case
    ("FOOBOT", "/example/page.html", True),
])
def test_rfc9309_simple_example(agent, path, allowed):
    assert RobotsTxt.parse(SIMPLE).allowed("https://example.com" + path, agent) is allowed


def test_rfc9309_longest_match():
    robots = RobotsTxt.parse("User-Agent: foobot\nAllow: /example/page/\n"
                             "Disallow: /example/page/disallowed.gif\n")
    assert robots.allowed("https://example.com/example/page/", "foobot")
    assert not robots.allowed("https://example.com/example/page/disallowed.gif", "foobot")


def test_rfc9309_groups_and_special_cases():
    # 2.2.1: groups naming the same crawler are combined
    robots = RobotsTxt.parse("User-agent: ExampleBot\nDisallow: /a\n\nUser-agent: *\n"
                             "Disallow: /\n\nUser-agent: examplebot\nDisallow: /b\n")
    assert not robots.allowed("https://e.com/a", "ExampleBot")
    assert not robots.allowed("https://e.com/b", "ExampleBot")
    assert robots.allowed("https://e.com/c", "ExampleBot")
    # 2.2.2: an Allow and a Disallow of the same length: Allow (SHOULD)
    tie = RobotsTxt.parse("User-agent: *\nDisallow: /x\nAllow: /x\n")
    assert tie.allowed("https://e.com/x", "bot")
    # 2.2.2: "The /robots.txt URI is implicitly allowed."
    assert RobotsTxt.parse("User-agent: *\nDisallow: /\n").allowed("https://e.com/robots.txt", "b")
    # 2.2.2: rules outside any group are ignored (SHOULD)
    assert RobotsTxt.parse("Disallow: /\nUser-agent: *\nAllow: /x\n").allowed("https://e.com/", "b")


# ---- RFC 9309 2.3.1 access results, 2.5 limits ----------------------------------------------------


@pytest.mark.parametrize(("status", "kind"), [
    (200, "parsed"),  # 2.3.1.1 successful access
    (404, "allow_all"), (401, "allow_all"), (403, "allow_all"),  # 2.3.1.3 "unavailable": MAY access any
    (500, "disallow_all"), (503, "disallow_all"), (None, "disallow_all"),  # 2.3.1.4 unreachable
    (429, "disallow_all"),  # 429 is overload, not absence (afm's choice; 2.3.1.4's spirit)
])
def test_rfc9309_access_results(status, kind):
    assert rules_from_fetch(status, b"User-agent: *\nDisallow: /\n").kind == kind


def test_rfc9309_parsing_limit():
    # 2.5: crawlers MUST parse at least 500 KiB
    body = b"User-agent: *\n" + b"Allow: /pad\n" * (MAX_ROBOTS_BYTES // 12 - 10) + b"Disallow: /x\n"
    assert len(body) <= MAX_ROBOTS_BYTES
    assert not rules_from_fetch(200, body).allowed("https://e.com/x", "bot")


# ---- W3C TDMRep 3.1: tdmrep.json, its locations matched as robots.txt paths -----------------------


def test_tdmrep_file_rules_in_order_and_paths_per_rfc9309():
    tdm = tdm_from_fetch(200, b'[{"location": "/~joe/*", "tdm-reservation": 1},'
                              b' {"location": "/public/*", "tdm-reservation": 0},'
                              b' {"location": "/", "tdm-reservation": 1,'
                              b' "tdm-policy": "https://p.example/policy.json"}]')
    assert len(parse_tdmrep(b'[{"location": "/", "tdm-reservation": 1}]')) == 1
    assert tdm.decide("https://e.com/%7Ejoe/a").reservation == 1  # decoded as RFC 9309 2.2.2
    assert tdm.decide("https://e.com/public/a").reservation == 0  # the first match decides
    assert tdm.decide("https://e.com/other").policy == "https://p.example/policy.json"


def test_tdmrep_priority_and_values():
    # the header supersedes the file, the HTML meta supersedes both
    policy = ConsentSettings().training_policy("afmbot")
    file_reserves = tdm_from_fetch(200, b'[{"location": "/", "tdm-reservation": 1}]')
    meta_zero = page_signals([], b'<!doctype html><meta name="tdm-reservation" content="0">',
                             True, policy.agents)
    assert not policy.tdm_evidence("https://e.com/a", file_reserves, None, meta_zero)
    header_one = page_signals([("tdm-reservation", "1")], b"", False, policy.agents)
    assert policy.tdm_evidence("https://e.com/a", None, None, header_one)


# ---- draft-ietf-aipref-vocab-07 and -attach ---------------------------------------------------------


@pytest.mark.parametrize(("statement", "expected"), [
    ("train-ai=y, search=n", "allow"),  # vocab-07 section 6's example
    ("train-ai=n", "disallow"),
    ("train-ai=n, search=y", "disallow"),
    ("search=n", "unknown"),  # no preference about training
    ("foo=n, train-ai=y", "allow"),  # section 6: unknown labels are ignored
    ("train-ai=y;q=n", "allow"),  # parameters are ignored
    ("train-ai=\"n\"", "unknown"),  # not a token y / n: unknown
    ("Train-AI=n", "unknown"),  # RFC 9651: an upper-case key fails the whole Dictionary
    ("train-ai=n, train-genai=y", "disallow"),  # the most restrictive applicable wins (5.1)
    ("train-ai=y, train-ai=n", "disallow"),  # RFC 9651 4.2.2: the last value of a key
])
def test_aipref_vocab_07(statement, expected):
    assert aipref_training(statement).value == expected


def test_aipref_attach_robots_rule():
    # attach section 3: Content-Usage in a group, with an optional path; longest match
    robots = rules_from_fetch(200, b"User-agent: *\nAllow: /\nContent-Usage: train-ai=y\n"
                                   b"Content-Usage: /private/ train-ai=n\n")
    policy = ConsentSettings().training_policy("afmbot")
    assert policy.decide("https://e.com/private/x", robots=robots).optout
    assert not policy.decide("https://e.com/public/x", robots=robots).optout


# ---- WHATWG URL Standard 3.5 host parsing (its examples) ---------------------------------------------


@pytest.mark.parametrize(("host", "serialized"), [
    ("EXAMPLE.COM", "example.com"),
    ("example%2Ecom", "example.com"),
    ("faß.example", "xn--fa-hia.example"),  # non-transitional: not fass.example
    ("0", "0.0.0.0"),
    ("%30", "0.0.0.0"),
    ("0x", "0.0.0.0"),
    ("[0:0::1]", "[::1]"),
    ("Bücher.example", "xn--bcher-kva.example"),
    ("0x7f.1", "127.0.0.1"),
])
def test_whatwg_host_parsing(host, serialized):
    assert parse_host(host) == serialized


@pytest.mark.parametrize("host", ["0xffffffff1", "[0:0::1%5D", "[0:0::%31]", "09",
                                  "example.255", "example^example"])
def test_whatwg_host_parsing_failures(host):
    with pytest.raises(HostError):
        parse_host(host)


@pytest.mark.parametrize(("url", "origin"), [
    ("HTTPS://Bücher.Example:443/a", "https://xn--bcher-kva.example"),  # IDNA, case, default port
    ("http://example.com:80/a", "http://example.com"),
    ("http://example.com:0080/a", "http://example.com"),  # the port is a number
    ("http://example.com:8080/a", "http://example.com:8080"),
    ("http://user:pw@example.com/a", "http://example.com"),  # userinfo is no part of an origin
    ("http://example.com./a", "http://example.com"),  # afm's choice: one trailing dot dropped
    ("http:\\\\example.com\\a", "http://example.com"),  # special schemes: \ is /
])
def test_whatwg_origins(url, origin):
    assert origin_of(url) == origin


# ---- WHATWG MIME Sniffing 7.1: HTML without a Content-Type ---------------------------------------


@pytest.mark.parametrize(("body", "html"), [
    (b"<!DOCTYPE html><title>x</title>", True),
    (b"  \n<!doctype HTML>", True),  # leading whitespace bytes are skipped
    (b"<title>x</title>", True),
    (b"<p>text", True),
    (b"<!-- c -->", True),
    (b"<html>", True),
    (b"<htmlx>", False),  # a tag-terminating byte must follow
    (b"<meta name=robots content=noai>", False),  # <meta> is not one of the patterns
    (b"plain text", False),
    (b"<?xml version='1.0'?>", False),
])
def test_mime_sniffing_html(body, html):
    assert sniffs_as_html(body) is html
    assert is_html(None, body) is html or b"<html" in body
    assert is_html("text/plain", body) is False  # a declared type is not sniffed
    assert is_html("text/html; charset=utf-8", b"") is True


def test_an_html_tag_near_the_start_is_read_too():
    """afm's addition (docs/crawler.md): XHTML with an XML prolog, which 7.1 sniffs as XML,
    still has its metas read when no Content-Type was sent."""
    body = b"<?xml version='1.0'?><html xmlns='http://www.w3.org/1999/xhtml'>"
    assert not sniffs_as_html(body) and is_html(None, body)
    assert is_html("", b"plain text <html>")
    assert not is_html("application/xml", body)  # a declared type is not sniffed


def test_html5_page_without_html_tag_has_its_noai_read():
    body = b'<!doctype html><meta name="robots" content="noai"><title>t</title><p>text'
    policy = ConsentSettings().training_policy("afmbot")
    signals = page_signals([], body, is_html(None, body), policy.agents)
    assert policy.decide("https://e.com/", signals=signals).optout


# ---- DeviantArt's noai / noimageai ----------------------------------------------------------------


@pytest.mark.parametrize("directive", ["noai", "noimageai"])
def test_deviantart_directives_opt_out_by_default(directive):
    """DeviantArt asks that content carrying either directive be left out of AI training
    sets; afm errs toward opting out, on a text page too."""
    policy = ConsentSettings().training_policy("afmbot")
    signals = page_signals([("X-Robots-Tag", directive)], b"text", False, policy.agents)
    assert policy.decide("https://e.com/a.txt", signals=signals).optout
