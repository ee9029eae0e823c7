"""Issue 44: the crawler daemon at scale on loopback: a generated web, one daemon and then
two on one Redis frontier, every page stored exactly once, memory flat over the crawl
(the daemons' own /metrics, sampled as Prometheus would), and pages/s next to a bare
Scrapy spider on the same web in the same run.

``make test`` runs a small web (600 pages on 12 hosts); the slow tier the full one
(100,000 pages on 500 hosts, the issue's size)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from afm.app.bench.crawler.crawl import CONCURRENCY, PER_HOST, make_site, run_bare
from afm.crawler.operations.metrics import endpoint_file
from afm.crawler.operations.status import parse_metrics
from afm.crawler.storage.warc import read_index
from afm.crawler.testsite import LocalSites


@dataclass
class Daemon:
    proc: subprocess.Popen
    out: Path
    log: Path
    samples: list[tuple[float, float, float]] = field(default_factory=list)  # (time, pages, rss bytes)

    def sample(self) -> None:
        path = endpoint_file(self.out)
        if not path.exists():
            return
        info = json.loads(path.read_text())
        try:
            with urllib.request.urlopen(f"http://{info['host']}:{info['port']}/metrics", timeout=5) as r:
                m = parse_metrics(r.read().decode())
        except OSError:
            return  # starting or stopping
        self.samples.append((time.monotonic(), m.get("afm_crawler_pages_total", 0.0),
                             m.get("process_resident_memory_bytes", 0.0)))


def _start(tmp: Path, name: str, seeds: list[str], pages: int, **extra) -> Daemon:
    cfg = {"seeds": seeds, "out_dir": str(tmp / name), "allow_private": True, "daemon": True,
           "concurrent_requests": CONCURRENCY, "per_host_concurrency": PER_HOST, "autothrottle": False,
           "max_pages": 2 * pages, "max_depth": 10_000, "idle_exit_seconds": 3, "progress_seconds": 10,
           "metrics_port": 0, "log_level": "ERROR", **extra}
    (tmp / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    log = tmp / f"{name}.log"
    proc = subprocess.Popen([sys.executable, "-c", "from afm.app.cli import main; main()", "crawler", "daemon",
                             "--config", str(tmp / f"{name}.yaml")], stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    return Daemon(proc, tmp / name, log)


def _run(daemons: list[Daemon], timeout: float) -> float:
    """Wait for the daemons to finish, sampling their metrics; the seconds from the first
    page to the last (start-up and the idle wait at the end excluded)."""
    end = time.monotonic() + timeout
    try:
        while any(d.proc.poll() is None for d in daemons):
            assert time.monotonic() < end, "the crawl did not finish in time"
            for d in daemons:
                d.sample()
            time.sleep(0.5)
    finally:
        for d in daemons:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait(10)
    for d in daemons:
        assert d.proc.returncode == 0, d.log.read_text()[-3000:]
    first = min(t for d in daemons for t, p, _ in d.samples if p > 0)
    last = max(min((t for t, p, _ in d.samples if p >= max(q for _, q, _ in d.samples)), default=first)
               for d in daemons)
    return max(last - first, 1e-3)


def _memory_growth(d: Daemon, total: int) -> float:
    """Peak memory after the first quarter of the daemon's pages over memory then: 1.0 =
    flat. (The first quarter holds start-up: imports, the robots.txt of every host.)"""
    quarter = [rss for _, p, rss in d.samples if p >= 0.25 * total]
    assert len(quarter) >= 3, f"too few metric samples to judge memory: {d.samples}"
    return max(quarter) / quarter[0]


def _stored(daemons: list[Daemon]) -> Counter:
    return Counter(r["url"] for d in daemons for r in read_index(d.out))


def _scale(tmp: Path, redis_url: str, pages: int, hosts: int, memory_ratio: float, timeout: float,
           both_work: bool = True) -> dict:
    """``both_work``: each of the two daemons must have stored pages. On the small web the
    first daemon up can crawl all of it while the second is still starting on a loaded box,
    so there only the split's correctness is asserted (that two daemons share the work is
    ``frontier/test_redis_frontier.py``'s, on pages slow enough for both to be up)."""
    with LocalSites(make_site(pages, hosts)) as site:
        seeds = [site.url(f"h{i}", "/p0") for i in range(hosts)]
        expected = {site.url(f"h{i}", f"/p{k}") for i in range(hosts) for k in range(pages // hosts)}
        bare = run_bare(seeds, len(expected))
        one = [_start(tmp, "one", seeds, pages)]
        one_s = _run(one, timeout)
        two = [_start(tmp, f"two{n}", seeds, pages, redis_url=redis_url, redis_key="scale") for n in range(2)]
        two_s = _run(two, timeout)
    for run in (one, two):
        stored = _stored(run)
        assert set(stored) == expected and max(stored.values()) == 1, "a page was lost or stored twice"
    per_daemon = [sum(_stored([d]).values()) for d in two]
    assert all(per_daemon) or not both_work, f"one of the two daemons did no work: {per_daemon}"
    growth = [_memory_growth(d, len(_stored([d]))) for d in one + two if _stored([d])]
    result = {"pages": len(expected), "hosts": hosts, "bare_pages_per_s": bare["pages"] / bare["elapsed_s"],
              "one_daemon_pages_per_s": len(expected) / one_s, "two_daemons_pages_per_s": len(expected) / two_s,
              "two_daemons_pages_each": per_daemon, "memory_growth": growth,
              "peak_rss_mb": [max((r for *_, r in d.samples), default=0) / 2**20 for d in one + two]}
    print(json.dumps(result))  # the figures, in the test log
    assert max(growth) <= memory_ratio, result
    # The rates are figures for the log, not assertions: the bare run and the daemons run at
    # different moments of a shared box's load, so their ratio says as much about the
    # neighbours as about the crawler (`afm bench crawler` measures it side by side).
    return result


def test_small_loopback_web_one_then_two_daemons(tmp_path: Path, redis_url: str) -> None:
    _scale(tmp_path, redis_url, pages=600, hosts=12, memory_ratio=1.5, timeout=300, both_work=False)


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)  # three crawls of 100,000 pages (the fast tier's 15-min limit is too short)
def test_full_loopback_web_100k_pages_500_hosts(tmp_path: Path, redis_url: str) -> None:
    _scale(tmp_path, redis_url, pages=100_000, hosts=500, memory_ratio=1.25, timeout=4 * 3600)
