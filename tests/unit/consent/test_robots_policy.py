"""The robots policy beyond matching: status codes, size limit, fallback token, cache."""

from __future__ import annotations

from afm.consent.robots import (
    MAX_ROBOTS_BYTES,
    RobotsTxt,
    is_valid_product_token,
    match_form,
    path_of,
    rules_from_fetch,
)

ROBOTS = b"""
User-agent: Googlebot
Disallow: /google-no
Crawl-delay: 3

User-agent: *
Disallow: /
Allow: /public
Crawl-delay: 1

Sitemap: http://example.com/sitemap.xml
"""


def test_status_codes():
    assert rules_from_fetch(404, b"").allowed("http://a/x", "afmbot")
    assert rules_from_fetch(403, b"").allowed("http://a/x", "afmbot")
    assert not rules_from_fetch(503, b"").allowed("http://a/x", "afmbot")
    assert not rules_from_fetch(429, b"").allowed("http://a/x", "afmbot")
    unreachable = rules_from_fetch(None, None, error="timeout")
    assert not unreachable.allowed("http://a/x", "afmbot")
    # robots.txt itself is always fetchable (RFC 9309 2.2.2)
    assert unreachable.allowed("http://a/robots.txt", "afmbot")


def test_unreachable_is_retried_sooner_and_cache_capped_at_24h():
    assert rules_from_fetch(500, b"", retry_seconds=60).ttl == 60
    assert rules_from_fetch(200, b"", cache_seconds=10 * 24 * 3600).ttl == 24 * 3600
    rules = rules_from_fetch(200, b"")
    assert not rules.expired(rules.fetched_at + 100)
    assert rules.expired(rules.fetched_at + 24 * 3600)


def test_fallback_token_group_applies_when_neither_ours_nor_star_is_named():
    rules = rules_from_fetch(200, ROBOTS)
    # Not named, but a * group exists: * applies (SPEC 1.1), fallback or not.
    assert not rules.allowed("http://a/page", "afmbot")
    assert rules.allowed("http://a/public/x", "afmbot")
    assert not rules.allowed("http://a/page", "afmbot", fallback="Googlebot")
    assert rules.crawl_delay("afmbot", "Googlebot") == 1
    # No * group: the fallback's group applies (Applebot falls back to Googlebot).
    no_star = rules_from_fetch(200, b"User-agent: Googlebot\nDisallow: /google-no\nCrawl-delay: 3\n")
    assert not no_star.allowed("http://a/google-no", "afmbot", fallback="Googlebot")
    assert no_star.allowed("http://a/page", "afmbot", fallback="Googlebot")
    assert no_star.allowed("http://a/google-no", "afmbot")  # no fallback configured
    assert no_star.crawl_delay("afmbot", "Googlebot") == 3
    # fallback_first: Applebot's own order, the fallback's group before *.
    assert rules.allowed("http://a/page", "afmbot", fallback="Googlebot", fallback_first=True)
    assert not rules.allowed("http://a/google-no", "afmbot", "Googlebot", fallback_first=True)
    assert rules.crawl_delay("afmbot", "Googlebot", fallback_first=True) == 3
    # Our own group, when present, beats both.
    own = rules_from_fetch(200, ROBOTS + b"\nUser-agent: afmbot\nDisallow: /own-no\n")
    assert own.allowed("http://a/google-no", "afmbot", fallback="Googlebot", fallback_first=True)
    assert not own.allowed("http://a/own-no", "AFMBOT", fallback="Googlebot")
    assert own.crawl_delay("afmbot", "Googlebot") is None


def test_sitemaps_collected():
    assert rules_from_fetch(200, ROBOTS).sitemaps == ["http://example.com/sitemap.xml"]


def test_parse_limit_500_kib():
    filler = b"# " + b"x" * (MAX_ROBOTS_BYTES + 10) + b"\n"
    parsed = RobotsTxt.parse(b"User-agent: *\nDisallow: /a\n" + filler + b"Disallow: /b\n")
    assert parsed.truncated
    assert not parsed.allowed("http://h/a", "bot")
    assert parsed.allowed("http://h/b", "bot")  # past the limit: ignored


def test_matching_details():
    robots = RobotsTxt.parse("User-agent: *\nDisallow: /*.php$\nDisallow: /a**b\nAllow: /a*b/ok\n")
    assert not robots.allowed("http://h/x.php", "bot")
    assert robots.allowed("http://h/x.php?q", "bot")
    assert not robots.allowed("http://h/a-long-b", "bot")
    assert robots.allowed("http://h/a-b/ok", "bot")
    assert match_form("/ツ%e3") == "/%E3%83%84%E3"
    encoded = RobotsTxt.parse("User-agent: *\nDisallow: /ツ\n")
    assert not encoded.allowed("http://h/%e3%83%84", "bot")  # escapes compared case-blind
    assert not encoded.allowed("http://h/%E3%83%84", "bot")
    # RFC 9309 2.2.2: octets outside US-ASCII in the URI are encoded before matching too
    assert not encoded.allowed("http://h/ツ", "bot")
    assert path_of("http://h") == "/"
    assert path_of("http://h?q=1") == "/?q=1"
    assert path_of("http://h/a#frag") == "/a"
    assert is_valid_product_token("afm-bot_2") is False
    assert is_valid_product_token("afm-bot")
