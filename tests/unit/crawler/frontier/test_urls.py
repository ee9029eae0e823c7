"""URL canonicalisation (one page, one key) and the crawler-trap rules."""

from __future__ import annotations

import datetime as dt

from afm.crawler.frontier.urls import canonical_url, clean_url, host_key, trap_reason


def test_canonical_url_merges_spellings_of_one_page():
    a = canonical_url("HTTP://Example.COM:80/a?b=1&a=2#frag")
    b = canonical_url("http://example.com/a?a=2&b=1")
    assert a == b
    assert clean_url("https://Example.com:443/x#y") == "https://example.com/x"
    assert clean_url("http://example.com") == "http://example.com/"
    assert host_key("http://a.b:8080/x?y") == "http://a.b:8080"


def test_trap_rules():
    assert trap_reason("http://h/" + "a" * 3000) == "url_too_long"
    assert trap_reason("http://h/a/b/a/b/a/b") == "repeated_segments"
    assert trap_reason("http://h/cal/2024/01/02/03/04") == "calendar"
    future = dt.datetime.now(dt.UTC).year + 5
    assert trap_reason(f"http://h/cal?year={future}&month=1") == "calendar"
    assert trap_reason(f"http://h/events/{future}/01") == "calendar"
    assert trap_reason(f"http://h/products/{future}") is None  # one number is not a date
    assert trap_reason("http://h/blog/2015/05/post") is None
    assert trap_reason("http://h/" + "/".join(f"s{i}" for i in range(40))) == "too_many_segments"
    assert trap_reason("http://h/blog/2024/05/post") is None
    assert trap_reason("http://h/a/b/c?page=2") is None


def test_crawler_names_origins_as_consent_does():
    """The crawler's robots.txt unit is consent's origin (afm.consent.urls): a page at a
    Unicode host, a default port or a trailing dot is the origin its snapshots are filed by."""
    from afm.consent.urls import origin_of

    for url in ("https://Bücher.example:443/a", "http://EXAMPLE.com./x", "https://faß.example/"):
        assert host_key(url) == origin_of(url)
    assert host_key("https://Bücher.example/a") == "https://xn--bcher-kva.example"
    assert clean_url("https://Bücher.example/ä") == "https://xn--bcher-kva.example/%C3%A4"
    assert clean_url("https://faß.example/") == "https://xn--fa-hia.example/"  # not fass
