"""Crawler throughput: afm's crawler vs a bare Scrapy spider on one local site, same run.

The site: ``pages`` pages over ``hosts`` loopback hosts (10,000 / 50; ``--quick``:
1,000 / 10), each page linking to five pages of its host and one of another host, each
host serving a permissive robots.txt. Both crawlers get the same concurrency (32 in
total, 4 per host, no delays, no AutoThrottle) and each runs in its own process; the
figure is pages fetched / seconds of crawling (interpreter start excluded). Ours also
checks robots.txt, canonicalises and logs its frontier, and writes WARC + index; the
bare spider only follows links. Goal (issue 3): at least 0.8x of bare Scrapy.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from afm.app.bench.common import BenchOptions, Comparison
from afm.crawler.testsite import LocalSites, Page

CONCURRENCY = 32
PER_HOST = 4
_ROBOTS = Page("User-agent: *\nDisallow: /nothing-here\n", headers={"Content-Type": "text/plain"})


class GeneratedHost(Mapping):
    """Pages ``/p0`` ... ``/p{n-1}`` of one host, built on request (no 10k dict up front)."""

    def __init__(self, index: int, hosts: int, per_host: int) -> None:
        self.index, self.hosts, self.per_host = index, hosts, per_host

    def _page(self, i: int) -> Page:
        links = [f'<a href="/p{(i * 7 + k) % self.per_host}">same {k}</a>' for k in range(1, 6)]
        other = (self.index + 1 + i) % self.hosts
        links.append(f'<a href="{{{{host:h{other}}}}}/p{i}">other</a>')
        return Page(f"<html><body><h1>h{self.index} page {i}</h1><p>{'text ' * 60}</p>"
                    + " ".join(links) + "</body></html>")

    def __getitem__(self, path: str) -> Page:
        if path == "/robots.txt":
            return _ROBOTS
        if path.startswith("/p") and path[2:].isdigit() and int(path[2:]) < self.per_host:
            return self._page(int(path[2:]))
        raise KeyError(path)

    def __iter__(self) -> Iterator[str]:
        yield "/robots.txt"
        for i in range(self.per_host):
            yield f"/p{i}"

    def __len__(self) -> int:
        return self.per_host + 1


def make_site(pages: int, hosts: int) -> dict[str, Mapping]:
    per_host = pages // hosts
    return {f"h{i}": GeneratedHost(i, hosts, per_host) for i in range(hosts)}


def _seeds(site: LocalSites, hosts: int) -> list[str]:
    return [site.url(f"h{i}", "/p0") for i in range(hosts)]


def run_bare(seeds: list[str], max_pages: int) -> dict:
    """A bare Scrapy spider that follows every link (run in a child process)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"seeds": seeds, "max_pages": max_pages}, fh)
    proc = subprocess.run([sys.executable, "-m", "afm.app.bench.crawler.crawl", fh.name],
                          capture_output=True, text=True)
    Path(fh.name).unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"bare spider failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _bare_main(config_path: str) -> None:
    import scrapy
    from scrapy.crawler import CrawlerProcess

    cfg = json.loads(Path(config_path).read_text())

    class BareSpider(scrapy.Spider):
        name = "bare"
        start_urls = cfg["seeds"]

        def parse(self, response):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse)

    process = CrawlerProcess({
        "CONCURRENT_REQUESTS": CONCURRENCY,
        "CONCURRENT_REQUESTS_PER_DOMAIN": PER_HOST,
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "ERROR",
        "TELNETCONSOLE_ENABLED": False,
        "CLOSESPIDER_PAGECOUNT": cfg["max_pages"],
    })
    crawler = process.create_crawler(BareSpider)
    start = time.monotonic()
    process.crawl(crawler)
    process.start()
    elapsed = time.monotonic() - start
    pages = crawler.stats.get_value("response_received_count", 0)
    print(json.dumps({"pages": pages, "elapsed_s": elapsed}))


def crawler_throughput(opts: BenchOptions) -> list[Comparison]:
    from afm.crawler.api import crawl

    pages, hosts = (1000, 10) if opts.quick else (10_000, 50)
    work = Path(opts.workdir) / "crawler"
    shutil.rmtree(work, ignore_errors=True)
    with LocalSites(make_site(pages, hosts)) as site:
        seeds = _seeds(site, hosts)
        bare = run_bare(seeds, pages)
        ours = crawl(seeds, work / "out", max_pages=pages, allow_private=True, config={
            "concurrent_requests": CONCURRENCY,
            "per_host_concurrency": PER_HOST,
            "autothrottle": False,
            "progress_seconds": 0,
            "max_depth": 10_000,
        })
    ours_rate = ours["pages"] / max(ours["elapsed_s"], 1e-9)
    bare_rate = bare["pages"] / max(bare["elapsed_s"], 1e-9)
    return [
        Comparison(f"pages/s, {pages:,} pages on {hosts} hosts (robots + WARC)", ours_rate,
                   bare_rate, "bare Scrapy spider", "pages/s", ">= 0.8x"),
        Comparison("pages fetched", float(ours["pages"]), float(bare["pages"]), "bare Scrapy spider",
                   "pages", "all"),
    ]


BENCHMARKS = {"crawler": crawler_throughput}


if __name__ == "__main__":
    _bare_main(sys.argv[1])
