"""``afm fetch`` on a loopback web: the mixed web the tests and the benchmark share, and
``afm bench fetch``: pages/s per core of ``afm fetch`` (the local runner) next to ``afm
crawl`` and a bare Scrapy spider fetching the same URL list in the same run.

The mixed web (:func:`mixed_web`): host ``i`` is of kind ``KINDS[i % len(KINDS)]``:
plain, part disallowed, Crawl-delay, opted out of training by each signal the crawler
reads (``noai`` header and meta, TDMRep file / header / meta, a training token's robots.txt
group, Content-Signal in robots.txt and as a field, Content-Usage in robots.txt and as a
field), slow pages, failing pages (500, 404), redirects (same host and to another host),
robots.txt 503 (nothing may be fetched), robots.txt 404 (everything may), robots.txt
behind redirects, and noindex pages. Pages are built on request (a 20,000-page web is no
20,000-entry dict).

The benchmark's web is the crawler benchmark's (``plain`` hosts, permissive robots.txt);
every fetcher gets the URL list of every page (no link following), the same concurrency
per host and no delays, so what is measured is each fetcher's cost per page: pages / CPU
seconds of its processes (its cores' worth of work), with the wall-clock rate beside it.
Goal (issue 53): ``afm fetch`` at least the crawler's pages per core.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison
from afm.crawler.testsite import LocalSites, Page

TEXT = {"Content-Type": "text/plain"}
KINDS = ("plain", "disallow", "delay", "noai_header", "noai_meta", "tdm_file", "tdm_header",
         "tdm_meta", "token_group", "signal_robots", "usage_robots", "usage_header",
         "signal_header", "slow", "failing", "redirect", "robots_503", "robots_404",
         "robots_hop", "noindex")
OPTED_OUT = {"noai_header", "noai_meta", "tdm_file", "tdm_header", "tdm_meta", "token_group",
             "signal_robots", "usage_robots", "usage_header", "signal_header"}


class MixedHost(Mapping):
    """The pages of one host of the mixed web (see the module docstring)."""

    def __init__(self, index: int, kind: str, pages: int, hosts: int, delay: float) -> None:
        self.index, self.kind, self.pages, self.hosts, self.delay = index, kind, pages, hosts, delay

    def robots(self) -> Page | None:
        k = self.kind
        rules = {"disallow": "User-agent: *\nDisallow: /private/\n",
                 "delay": f"User-agent: *\nCrawl-delay: {self.delay}\n",
                 "token_group": "User-agent: afmbot-extended\nDisallow: /\n\nUser-agent: *\nAllow: /\n",
                 "signal_robots": "User-agent: *\nContent-Signal: search=yes, ai-train=no\nAllow: /\n",
                 "usage_robots": "User-agent: *\nContent-Usage: train-ai=n\nAllow: /\n"}
        if k in rules:
            return Page(rules[k], headers=TEXT)
        if k == "robots_503":
            return Page("busy", status=503, headers=TEXT)
        if k == "robots_404":
            return None
        if k == "robots_hop":
            return Page("", status=301, headers={"Location": "/robots-moved.txt"})
        return Page("User-agent: *\nDisallow: /nothing-here\n", headers=TEXT)

    def page(self, i: int) -> Page:
        k = self.kind
        head, headers = "", [("Content-Type", "text/html; charset=utf-8")]
        if k == "noai_header":
            headers.append(("X-Robots-Tag", "noai"))
        elif k == "noai_meta":
            head = '<meta name="robots" content="noai">'
        elif k == "tdm_header":
            headers.append(("tdm-reservation", "1"))
        elif k == "tdm_meta":
            head = '<meta name="tdm-reservation" content="1">'
        elif k == "usage_header":
            headers.append(("Content-Usage", "train-ai=n"))
        elif k == "signal_header":
            headers.append(("Content-Signal", "ai-train=no"))
        elif k == "noindex" and i % 2 == 0:
            head = '<meta name="robots" content="noindex">'
        body = (f"<html><head><title>h{self.index} page {i}</title>{head}</head><body>"
                f"<h1>host {self.index} ({k}) page {i}</h1><p>{'words ' * 40}</p></body></html>")
        return Page(body, headers=headers, delay=0.2 if k == "slow" else 0.0)

    def __getitem__(self, path: str) -> Any:
        if path == "/robots.txt":
            got = self.robots()
            if got is None:
                raise KeyError(path)
            return got
        if path == "/robots-moved.txt" and self.kind == "robots_hop":
            return Page("User-agent: *\nDisallow: /p1\n", headers=TEXT)
        if path == "/.well-known/tdmrep.json" and self.kind == "tdm_file":
            return Page('[{"location": "/", "tdm-reservation": 1}]', headers={"Content-Type": "application/json"})
        name = path.split("?", 1)[0]
        for prefix in ("/private/p", "/final/p", "/p"):
            if name.startswith(prefix) and name[len(prefix):].isdigit():
                i = int(name[len(prefix):])
                if i >= self.pages:
                    raise KeyError(path)
                if self.kind == "failing" and prefix == "/p" and i % 3 == 1:
                    return Page("server error", status=500, headers=TEXT)
                if self.kind == "failing" and prefix == "/p" and i % 3 == 2:
                    return Page("gone", status=404, headers=TEXT)
                if self.kind == "redirect" and prefix == "/p" and i % 2 == 1:
                    if i % 4 == 1:
                        return Page("", status=301, headers={"Location": f"/final/p{i}"})
                    # to a page of the plain host of this block of KINDS, not itself listed
                    target = f"h{self.index // len(KINDS) * len(KINDS)}"
                    return lambda _path, _headers: Page("", status=302, headers={
                        "Location": f"{SITE_OF[0].base_url(target)}/final/p{i}"})
                return self.page(i)
        raise KeyError(path)

    def urls(self) -> Iterator[str]:
        for i in range(self.pages):
            yield f"/private/p{i}" if self.kind == "disallow" and i % 2 else f"/p{i}"

    def __iter__(self) -> Iterator[str]:
        yield "/robots.txt"
        yield from self.urls()

    def __len__(self) -> int:
        return self.pages + 1


SITE_OF: list[LocalSites] = []  # the running site, for redirects to other hosts


def mixed_web(hosts: int, pages: int, delay: float = 0.5) -> dict[str, MixedHost]:
    """``hosts`` hosts (``h0`` ...) of ``pages`` pages each (see the module docstring)."""
    return {f"h{i}": MixedHost(i, KINDS[i % len(KINDS)], pages, hosts, delay) for i in range(hosts)}


def web_urls(site: LocalSites, web: dict[str, MixedHost]) -> list[str]:
    """The URL list of the mixed web: every page of every host."""
    return [site.url(name, path) for name, host in web.items() for path in host.urls()]


def serve(web: dict[str, MixedHost]) -> LocalSites:
    """The mixed web, started (redirects to other hosts need the running site)."""
    site = LocalSites(web)
    SITE_OF.clear()
    SITE_OF.append(site)
    site.start()
    return site


# ------------------------------------------------------------------------------ the benchmark


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_fetch_process(url_file: Path, out: Path, settings: dict[str, Any], workers: int = 1) -> dict[str, Any]:
    """``afm fetch`` in its own process (the local runner, ``workers`` processes): its
    summary plus the CPU seconds of the process and its workers."""
    sets = [a for k, v in settings.items() for a in ("--set", f"{k}={json.dumps(v)}")]
    mode = "in_memory" if workers == 1 else "multi_processing"
    before = _children_cpu()
    proc = subprocess.run([sys.executable, "-m", "afm.app", "fetch", "--urls", str(url_file), "--output",
                           str(out), "--allow-private", *sets, f"--direct_num_workers={workers}",
                           f"--direct_running_mode={mode}", "--worker-logs", "terminal"],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    cpu = _children_cpu() - before
    if proc.returncode != 0:
        raise RuntimeError(f"afm fetch failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {**summary, "process_cpu_s": cpu}


def run_crawl_process(url_file: Path, out: Path, config: dict[str, Any]) -> dict[str, Any]:
    """``afm crawl`` over the same list (no link following) in its own process."""
    from afm.crawler.api import crawl

    before = _children_cpu()
    summary = crawl([str(url_file)], out, allow_private=True, config=config,
                    max_pages=config.pop("max_pages", 10**9))
    return {**summary, "process_cpu_s": _children_cpu() - before}


def run_bare_process(urls: list[str], concurrency: int, per_host: int) -> dict[str, Any]:
    """A bare Scrapy spider requesting every URL of the list, no more."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"urls": urls, "concurrency": concurrency, "per_host": per_host}, fh)
    before = _children_cpu()
    proc = subprocess.run([sys.executable, "-m", "afm.app.bench.crawler.fetch", fh.name],
                          capture_output=True, text=True)
    cpu = _children_cpu() - before
    Path(fh.name).unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"bare spider failed:\n{proc.stderr[-3000:]}")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "process_cpu_s": cpu}


