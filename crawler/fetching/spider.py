"""The crawler's Scrapy spider: scheduling rules, page handling, WARC records, outcomes.

Every URL goes through :meth:`AfmSpider.schedule` - clean, depth, trap rules, de-dup,
budgets, cached robots.txt - and is logged to the durable frontier before Scrapy sees
it. Every response is stored (unless ``noindex``) and every failure recorded as an
outcome, so the crawl's files account for every URL it scheduled.

Every stored page carries its training-use decision (:mod:`afm.consent.training`) as
WARC fields ``AFM-Training-Use`` (``allowed`` / ``optout``) and ``AFM-Training-Evidence``
(JSON: each opt-out signal, where it was found, the rule or value, the fetch time), and
in the index's ``training_use`` / ``training_evidence`` columns. Opted-out pages are
still stored (crawling was allowed); ``afm curate``'s ``optout`` stage drops them.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, StopDownload
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import IGNORED_EXTENSIONS
from twisted.internet.error import DNSLookupError
from twisted.python.failure import Failure

from afm.consent.directives import is_html, meta_tags, page_signals
from afm.consent.directives import robots_directives as parse
from afm.crawler.config import CrawlConfig
from afm.crawler.fetching.components import connect_signals, crawl_config, on
from afm.crawler.fetching.middlewares import RobotsDenied
from afm.crawler.fetching.netguard import PrivateAddressRefused
from afm.crawler.frontier.state import CrawlState
from afm.crawler.frontier.urls import clean_url, host_key, trap_reason
from afm.crawler.storage.warc import TRAINING_EVIDENCE_HEADER, TRAINING_USE_HEADER, WarcStore

_IGNORED_EXT = tuple("." + e for e in IGNORED_EXTENSIONS)


def read_seeds(items: list[str]) -> list[str]:
    """URLs given directly or in files (one URL a line, ``#`` comments)."""
    out: list[str] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            out.append(item)
            continue
        path = Path(item)
        if not path.is_file():
            raise FileNotFoundError(f"seed is neither a URL nor a file: {item}")
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


def robots_directives(values: list[str], agent: str) -> set[str]:
    """``noindex``/``nofollow`` from X-Robots-Tag or meta robots values for ``agent``
    (the crawl's own directives; the training-use ones, ``noai``, are read by
    :mod:`afm.consent.directives` for both tokens). A value may be scoped (``afmbot:
    noindex``); unscoped values apply to every agent. ``none`` means both."""

    return parse(values, agent) & {"noindex", "nofollow"}


class AfmSpider(Spider):
    name = "afm"

    def __init__(self, cfg: CrawlConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cfg = cfg
        self.state: Any = None  # CrawlState: the frontier (local) or the taken-log (Redis)
        self.shared = bool(cfg.redis_url)  # frontier + de-dup live in Redis
        self.store: Any = None
        self.policy = cfg.training_policy()
        self._budget_scheduled = 0
        self._host_counts: dict[str, int] = {}
        self._denied: set[str] = set()
        self._idle_since: float | None = None
        self._poller: Any = None
        self._last_activity = time.monotonic()

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> AfmSpider:
        spider = super().from_crawler(crawler, *args, cfg=crawl_config(crawler), **kwargs)
        connect_signals(crawler, spider)
        return spider

    # ---- lifecycle ------------------------------------------------------------------------
    @on(signals.spider_opened)
    def opened(self, spider: Spider) -> None:
        out = Path(self.cfg.out_dir)
        self.store = WarcStore(out, prefix=self.cfg.warc_prefix, max_bytes=self.cfg.warc_max_bytes)
        recovered = self.store.recover()
        stats = self.crawler.stats
        stats.set_value("afm/recovered_dropped_open_files", recovered["dropped_open_files"])
        # Local: state/frontier.jsonl is every URL scheduled. Redis: it is every request
        # this daemon took off the shared queue (DurableRedisScheduler); either way
        # "logged but not done" is what a crash lost and a restart must fetch again.
        self.state = CrawlState(out)
        if not self.shared:
            self._budget_scheduled = self.state.scheduled
        stats.set_value("afm/resumed_pending", len(self.state.pending))
        if self.cfg.daemon and self.cfg.inbox and self.cfg.poll_seconds > 0:
            from twisted.internet import task

            self._poller = task.LoopingCall(self.poll_inbox)
            self._poller.start(self.cfg.poll_seconds, now=False)

    @on(signals.spider_closed)
    def closed_(self, spider: Spider, reason: str) -> None:
        if self._poller is not None and self._poller.running:
            self._poller.stop()
        if self.store is not None:
            self.store.close()
        if self.state is not None:
            self.state.close()
        self.crawler.stats.set_value("afm/close_reason", reason)

    async def start(self) -> AsyncIterator[Any]:
        if self.state is not None:
            for url, depth in self.state.pending:
                yield self._request(url, depth, dont_filter=self.shared)
                if self.shared:  # back on the shared queue: whoever takes it logs it
                    self.state.finish(url, "requeued")
        for url in read_seeds(self.cfg.seeds):
            request = self.schedule(url, 0)
            if request is not None:
                yield request

    @on(signals.spider_idle)
    def idle(self, spider: Spider) -> None:
        """Daemon: pick up seed files from the inbox; stay open unless idle too long."""
        if not self.cfg.daemon:
            return
        now = time.monotonic()
        if self.poll_inbox():
            self._idle_since = None
            raise DontCloseSpider
        if self._idle_since is None or self._last_activity > self._idle_since:
            self._idle_since = now
        if self.cfg.idle_exit_seconds and now - self._idle_since >= self.cfg.idle_exit_seconds:
            return
        raise DontCloseSpider

    def poll_inbox(self) -> int:
        if not self.cfg.inbox:
            return 0
        inbox = Path(self.cfg.inbox)
        if not inbox.is_dir():
            return 0
        added = 0
        done_dir = inbox / "done"
        for path in sorted(inbox.glob("*.txt")):
            try:
                urls = read_seeds([str(path)])
            except (OSError, UnicodeDecodeError) as exc:
                self.logger.warning("unreadable seed file %s: %s", path, exc)
                urls = []
            for url in urls:
                request = self.schedule(url, 0)
                if request is not None:
                    self.crawler.engine.crawl(request)
                    added += 1
            done_dir.mkdir(exist_ok=True)
            path.replace(done_dir / path.name)
        return added

    # ---- scheduling -------------------------------------------------------------------------
    def schedule(self, url: str, depth: int) -> Request | None:
        """A request for ``url`` if every rule allows it, else None (counted by reason)."""
        stats = self.crawler.stats
        cfg = self.cfg
        try:
            url = clean_url(url)
        except Exception:  # noqa: BLE001 - malformed link on a page
            stats.inc_value("afm/skipped/bad_url")
            return None
        if not url.startswith(("http://", "https://")):
            stats.inc_value("afm/skipped/scheme")
            return None
        if depth > cfg.max_depth:
            stats.inc_value("afm/skipped/depth")
            return None
        reason = trap_reason(
            url,
            max_length=cfg.max_url_length,
            max_repeated_segments=cfg.max_repeated_segments,
            max_path_segments=cfg.max_path_segments,
            max_calendar_depth=cfg.max_calendar_depth,
        )
        if reason:
            stats.inc_value(f"afm/skipped/trap_{reason}")
            return None
        if not self.shared and self.state.is_seen(url):
            stats.inc_value("afm/skipped/duplicate")
            return None
        if url in self._denied:
            return None
        if self._budget_scheduled >= cfg.max_pages:
            stats.inc_value("afm/skipped/budget")
            return None
        host = host_key(url)
        host_count = self._host_counts.get(host, 0) if self.shared else self.state.host_counts[host]
        if host_count >= cfg.per_host_budget:
            stats.inc_value("afm/skipped/host_budget")
            return None
        robots = getattr(self.crawler, "afm_robots", None)
        if robots is not None and robots.cached_decision(url) is False:
            self._denied.add(url)
            stats.inc_value("afm/robots_denied")
            return None
        if self.shared:
            self._host_counts[host] = host_count + 1
        else:
            self.state.add(url, depth)
        self._budget_scheduled += 1
        self._last_activity = time.monotonic()
        stats.inc_value("afm/scheduled")
        return self._request(url, depth)

    def refund_duplicate(self, url: str) -> None:
        """A URL scheduled here that the shared frontier already had (Redis's duplicate
        filter): its place in the budgets is given back, and it counts as a duplicate."""
        self._budget_scheduled = max(0, self._budget_scheduled - 1)
        host = host_key(url)
        if self._host_counts.get(host, 0) > 0:
            self._host_counts[host] -= 1
        stats = self.crawler.stats
        stats.inc_value("afm/scheduled", -1)
        stats.inc_value("afm/skipped/duplicate")

    def _request(self, url: str, depth: int, dont_filter: bool = False) -> Request:
        return Request(
            url,
            callback=self.parse,
            errback=self.on_error,
            meta={"depth": depth, "afm_url": url},
            # Local: ours de-dups by canonical URL and this catches redirect targets.
            # Redis: the shared filter is the de-dup (re-queued requests bypass it).
            dont_filter=dont_filter,
        )

    def add_sitemaps(self, urls: list[str]) -> None:
        """Sitemap: lines of robots.txt become requests whose links are seeds."""
        for url in urls:
            request = self.schedule(url, 0)
            if request is not None:
                request.meta["afm_sitemap"] = True
                self.crawler.engine.crawl(request)

    # ---- responses ------------------------------------------------------------------------------
    def parse(self, response: Response) -> Iterator[Request]:
        """Store the page (unless noindex) and follow its links (unless nofollow).

        Order matters for crash safety: the page's links are scheduled (logged to the
        frontier, or pushed to the shared Redis queue) *before* its record is written,
        so a page can never be "done" while its links are known only to this process.
        """
        self._last_activity = time.monotonic()
        stats = self.crawler.stats
        request_url = response.meta.get("afm_url", response.url)
        header_values = [v.decode("latin-1") for v in response.headers.getlist(b"X-Robots-Tag")]
        is_html = _is_html(response) and isinstance(response, TextResponse)  # links need text
        if is_html:
            header_values += _meta_robots(response, self.cfg.user_agent)
        directives = robots_directives(header_values, self.cfg.user_agent)
        requests = list(self._follow(response, directives, is_html))
        if self.shared:
            for request in requests:
                self.crawler.engine.crawl(request)  # on the shared queue now
            requests = []
        if "noindex" in directives:
            stats.inc_value("afm/noindex")
            self.state.finish(request_url, "noindex")
        else:
            self._store(response, request_url)
        yield from requests

    def _follow(self, response: Response, directives: set[str], is_html: bool) -> Iterator[Request]:
        if response.meta.get("afm_sitemap"):
            yield from self._sitemap_links(response)
            return
        if not (self.cfg.follow_links and is_html and "nofollow" not in directives):
            if "nofollow" in directives:
                self.crawler.stats.inc_value("afm/nofollow")
            return
        if response.status >= 400:
            return
        depth = int(response.meta.get("depth", 0))
        own_host = host_key(response.url)
        for link in _links(response):
            if self.cfg.same_host_only and host_key(link) != own_host:
                continue
            request = self.schedule(link, depth + 1)
            if request is not None:
                yield request

    def _training_headers(self, response: Response, headers: list[tuple[str, str]],
                          request_url: str, fetched_at: dt.datetime) -> dict[str, str]:
        """The page's training-use decision as WARC fields (see the module docstring)."""
        import json


        robots = getattr(self.crawler, "afm_robots", None)
        rules = robots_file = tdm = tdm_file = None
        if robots is not None:
            rules, robots_file, tdm, tdm_file = robots.host_files(response.url)
        signals = page_signals(headers, response.body, _is_html(response), self.policy.agents)
        decision = self.policy.decide(response.url, signals=signals, fetched_at=fetched_at,
                                      robots=rules, robots_file=robots_file, tdm=tdm,
                                      tdm_file=tdm_file)
        self.crawler.stats.inc_value(f"afm/training/{decision.use}")
        out = {TRAINING_USE_HEADER: decision.use}
        if decision.optout:
            out[TRAINING_EVIDENCE_HEADER] = json.dumps(decision.evidence, sort_keys=True)
        return out

    def _store(self, response: Response, request_url: str) -> None:
        fetched_at = dt.datetime.now(dt.UTC)
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, values in response.headers.items()
            for v in values
        ]
        request_headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, values in response.request.headers.items()
            for v in values
        ] if response.request is not None else []
        self.store.write(
            response.url,
            response.status,
            headers,
            response.body,
            request_url=request_url,
            request_headers=request_headers,
            fetched_at=fetched_at,
            warc_headers=self._training_headers(response, headers, request_url, fetched_at),
        )
        stats = self.crawler.stats
        stats.inc_value("afm/pages")
        stats.inc_value("afm/bytes", len(response.body))
        stats.inc_value(f"afm/status/{response.status}")
        stats.set_value("afm/warc_files", len(self.store.closed_files))

    def _sitemap_links(self, response: Response) -> Iterator[Request]:
        from scrapy.utils.gz import gunzip
        from scrapy.utils.sitemap import Sitemap

        body = response.body
        if body[:2] == b"\x1f\x8b":
            try:
                body = gunzip(body, max_size=self.cfg.max_response_bytes)
            except Exception:  # noqa: BLE001 - a broken sitemap is just skipped
                self.crawler.stats.inc_value("afm/sitemap_errors")
                return
        try:
            sitemap = Sitemap(body)
        except Exception:  # noqa: BLE001
            self.crawler.stats.inc_value("afm/sitemap_errors")
            return
        for entry in sitemap:
            loc = entry.get("loc")
            if not loc:
                continue
            if sitemap.type == "sitemapindex":
                self.add_sitemaps([loc])
            else:
                request = self.schedule(loc, 0)
                if request is not None:
                    yield request

    # ---- failures ----------------------------------------------------------------------------------
    def on_error(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        if request is None:
            return
        kind = classify_failure(failure, request)
        self.crawler.stats.inc_value(f"afm/outcome/{kind}")
        if kind.startswith("error_"):
            self.logger.warning("%s failed: %s", request.url, failure.getTraceback())
        if self.state is not None:  # None only if the spider failed to open
            self.state.finish(request.meta.get("afm_url", request.url), kind, str(failure.value)[:300])


def classify_failure(failure: Failure, request: Request) -> str:
    """A short, stable name for why a request produced no page."""
    exc = failure.value
    message = str(exc)
    if isinstance(exc, RobotsDenied):
        return "robots_denied"
    if isinstance(exc, PrivateAddressRefused) or (
        isinstance(exc, DNSLookupError) and "private address" in message
    ):
        return "private_address"
    refused = request.meta.get("afm_refused", "")
    if isinstance(exc, StopDownload) or refused:
        return "refused_" + (refused.split()[0] if refused else "stopped")
    if isinstance(exc, IgnoreRequest) and "decompression" in message:
        return "refused_decompression_bomb"
    if "max size" in message or "DOWNLOAD_MAXSIZE" in message:
        return "refused_oversize"
    if "Timeout" in type(exc).__name__ or "timed out" in message.lower():
        return "timeout"
    if isinstance(exc, DNSLookupError):
        return "dns_error"
    if isinstance(exc, IgnoreRequest):
        return "ignored"
    return "error_" + type(exc).__name__


def _is_html(response: Response) -> bool:
    """:func:`afm.consent.directives.is_html` (the rule curate reads stored pages by):
    the Content-Type, or with none the MIME Sniffing standard's HTML rule."""
    ctype = response.headers.get(b"Content-Type")
    return is_html(ctype.decode("latin-1") if ctype else None, response.body)


def _meta_robots(response: TextResponse, agent: str) -> list[str]:
    """The contents of meta robots (or meta named after ``agent``), found by consent's one
    meta-tag scanner (:func:`afm.consent.directives.meta_tags`), as curate finds them."""
    return [content for name, content in meta_tags(response.body) if name in ("robots", agent.lower())]


def _links(response: TextResponse) -> Iterator[str]:
    for anchor in response.xpath("//a[@href]"):
        rel = (anchor.attrib.get("rel") or "").lower()
        if "nofollow" in rel.split():
            continue
        href = anchor.attrib.get("href", "").strip()
        if not href or href.startswith(("#", "javascript:", "mailto:", "tel:", "data:")):
            continue
        try:
            url = response.urljoin(href)
        except ValueError:
            continue
        if url.lower().split("?", 1)[0].endswith(_IGNORED_EXT):
            continue
        yield url
