"""The private-address guard and the crawl's own robots directives (noindex, nofollow)."""

from __future__ import annotations

from afm.crawler.fetching.netguard import forbidden_reason


def test_forbidden_addresses():
    assert forbidden_reason("127.0.0.1") == "loopback"
    assert forbidden_reason("10.1.2.3") == "private"
    assert forbidden_reason("192.168.0.1") == "private"
    assert forbidden_reason("169.254.169.254") == "metadata"
    assert forbidden_reason("169.254.1.1") == "link-local"
    assert forbidden_reason("::1") == "loopback"
    assert forbidden_reason("::ffff:127.0.0.1") == "loopback"
    assert forbidden_reason("100.64.0.1") == "private"
    assert forbidden_reason("8.8.8.8") is None
    assert forbidden_reason("example.com") is None  # names are checked after resolution


def test_robots_directives_from_headers_and_meta():
    from afm.crawler.fetching.spider import robots_directives

    assert robots_directives(["noindex"], "afmbot") == {"noindex"}
    assert robots_directives(["afmbot: nofollow"], "afmbot") == {"nofollow"}
    assert robots_directives(["otherbot: noindex"], "afmbot") == set()
    assert robots_directives(["none"], "afmbot") == {"noindex", "nofollow"}
    assert robots_directives(["index, follow, unavailable_after: 25 Jun 2010"], "afmbot") == set()