def _bare_main(config_path: str) -> None:
    import scrapy
    from scrapy.crawler import CrawlerProcess

    cfg = json.loads(Path(config_path).read_text())

    class ListSpider(scrapy.Spider):
        name = "list"

        async def start(self):
            for url in cfg["urls"]:
                yield scrapy.Request(url, callback=self.parse)

        def parse(self, response):
            return None

    process = CrawlerProcess({"CONCURRENT_REQUESTS": cfg["concurrency"],
                              "CONCURRENT_REQUESTS_PER_DOMAIN": cfg["per_host"],
                              "ROBOTSTXT_OBEY": False, "LOG_LEVEL": "ERROR",
                              "TELNETCONSOLE_ENABLED": False})
    crawler = process.create_crawler(ListSpider)
    start = time.monotonic()
    process.crawl(crawler)
    process.start()
    print(json.dumps({"pages": crawler.stats.get_value("response_received_count", 0),
                      "elapsed_s": time.monotonic() - start}))


CONCURRENCY, PER_HOST = 64, 4


def fetch_throughput(opts: BenchOptions) -> list[Comparison]:
    """See the module docstring."""
    from afm.app.bench.crawler.crawl import make_site

    pages, hosts = (1000, 10) if opts.quick else (10_000, 50)
    work = Path(opts.workdir) / "fetch"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with LocalSites(make_site(pages, hosts)) as site:
        urls = [site.url(f"h{i}", f"/p{k}") for i in range(hosts) for k in range(pages // hosts)]
        url_file = work / "urls.txt"
        url_file.write_text("\n".join(urls) + "\n")
        fetched = run_fetch_process(url_file, work / "fetch", {
            "host_interval": 0, "per_host_concurrency": PER_HOST, "concurrent_requests": CONCURRENCY,
            "slice_urls": 100_000, "retry_times": 0})
        crawled = run_crawl_process(url_file, work / "crawl", {
            "concurrent_requests": CONCURRENCY, "per_host_concurrency": PER_HOST, "autothrottle": False,
            "follow_links": False, "progress_seconds": 0, "retry_times": 0, "max_pages": len(urls),
            "per_host_budget": len(urls)})
        bare = run_bare_process(urls, CONCURRENCY, PER_HOST)
    rows = {"afm fetch": fetched, "afm crawl": crawled, "bare Scrapy": bare}
    per_core = {k: v["pages"] / max(v["process_cpu_s"], 1e-9) for k, v in rows.items()}
    wall = {k: v["pages"] / max(v["elapsed_s"], 1e-9) for k, v in rows.items()}
    print(json.dumps({"load": os.getloadavg(), **{k: {"pages": v["pages"], "cpu_s": round(v["process_cpu_s"], 2),
                                                      "elapsed_s": v["elapsed_s"]} for k, v in rows.items()}}))
    return [
        Comparison(f"pages per CPU-second, {len(urls):,} URLs on {hosts} hosts", per_core["afm fetch"],
                   per_core["afm crawl"], "afm crawl (same list)", "pages/s/core", ">= 1x"),
        Comparison("pages per CPU-second vs a bare Scrapy spider", per_core["afm fetch"],
                   per_core["bare Scrapy"], "bare Scrapy spider", "pages/s/core", ""),
        Comparison("pages/s (wall clock, Beam start-up included)", wall["afm fetch"], wall["afm crawl"],
                   "afm crawl (same list)", "pages/s", ""),
        Comparison("pages fetched", float(fetched["pages"]), float(crawled["pages"]), "afm crawl", "pages", "all"),
    ]


BENCHMARKS = {"fetch": fetch_throughput}


if __name__ == "__main__":
    _bare_main(sys.argv[1])
