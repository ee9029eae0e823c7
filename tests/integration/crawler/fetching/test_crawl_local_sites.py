"""End-to-end crawls of a local multi-host site; the server's own log is the witness."""

from __future__ import annotations

import datetime as dt
import gzip

import pytest

from afm.crawler.api import crawl
from afm.crawler.storage.warc import iter_warc_responses, read_index
from afm.crawler.testsite import LocalSites, Page

TEXT = {"Content-Type": "text/plain"}
CONTROL = ("/robots.txt", "/.well-known/tdmrep.json")  # fetched once per host before pages
DELAY = 1.0


def _calendar(path: str, headers: dict) -> Page:
    # /cal/2024/1 -> links to the next month, forever
    parts = path.strip("/").split("/")
    year, month = (int(parts[1]), int(parts[2]))
    year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return Page(f'<a href="/cal/{year}/{month}">next</a><a href="/cal/{year}/{month}/x/1/2">day</a>')


def _loop(path: str, headers: dict) -> Page:
    return Page('<a href="a/">a</a><a href="b/">b</a>')  # /loop/a/b/a/b/... relative spiral


SITES = {
    "main": {
        "/robots.txt": Page("User-agent: *\nDisallow: /private\nDisallow: /*.secret$\n"
                            "Sitemap: {{host:main}}/sitemap.xml\n", headers=TEXT),
        "/": Page(
            '<a href="/a">a</a> <a href="/private/1">p</a> <a href="/x.secret">s</a>'
            '<a href="/noindex">ni</a> <a href="/nofollow">nf</a> <a href="/big">big</a>'
            '<a href="/bomb">bomb</a> <a href="/image">img</a> <a href="/cal/THIS_YEAR/1">cal</a>'
            '<a href="/loop/">loop</a> <a href="/a?utm=1#frag">dup?</a> <a href="/A">other</a>'
            '<a href="{{host:slow}}/">slow</a> <a href="{{host:down}}/">down</a>'
            '<a href="{{host:norobots}}/">nr</a> <a rel="nofollow" href="/relnofollow">r</a>'
            '<a href="/xrobots">xr</a> <a href="/stuck">slow</a> <a href="{{host:hop}}/">hop</a> <a href="{{host:loop}}/">lp</a>'
            .replace("THIS_YEAR", str(dt.datetime.now(dt.UTC).year))
        ),
        "/a": Page('<a href="/">home</a><a href="/a">self</a><a href="/private/2">p2</a>'),
        "/A": Page("case matters in paths"),
        "/a?utm=1": Page("query variant"),
        "/private/1": Page("secret"),
        "/private/2": Page("secret"),
        "/x.secret": Page("secret"),
        "/noindex": Page('<meta name="robots" content="noindex"><a href="/from-noindex">n</a>'),
        "/from-noindex": Page("followed from a noindex page"),
        "/nofollow": Page('<meta name="afmbot" content="nofollow"><a href="/never">n</a>'),
        "/never": Page("must not be fetched"),
        "/relnofollow": Page("must not be fetched"),
        "/big": Page(b"<p>" + b"x" * (11 * 1024 * 1024)),
        "/bomb": Page(gzip.compress(b"a" * (40 * 1024 * 1024)),
                      headers={"Content-Encoding": "gzip", "Content-Type": "text/html"}),
        "/image": Page(b"\x89PNG....", headers={"Content-Type": "image/png"}),
        "/cal/*": _calendar,
        "/loop/*": _loop,
        "/sitemap.xml": Page(
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            "<url><loc>{{host:main}}/only-in-sitemap</loc></url></urlset>",
            headers={"Content-Type": "application/xml"}),
        "/only-in-sitemap": Page("found via robots.txt Sitemap"),
        "/xrobots": Page('<a href="/from-xrobots">x</a>', headers={"X-Robots-Tag": "afmbot: noindex, nofollow"}),
        "/from-xrobots": Page("must not be fetched"),
        "/stuck": Page("too late", delay=4.0),
    },
    "hop": {  # robots.txt reached through redirects (within the 5 allowed)
        "/robots.txt": Page("", status=301, headers={"Location": "/r1"}),
        "/r1": Page("", status=302, headers={"Location": "/r2"}),
        "/r2": Page("User-agent: afmbot\nDisallow: /blocked\n", headers=TEXT),
        "/": Page('<a href="/blocked">b</a><a href="/fine">f</a>'),
        "/blocked": Page("must not be fetched"),
        "/fine": Page("fine"),
    },
    "loop": {  # robots.txt redirects forever: unavailable after 5 hops, so allow all
        "/robots.txt": Page("", status=301, headers={"Location": "/robots.txt?again"}),
        "/robots.txt?again": Page("", status=301, headers={"Location": "/robots.txt"}),
        "/": Page("reachable"),
    },
    "slow": {
        "/robots.txt": Page(f"User-agent: afmbot\nCrawl-delay: {DELAY}\nDisallow: /nope\n", headers=TEXT),
        "/": Page("".join(f'<a href="/p{i}">{i}</a>' for i in range(4)) + '<a href="/nope">n</a>'),
        **{f"/p{i}": Page(f"page {i}") for i in range(4)},
    },
    "down": {  # robots.txt answers 503: nothing else may be fetched
        "/robots.txt": Page("busy", status=503, headers=TEXT),
        "/": Page("must not be fetched"),
    },
    "norobots": {"/": Page("no robots.txt here: 404 means allow all")},
}


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    out = tmp_path_factory.mktemp("crawl")
    with LocalSites(SITES) as site:
        summary = crawl([site.url("main", "/")], out, max_pages=200, allow_private=True,
                        config={"progress_seconds": 0, "retry_times": 0, "max_depth": 100,
                                "download_timeout": 2})
        log = site.requests
        yield {"summary": summary, "log": log, "out": out, "site": site}


