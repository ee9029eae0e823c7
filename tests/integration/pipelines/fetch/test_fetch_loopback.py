"""``afm fetch`` against ``afm crawl`` on one loopback web (:func:`afm.app.bench.crawler.fetch.mixed_web`:
hosts disallowing parts, with Crawl-delay, opting out of training by each signal the
crawler reads, slow, failing, redirecting, robots.txt 503 / 404 / behind redirects,
noindex pages): the same pages fetched, the same training-use decisions; the server's own
log shows every host's requests spaced by its Crawl-delay or the default interval and
robots.txt asked once per host; every URL ends as one outcome. Then a fetch killed
mid-run and rerun: each page stored once, fetched once (but what was in flight at the
kill), robots.txt not asked again.

``make test`` runs a small web (20 hosts, one of each kind, 5 pages each); the slow tier
(``tests/slow/pipelines/fetch/``) the issue's (200 hosts, 20,000 pages)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from afm.app.bench.crawler.fetch import (
    KINDS,
    OPTED_OUT,
    mixed_web,
    run_fetch_process,
    serve,
    web_urls,
)
from afm.crawler.storage.warc import read_index

LOCAL = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]
CONTROL = ("/robots.txt", "/robots-moved.txt", "/.well-known/tdmrep.json")
# One request at a time per host: the fetcher then counts each interval from the end of
# the previous response, which the server logged before answering, so the server's own log
# must show every interval in full, however late its threads ran on a busy machine (with
# several at once, a request's log time may lag its arrival; the pacing of that case is
# unit-tested in tests/unit/crawler/batch/test_pacing.py).
PER_HOST = 1
CLOCK_S = 0.001  # time.time() rounding


def fetch_settings(interval: float, **extra: Any) -> dict[str, Any]:
    return {"allow_private": True, "host_interval": interval, "retry_times": 1, "download_timeout": 5,
            "per_host_concurrency": PER_HOST, **extra}


def crawl_settings(n: int) -> dict[str, Any]:
    """The crawler fetching the same list: no link following, budgets that do not bind."""
    return {"follow_links": False, "progress_seconds": 0, "retry_times": 1, "download_timeout": 5,
            "per_host_budget": n, "per_host_concurrency": 2, "autothrottle": False}


def compare(web_size: tuple[int, int], interval: float, delay: float, tmp: Path,
            timeout: float) -> dict[str, Any]:
    """Fetch and crawl one web; what both stored, and the fetch's part of the server log."""
    from afm.crawler.api import crawl

    hosts, pages = web_size
    web = mixed_web(hosts, pages, delay=delay)
    site = serve(web)
    try:
        urls = web_urls(site, web)
        (tmp / "urls.txt").write_text("\n".join(urls) + "\n")
        started = time.time()
        # In its own process, as the crawl: the server's log times are not held up by the
        # fetcher's share of this process's GIL.
        summary = run_fetch_process(tmp / "urls.txt", tmp / "fetched", fetch_settings(interval))
        fetch_log = site.requests
        crawl(str(tmp / "urls.txt").split(), tmp / "crawled", max_pages=len(urls) * 2, allow_private=True,
              config=crawl_settings(len(urls)), timeout=timeout)
        name_of = {site.base_url(h).split("//")[1]: h for h in web}
    finally:
        site.stop()
    assert time.time() - started < timeout
    return {"web": web, "urls": urls, "summary": summary, "log": fetch_log, "name_of": name_of,
            "fetched": read_index(tmp / "fetched"), "crawled": read_index(tmp / "crawled"),
            "interval": interval, "delay": delay, "tmp": tmp}


def stored(rows: list[dict[str, Any]]) -> dict[str, tuple]:
    """request URL -> (final URL, status, training use, the opt-out signals)."""
    out = {}
    for r in rows:
        signals = sorted({e["signal"] for e in json.loads(r["training_evidence"] or "[]")})
        out[r["request_url"]] = (r["url"], r["status"], r["training_use"], tuple(signals))
    return out


def check_same_as_crawl(run: dict[str, Any]) -> None:
    fetched, crawled = stored(run["fetched"]), stored(run["crawled"])
    assert len(run["fetched"]) == len(fetched), "a page was stored twice"
    assert fetched == crawled
    kind_of = {h: host.kind for h, host in run["web"].items()}
    by_kind: dict[str, Counter] = defaultdict(Counter)
    for url, (_final, _status, use, _signals) in fetched.items():
        by_kind[kind_of[run["name_of"][url.split("/")[2]]]][use] += 1
    for kind in OPTED_OUT:
        assert set(by_kind[kind]) == {"optout"}, (kind, by_kind[kind])
    for kind in ("plain", "disallow", "delay", "slow", "failing", "redirect", "robots_404", "noindex"):
        assert set(by_kind[kind]) == {"allowed"}, (kind, by_kind[kind])
    assert "robots_503" not in by_kind  # robots.txt 503: nothing may be fetched


