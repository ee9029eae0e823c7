"""Two daemons sharing one Redis frontier split the work and never fetch a page twice."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import yaml

from afm.crawler.storage.warc import read_index
from afm.crawler.testsite import LocalSites, Page

HOSTS = ["r0", "r1", "r2", "r3"]
PAGES = 30


def _site() -> dict:
    sites = {}
    for h in HOSTS:
        pages = {f"/p{i}": Page("".join(f'<a href="/p{j}">{j}</a>' for j in (i + 1, i + 2) if j < PAGES),
                                delay=0.2) for i in range(PAGES)}
        pages["/"] = Page('<a href="/p0">start</a>')
        sites[h] = pages
    return sites


def _config(tmp_path: Path, n: int, site: LocalSites, redis_url: str, **extra: object) -> Path:
    """Daemon ``n``'s config (``crawl{n}.yaml``): every host's seed, one shared Redis frontier."""
    cfg = {
        "seeds": [site.url(h, "/") for h in HOSTS],
        "out_dir": str(tmp_path / f"out{n}"),
        "allow_private": True,
        "redis_url": redis_url,
        "per_host_concurrency": 1,
        # A daemon takes at most this many requests off the shared queue at once;
        # an idle one looks for work every 5 s (Scrapy's heartbeat).
        "concurrent_requests": 4,
        "daemon": True,
        "idle_exit_seconds": 2,
        "progress_seconds": 0,
        "metrics_port": 0,  # any free port: tests run side by side
        **extra,
    }
    path = tmp_path / f"crawl{n}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _starter(stack: ExitStack, crawler_daemon, tmp_path: Path, site: LocalSites, redis_url: str,
             **extra: object) -> Callable[[int], subprocess.Popen]:
    """Starts daemon ``n`` (its log appended to ``log{n}.txt``), not waiting for it to be up;
    any still running when ``stack`` closes is killed, whatever the test did."""

    def start(n: int) -> subprocess.Popen:
        config = _config(tmp_path, n, site, redis_url, **extra)
        return stack.enter_context(crawler_daemon(config, tmp_path / f"log{n}.txt", wait_ready=False))

    return start


def _all_exit_cleanly(tmp_path: Path, procs: list[subprocess.Popen]) -> None:
    """Every daemon stops by itself (idle, the frontier empty) within 180 s, with status 0."""
    for n, proc in enumerate(procs):
        assert proc.wait(180) == 0, (tmp_path / f"log{n}.txt").read_text()[-3000:]


def test_two_daemons_share_one_frontier(tmp_path, redis_url, crawler_daemon):
    with LocalSites(_site()) as site:
        with ExitStack() as stack:
            start = _starter(stack, crawler_daemon, tmp_path, site, redis_url)
            _all_exit_cleanly(tmp_path, [start(n) for n in range(2)])
        # control files are fetched once per host by each daemon (each has its own cache)
        log = Counter((h, p) for h, p, _ in site.requests
                      if p not in ("/robots.txt", "/.well-known/tdmrep.json"))
    assert max(log.values()) == 1, [k for k, v in log.items() if v > 1]
    per_daemon = [[r["url"] for r in read_index(tmp_path / f"out{n}")] for n in range(2)]
    assert all(per_daemon), "one daemon did no work"
    stored = Counter(u for urls in per_daemon for u in urls)
    assert max(stored.values()) == 1
    assert len(stored) == len(HOSTS) * (PAGES + 1)


def test_kill_9_of_one_daemon_loses_nothing(tmp_path, redis_url, crawler_daemon, wait_until):
    """Requests a killed daemon had taken (or whose records it lost) go back to the queue."""
    with LocalSites(_site()) as site:
        try:
            with ExitStack() as stack:
                start = _starter(stack, crawler_daemon, tmp_path, site, redis_url, warc_max_bytes=3000)
                procs = [start(n) for n in range(2)]
                wait_until(lambda: len(read_index(tmp_path / "out0")) >= 6, 60, "daemon 0 to store six records")
                procs[0].kill()
                procs[0].wait(10)
                procs[0] = start(0)
                _all_exit_cleanly(tmp_path, procs)
        finally:
            # kept for diagnosis when the assertions below fail
            (tmp_path / "server.log").write_text("\n".join(f"{t:.3f} {h} {p}" for h, p, t in site.requests))
    stored = Counter(r["url"] for n in range(2) for r in read_index(tmp_path / f"out{n}"))
    assert len(stored) == len(HOSTS) * (PAGES + 1), "a page was lost"
    assert max(stored.values()) == 1, "a page was stored twice"


def _scheduler(redis_url: str, out_dir: Path):
    """A daemon's scheduler on the shared queue, its spider's state read from ``out_dir``
    as a restart reads it."""
    from types import SimpleNamespace

    from scrapy import Spider
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from afm.crawler.frontier.state import CrawlState
    from afm.crawler.run import redis_settings

    crawler = get_crawler(Spider, redis_settings(SimpleNamespace(redis_url=redis_url, redis_key="held")))
    spider = Spider.from_crawler(crawler, "afm")
    spider.state = CrawlState(out_dir)
    scheduler = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
    scheduler.open(spider)
    return scheduler, spider


def test_a_request_popped_but_not_yet_logged_survives_kill_9(tmp_path, redis_url):
    """``kill -9`` between the pop and its log line: the restarted daemon hands that very
    request out first; a pop that was logged is not handed out twice."""
    from scrapy import Request

    out = tmp_path / "out"
    first, spider = _scheduler(redis_url, out)
    for n in range(3):
        assert first.enqueue_request(Request(f"http://a.test/{n}", meta={"afm_url": f"http://a.test/{n}"}))
    assert first.next_request().url == "http://a.test/0"  # popped and logged
    first._pop_and_hold(keys=[first.queue.key, first._held_key])  # popped; the crash comes before the log
    spider.state.close()

    again, spider = _scheduler(redis_url, out)
    assert again.next_request().url == "http://a.test/1"  # the cut-off pop, first
    assert again.next_request().url == "http://a.test/2"
    assert again.next_request() is None
    spider.state.close()

    third, spider = _scheduler(redis_url, out)  # every pop logged: nothing held back
    assert third.next_request() is None
    taken = [json.loads(line)["u"] for line in (out / "state" / "frontier.jsonl").read_text().splitlines()]
    assert taken == [f"http://a.test/{n}" for n in range(3)]