def _paths(log, host):
    return [p for h, p, _ in log if h == host]


def test_no_disallowed_url_is_ever_requested(crawled):
    log = crawled["log"]
    main = _paths(log, "main")
    assert not [p for p in main if p.startswith("/private") or p.endswith(".secret")]
    assert "/nope" not in _paths(log, "slow")
    assert _paths(log, "down") == ["/robots.txt"]  # 5xx: disallow all
    assert "/" in _paths(log, "norobots")  # 404: allow all
    hop = _paths(log, "hop")
    assert "/r2" in hop and "/fine" in hop and "/blocked" not in hop
    assert "/" in _paths(log, "loop")
    assert crawled["summary"]["robots_denied"] >= 4


def test_each_page_fetched_once_and_robots_once_per_host(crawled):
    log = crawled["log"]
    seen = [(h, p) for h, p, _ in log]
    pages = [x for x in seen if x[0] != "loop"]  # "loop" redirects its robots.txt in circles
    assert len(pages) == len(set(pages)), "a URL was fetched twice"
    assert "/A" in _paths(log, "main") and "/a?utm=1" in _paths(log, "main")


def assert_spaced(times: list[float], delay: float) -> None:
    """Requests the server saw from a crawler that honours ``Crawl-delay: delay``.

    The crawler starts them ``delay`` apart; the server sees each one its delivery time
    later, which a busy machine stretches without a bound (0.13 s at load 15 made one
    gap 0.87 s). No single gap is therefore a fact about the crawler, but the span is:
    from the first to the last of n requests it is at least (n - 1) x delay less the
    first one's delivery time, for which one whole ``delay`` is allowed. A crawler that
    ignored the delay (span about 0) or sent requests in pairs (about (n - 1) / 2 x
    delay) fails by a margin no load makes up."""
    n = len(times)
    assert n >= 3, f"too few requests to judge the spacing: {times}"
    assert times == sorted(times)
    span = times[-1] - times[0]
    gaps = [round(b - a, 3) for a, b in zip(times, times[1:])]
    assert span >= (n - 2) * delay, f"{n} requests over {span:.2f} s with Crawl-delay {delay}: gaps {gaps}"