def check_politeness(run: dict[str, Any]) -> dict[str, float]:
    """From the server's log of the fetch: per host, requests at least its interval apart
    (see PER_HOST), robots.txt asked once; disallowed pages never."""
    times: dict[str, list[float]] = defaultdict(list)
    paths: dict[str, Counter] = defaultdict(Counter)
    for host, path, when in run["log"]:
        times[host].append(when)
        paths[host][path] += 1
    assert set(times) == set(run["web"]), "a host was never asked for its robots.txt"
    worst = {}
    for host, stamps in times.items():
        kind = run["web"][host].kind
        interval = max(run["interval"], run["delay"] if kind == "delay" else 0.0)
        stamps.sort()
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        if gaps:
            worst[host] = min(gaps) / interval
            assert min(gaps) >= interval - CLOCK_S, (host, kind, interval, gaps)
        assert paths[host]["/robots.txt"] == 1, (host, paths[host])
        assert not [p for p in paths[host] if p.startswith("/private/")], host
        if kind == "robots_503":
            assert set(paths[host]) == {"/robots.txt"}
    return worst


def check_accounting(run: dict[str, Any]) -> None:
    s = run["summary"]
    assert s["accounting_ok"] and s["urls_in"] == s["outcomes_out"] == len(run["urls"])
    outcomes = s["outcomes"]
    hosts, pages = len(run["web"]), run["web"]["h0"].pages
    per_kind = hosts // len(KINDS) or 1
    assert outcomes["robots_unavailable"] == per_kind * pages  # robots.txt 503
    assert outcomes["robots_denied"] >= per_kind * (pages // 2)  # /private/ and the hop's /p1
    assert outcomes["noindex"] == per_kind * ((pages + 1) // 2)
    assert s["pages"] == len(run["fetched"])
    assert (run["tmp"] / "fetched" / "summary.json").exists()
    assert s["host_report"] and all(Path(p).exists() for p in s["host_report"])


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict[str, Any]:
    return compare((len(KINDS), 5), interval=0.15, delay=0.5,
                   tmp=tmp_path_factory.mktemp("fetch-vs-crawl"), timeout=600)


def test_fetch_stores_what_the_crawler_stores(small) -> None:
    check_same_as_crawl(small)


def test_fetch_is_polite_by_the_server_log(small) -> None:
    check_politeness(small)


def test_every_url_ends_as_one_outcome(small) -> None:
    check_accounting(small)


# ------------------------------------------------------------------------- kill and rerun


def _launch(urls: Path, out: Path, interval: float) -> subprocess.Popen:
    sets = [a for k, v in fetch_settings(interval).items() for a in ("--set", f"{k}={json.dumps(v)}")]
    return subprocess.Popen([sys.executable, "-m", "afm.app", "fetch", "--urls", str(urls), "--output", str(out),
                             *sets, *LOCAL, "--worker-logs", "terminal"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def test_a_fetch_killed_and_rerun_fetches_each_page_once(tmp_path: Path) -> None:
    web = mixed_web(8, 12, delay=0.3)  # plain .. tdm_file: no failing or redirecting hosts
    site = serve(web)
    try:
        urls = web_urls(site, web)
        listed = tmp_path / "urls.txt"
        listed.write_text("\n".join(urls) + "\n")
        out = tmp_path / "out"
        proc = _launch(listed, out, 0.2)
        deadline = time.time() + 300
        while sum(p.startswith("/p") for _h, p, _t in site.requests) < len(urls) // 3:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            assert time.time() < deadline, "the fetch made no progress"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        before = len(site.requests)
        after_kill = Counter((h, p) for h, p, _t in site.requests)
        rerun = _launch(listed, out, 0.2)
        output, _ = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, output.decode()[-4000:]
        log = site.requests
    finally:
        site.stop()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounting_ok"] and summary["urls_in"] == len(urls)
    assert summary["resumed"] > 0
    rows = read_index(out)
    assert len(rows) == len({r["request_url"] for r in rows}), "a page was stored twice"
    pages = Counter((h, p) for h, p, _t in log if p not in ("/robots.txt", "/.well-known/tdmrep.json"))
    twice = {k for k, n in pages.items() if n > 1}
    # Fetched twice: only what was in flight when the process died (at most one request per
    # host and slot of concurrency; no record of it had been written).
    assert len(twice) <= 2 * len(web), twice
    # (on failure: each such page's requests before the kill, to tell a retry in the first run from a refetch)
    assert all(after_kill[k] == 1 for k in twice), {k: after_kill[k] for k in twice if after_kill[k] != 1}
    assert not [k for k in pages if k[1].startswith("/private/")]
    robots = Counter(h for h, p, _t in log if p == "/robots.txt")
    assert set(robots.values()) == {1}, robots  # the rerun reused what the first run fetched
    assert len(log) > before
    print(f"\nkilled after {sum(after_kill.values())} requests; fetched twice: {len(twice)} "
          f"of {len(pages)} pages")
