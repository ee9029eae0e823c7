"""The daemon: kill -9 then restart loses nothing and duplicates nothing; SIGTERM is clean."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path

import yaml

from afm.crawler.frontier.state import CrawlState
from afm.crawler.storage.warc import iter_warc_responses, read_index
from afm.crawler.testsite import LocalSites, Page

HOSTS = ["h0", "h1", "h2"]
PAGES = 30


def _site(delay: float) -> dict:
    sites = {}
    for h in HOSTS:
        pages = {f"/p{i}": Page(f"<p>{h} page {i}</p>" + "".join(
            f'<a href="/p{j}">{j}</a>' for j in (i + 1, i + 2) if j < PAGES), delay=delay)
            for i in range(PAGES)}
        pages["/"] = Page('<a href="/p0">start</a>' + "".join(f'<a href="{{{{host:{o}}}}}/">{o}</a>' for o in HOSTS))
        sites[h] = pages
    return sites


def _write_config(tmp: Path, site: LocalSites, **extra) -> Path:
    cfg = {
        "seeds": [site.url("h0", "/")],
        "out_dir": str(tmp / "out"),
        "allow_private": True,
        "warc_max_bytes": 4000,
        "per_host_concurrency": 1,
        "idle_exit_seconds": 1,
        "progress_seconds": 0,
        "metrics_port": 0,  # any free port: tests run side by side
        "inbox": str(tmp / "inbox"),
        "poll_seconds": 0.5,
        **extra,
    }
    path = tmp / "crawl.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path



def _expected(site: LocalSites) -> set[str]:
    return {site.url(h, p) for h in HOSTS for p in ["/", *[f"/p{i}" for i in range(PAGES)]]}


def test_kill_9_then_restart_fetches_every_page_exactly_once(tmp_path, crawler_daemon, wait_until):
    with LocalSites(_site(delay=0.15)) as site:
        config = _write_config(tmp_path, site)
        with crawler_daemon(config, tmp_path / "log1.txt") as proc:
            wait_until(lambda: len(read_index(tmp_path / "out")) >= 20, 60, "some closed WARC files")
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        before_kill = {r["url"] for r in read_index(tmp_path / "out")}
        fetched_before = Counter((h, p) for h, p, _ in site.requests if p != "/robots.txt")
        assert len(fetched_before) > len(before_kill), "nothing was in flight or unindexed"

        # The restart finishes the crawl and exits when idle: it may be done before a poll
        # of its health endpoint would see it, so only its exit is waited for.
        with crawler_daemon(config, tmp_path / "log2.txt", wait_ready=False) as proc:
            assert proc.wait(120) == 0, (tmp_path / "log2.txt").read_text()[-3000:]
        rows = read_index(tmp_path / "out")
        urls = Counter(r["url"] for r in rows)
        assert set(urls) == _expected(site)
        assert max(urls.values()) == 1, "a page was stored twice"
        # The WARC files agree with the index, and no unfinished file is left.
        out = tmp_path / "out" / "warc"
        assert not list(out.glob(".*.open"))
        warc_urls = Counter(p["url"] for f in out.glob("*.warc.gz") for p in iter_warc_responses(f))
        assert warc_urls == urls
        # Only pages whose records were lost (not in a closed file) were fetched again.
        refetched = {site.url(h, p) for (h, p), n in Counter(
            (h, p) for h, p, _ in site.requests if p != "/robots.txt").items() if n > 1}
        assert not (refetched & before_kill)


def test_sigterm_stops_cleanly_and_inbox_seeds_are_taken(tmp_path, crawler_daemon, wait_until):
    with LocalSites(_site(delay=0.15)) as site:
        config = _write_config(tmp_path, site, seeds=[site.url("h1", "/p25")], idle_exit_seconds=0)
        with crawler_daemon(config, tmp_path / "log1.txt") as proc:
            inbox = tmp_path / "inbox"
            inbox.mkdir(exist_ok=True)
            (inbox / "more.txt").write_text(site.url("h2", "/p20") + "\n")
            wait_until(lambda: any(p == "/p20" and h == "h2" for h, p, _ in site.requests), 60, "inbox seed fetched")
            wait_until(lambda: (inbox / "done" / "more.txt").exists(), 10, "seed file moved to done/")
            os.kill(proc.pid, signal.SIGTERM)
            assert proc.wait(30) == 0
        out = tmp_path / "out"
        assert not list((out / "warc").glob(".*.open")), "open WARC file left after SIGTERM"
        assert (out / "summary.json").exists()
        urls = [r["url"] for r in read_index(out)]
        # taken: stored, or (its fetch cancelled by the stop) pending for the next run
        state = CrawlState(out)
        state.close()
        assert site.url("h2", "/p20") in set(urls) | {u for u, _ in state.pending}
        assert len(urls) == len(set(urls))


STUCK_S = 60.0  # the stuck host's first answer takes this long: a stop that waited for it would too


def _slow_the_first_time() -> object:
    """A page that answers after STUCK_S seconds the first time it is asked, at once after."""
    asked: list[int] = []

    def page(path: str, headers: dict) -> Page:
        asked.append(1)
        return Page("<p>stuck, then fine</p>", delay=STUCK_S if len(asked) == 1 else 0.0)

    return page


def test_sigterm_cancels_in_flight_requests_and_the_restart_refetches_nothing(tmp_path, crawler_daemon,
                                                                             wait_until):
    """SIGTERM while one host holds a request for a minute and others have requests queued:
    the daemon stops without waiting for them (well inside the minute), closes its WARC file,
    and the restart fetches only what the stop cancelled, never a page it had stored."""
    sites = _site(delay=0.15)
    sites["stuck"] = {"/": _slow_the_first_time()}
    sites["h0"]["/"] = Page(str(sites["h0"]["/"].body) + '<a href="{{host:stuck}}/">stuck</a>')
    with LocalSites(sites) as site:
        config = _write_config(tmp_path, site)
        with crawler_daemon(config, tmp_path / "log1.txt") as proc:
            wait_until(lambda: ("stuck", "/") in {(h, p) for h, p, _ in site.requests}
                       and len(read_index(tmp_path / "out")) >= 10, 90, "the stuck request and ten stored pages")
            os.kill(proc.pid, signal.SIGTERM)
            assert proc.wait(STUCK_S) == 0, (tmp_path / "log1.txt").read_text()[-3000:]
        out = tmp_path / "out"
        assert not list((out / "warc").glob(".*.open")), "open WARC file left after SIGTERM"
        stored_before = {r["url"] for r in read_index(out)}
        # Cancelled, not waited for: its answer (a minute after it was asked) was never stored.
        # Behaviour, not the clock: a stop that waited for it would have stored it.
        assert site.url("stuck", "/") not in stored_before, "the stop waited for the stuck request"
        summary = json.loads((out / "summary.json").read_text())
        assert summary["close_reason"] == "shutdown"
        served_before = len(site.requests)

        with crawler_daemon(config, tmp_path / "log2.txt", wait_ready=False) as proc:
            assert proc.wait(120) == 0, (tmp_path / "log2.txt").read_text()[-3000:]
        urls = Counter(r["url"] for r in read_index(out))
        assert set(urls) == _expected(site) | {site.url("stuck", "/")}
        assert max(urls.values()) == 1, "a page was stored twice"
        again = {site.url(h, p) for h, p, _ in site.requests[served_before:]}
        assert not (again & stored_before), f"stored before the stop, fetched again: {again & stored_before}"