def test_crawl_delay_is_honoured(crawled):
    log = [(p, t) for h, p, t in crawled["log"] if h == "slow" and p not in CONTROL]
    assert len(log) == 5
    assert log[0][0] == "/"  # the seed page first, its links after it
    assert_spaced([t for _, t in log], DELAY)


def test_traps_end(crawled):
    summary = crawled["summary"]
    assert summary["close_reason"] == "finished"
    main = _paths(crawled["log"], "main")
    assert 0 < sum(p.startswith("/cal/") for p in main) <= 24  # up to the end of next year
    assert 0 < sum(p.startswith("/loop/") for p in main) < 20
    assert summary["skipped"].get("trap_calendar", 0) > 0
    assert summary["skipped"].get("trap_repeated_segments", 0) > 0


def test_oversize_bomb_and_content_type_refused(crawled):
    summary = crawled["summary"]
    outcomes = summary["outcomes"]
    assert outcomes.get("refused_oversize", 0) == 1
    assert outcomes.get("refused_decompression_bomb", 0) == 1
    assert outcomes.get("refused_content_type", 0) == 1
    assert outcomes.get("timeout", 0) == 1
    stored = {r["url"].split("/", 3)[-1] for r in read_index(summary["index_path"])}
    assert not {"big", "bomb", "image", "stuck"} & stored


def test_meta_robots_and_sitemap(crawled):
    main = _paths(crawled["log"], "main")
    assert "/from-noindex" in main  # noindex still follows links
    assert "/never" not in main and "/relnofollow" not in main
    assert "/only-in-sitemap" in main
    stored = {r["url"].split("/", 3)[-1] for r in read_index(crawled["summary"]["index_path"])}
    assert "noindex" not in stored and "nofollow" in stored
    assert "xrobots" not in stored and "/from-xrobots" not in main  # X-Robots-Tag


def test_warc_matches_index_and_server_log(crawled):
    summary = crawled["summary"]
    pages = [p for f in summary["warc_files"] for p in iter_warc_responses(f)]
    index = read_index(summary["index_path"])
    assert len(pages) == len(index) == summary["pages"]
    assert {p["url"] for p in pages} == {r["url"] for r in index}
    assert summary["bytes"] == sum(len(p["body"]) for p in pages)
    fetched = {(h, p) for h, p, _ in crawled["log"] if p not in CONTROL}
    assert summary["pages"] <= len(fetched)


def test_private_addresses_refused_without_allow_private(tmp_path):
    with LocalSites({"h": {"/": Page("hello")}}) as site:
        summary = crawl([site.url("h", "/")], tmp_path, max_pages=5,
                        config={"progress_seconds": 0, "retry_times": 0})
        assert site.requests == []
    assert summary["pages"] == 0
    assert summary["outcomes"].get("private_address") == 1


def test_no_unexpected_errors(crawled):
    assert not [k for k in crawled["summary"]["outcomes"] if k.startswith("error_")]


def test_requests_waiting_for_one_robots_fetch_all_get_its_decision(tmp_path):
    """Many first requests to a host while its (slow) robots.txt is in flight."""
    pages = {f"/p{i}": Page(f"page {i}") for i in range(6)}
    robots = Page("User-agent: *\nDisallow: /p5\n", headers=TEXT, delay=0.5)
    with LocalSites({"h": {"/robots.txt": robots, **pages}}) as site:
        seeds = [site.url("h", f"/p{i}") for i in range(6)]
        summary = crawl(seeds, tmp_path, max_pages=10, allow_private=True,
                        config={"progress_seconds": 0, "per_host_concurrency": 8})
        fetched = sorted(p for _, p, _ in site.requests)
    assert fetched == ["/.well-known/tdmrep.json", "/p0", "/p1", "/p2", "/p3", "/p4", "/robots.txt"]
    assert summary["pages"] == 5 and summary["robots_denied"] == 1
    assert not [k for k in summary["outcomes"] if k.startswith("error_")]
