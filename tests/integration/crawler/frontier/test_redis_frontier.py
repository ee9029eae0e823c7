"""Two daemons sharing one Redis frontier split the work and never fetch a page twice."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter

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


def _daemon(tmp_path, n: int, site: LocalSites, redis_url: str, **extra) -> subprocess.Popen:
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
    cmd = [sys.executable, "-c", "from afm.app.cli import main; main()", "crawler", "daemon", "--config", str(path)]
    return subprocess.Popen(cmd, stdout=open(tmp_path / f"log{n}.txt", "ab"), stderr=subprocess.STDOUT)


def test_two_daemons_share_one_frontier(tmp_path, redis_url):
    with LocalSites(_site()) as site:
        procs = [_daemon(tmp_path, n, site, redis_url) for n in range(2)]
        try:
            for n, proc in enumerate(procs):
                assert proc.wait(180) == 0, (tmp_path / f"log{n}.txt").read_text()[-3000:]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
        # control files are fetched once per host by each daemon (each has its own cache)
        log = Counter((h, p) for h, p, _ in site.requests
                      if p not in ("/robots.txt", "/.well-known/tdmrep.json"))
    assert max(log.values()) == 1, [k for k, v in log.items() if v > 1]
    per_daemon = [[r["url"] for r in read_index(tmp_path / f"out{n}")] for n in range(2)]
    assert all(per_daemon), "one daemon did no work"
    stored = Counter(u for urls in per_daemon for u in urls)
    assert max(stored.values()) == 1
    assert len(stored) == len(HOSTS) * (PAGES + 1)


def test_kill_9_of_one_daemon_loses_nothing(tmp_path, redis_url):
    """Requests a killed daemon had taken (or whose records it lost) go back to the queue."""
    with LocalSites(_site()) as site:
        procs = [_daemon(tmp_path, n, site, redis_url, warc_max_bytes=3000) for n in range(2)]
        try:
            deadline = time.time() + 60
            while len(read_index(tmp_path / "out0")) < 6:
                assert time.time() < deadline, "daemon 0 stored nothing"
                time.sleep(0.1)
            procs[0].kill()
            procs[0].wait(10)
            procs[0] = _daemon(tmp_path, 0, site, redis_url, warc_max_bytes=3000)
            for n, proc in enumerate(procs):
                assert proc.wait(180) == 0, (tmp_path / f"log{n}.txt").read_text()[-3000:]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
            # kept for diagnosis when the assertions below fail
            (tmp_path / "server.log").write_text("\n".join(f"{t:.3f} {h} {p}" for h, p, t in site.requests))
    stored = Counter(r["url"] for n in range(2) for r in read_index(tmp_path / f"out{n}"))
    assert len(stored) == len(HOSTS) * (PAGES + 1), "a page was lost"
    assert max(stored.values()) == 1, "a page was stored twice"
