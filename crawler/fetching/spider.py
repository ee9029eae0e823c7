"""The crawler's Scrapy spider: scheduling rules, page handling, WARC records, outcomes.

Every URL goes through :meth:`AfmSpider.schedule` - clean, depth, trap rules, de-dup,
budgets, cached robots.txt - and is logged to the durable frontier before Scrapy sees
it. Every response is stored (unless ``noindex``) and every failure recorded as an
outcome, so the crawl's files account for every URL it scheduled. A failure that may pass
is tried again after a backoff, then recorded with its reason and tried again on the next
run or when seeded again (:mod:`afm.crawler.fetching.retry`).

Every stored page carries its training-use decision (:mod:`afm.consent.training`) as
WARC fields ``AFM-Training-Use`` (``allowed`` / ``optout``) and ``AFM-Training-Evidence``
(JSON: each opt-out signal, where it was found, the rule or value, the fetch time), and
in the index's ``training_use`` / ``training_evidence`` columns. Opted-out pages are
still stored (crawling was allowed); ``afm curate``'s ``optout`` stage drops them.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, StopDownload
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import IGNORED_EXTENSIONS
from twisted.internet.error import DNSLookupError
from twisted.python.failure import Failure

from afm.consent.directives import robots_directives as parse
from afm.crawler.config import CrawlConfig
from afm.crawler.fetching.components import connect_signals, crawl_config, on
from afm.crawler.fetching.middlewares import RobotsDenied
from afm.crawler.fetching.netguard import PrivateAddressRefused
from afm.crawler.fetching.retry import PRIVATE_ADDRESS, ROBOTS_UNAVAILABLE, RetryPolicy, is_failure
from afm.crawler.frontier.seeds import read_seeds
from afm.crawler.frontier.state import CrawlState
from afm.crawler.frontier.urls import clean_url, host_key, trap_reason
from afm.crawler.rules.outcomes import refused
from afm.crawler.rules.pages import OWN_DIRECTIVES, own_directives, page_is_html, training_fields
from afm.crawler.storage.warc import WarcStore

_IGNORED_EXT = tuple("." + e for e in IGNORED_EXTENSIONS)
FAILURES_LOGGED_PER_KIND = 5  # failures of one kind said in the log; the rest are counted


def robots_directives(values: list[str], agent: str) -> set[str]:
    """``noindex``/``nofollow`` from X-Robots-Tag or meta robots values for ``agent``
    (the crawl's own directives; the training-use ones, ``noai``, are read by
    :mod:`afm.consent.directives` for both tokens). A value may be scoped (``afmbot:
    noindex``); unscoped values apply to every agent. ``none`` means both."""

    return parse(values, agent) & OWN_DIRECTIVES


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
        self.retry: Any = None  # RetryPolicy, once the crawler's settings are known
        self._retries: set[Any] = set()  # DelayedCalls of requests waiting to be tried again
        self._failures_logged: dict[str, int] = {}  # failures said in the log, by kind
        self.stopping = False  # SIGTERM: nothing new is scheduled, nothing cancelled is recorded
        # The last fetches' results, newest last: (ok, kind) - what /healthz judges by.
        self.recent: deque[tuple[bool, str]] = deque(maxlen=max(1, cfg.health_recent_fetches))
        self.last_fetch_at: float | None = None  # monotonic time of the last fetch that ended

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> AfmSpider:
        spider = super().from_crawler(crawler, *args, cfg=crawl_config(crawler), **kwargs)
        spider.retry = RetryPolicy(spider.cfg, crawler.settings)
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
        self.state = CrawlState(out, requeue=self.retry.requeue_on_start, is_failure=is_failure)
        if not self.shared:
            self._budget_scheduled = self.state.scheduled
        stats.set_value("afm/resumed_pending", len(self.state.pending))
        if self.state.requeued:
            stats.set_value("afm/requeued_failed", sum(self.state.requeued.values()))
            self.logger.warning("fetching again %d URLs that failed last time for a reason that may have "
                                "passed: %s", sum(self.state.requeued.values()),
                                ", ".join(f"{k} {v}" for k, v in self.state.requeued.most_common()))
        if self.cfg.daemon and self.cfg.inbox and self.cfg.poll_seconds > 0:
            from twisted.internet import task

            self._poller = task.LoopingCall(self.poll_inbox)
            self._poller.start(self.cfg.poll_seconds, now=False)

    def begin_stop(self) -> None:
        """SIGTERM: schedule nothing more (inbox, retries); what is in flight is being
        cancelled (:mod:`afm.crawler.fetching.stopping`) and stays pending for the next run."""
        self.stopping = True
        if self._poller is not None and self._poller.running:
            self._poller.stop()
        for call in list(self._retries):
            if call.active():
                call.cancel()
        self._retries.clear()

    @on(signals.spider_closed)
    def closed_(self, spider: Spider, reason: str) -> None:
        self.begin_stop()
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
        seeds = Counter()
        for url in read_seeds(self.cfg.seeds):
            request = self.schedule(url, 0, seed=seeds)
            if request is not None:
                yield request
        self._log_seeds("--seeds", seeds)

    def _log_seeds(self, source: str, seeds: Counter) -> None:
        """One line per batch of seeds saying what became of them (a seed fetched before
        is not fetched again; one that failed is, and the line says so)."""
        if seeds["again"] or seeds["before"]:
            self.logger.warning("seeds from %s: %d new, %d failed before and queued again, %d already "
                                "queued, fetched or decided (not fetched twice)", source, seeds["new"], seeds["again"],
                                seeds["before"])

    @on(signals.spider_idle)
    def idle(self, spider: Spider) -> None:
        """Stay open while retries wait; a daemon: pick up seed files from the inbox,
        stay open unless idle too long."""
        if self._retries and not self.stopping:
            raise DontCloseSpider
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
            except (OSError, ValueError) as exc:  # unreadable, or not text
                self.logger.warning("unreadable seed file %s: %s", path, exc)
                urls = []
            seeds = Counter()
            for url in urls:
                request = self.schedule(url, 0, seed=seeds)
                if request is not None:
                    self.crawler.engine.crawl(request)
                    added += 1
            self._log_seeds(path.name, seeds)
            done_dir.mkdir(exist_ok=True)
            path.replace(done_dir / path.name)
        return added

    # ---- scheduling -------------------------------------------------------------------------
    def schedule(self, url: str, depth: int, seed: Counter | None = None) -> Request | None:
        """A request for ``url`` if every rule allows it, else None (counted by reason).
        ``seed``: ``url`` is a seed (counted there as new, again or before): a seed that
        failed before is queued again."""
        stats = self.crawler.stats
        if self.stopping:
            return None
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
        if seed is not None:
            again = self._seed_again(url)
            if again is not None:
                seed["again"] += 1
                return again
        if not self.shared and self.state.is_seen(url):
            stats.inc_value("afm/skipped/duplicate")
            if seed is not None:
                seed["before"] += 1
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
        if seed is not None:
            seed["new"] += 1
        return self._request(url, depth)

    def _seed_again(self, url: str) -> Request | None:
        """A request for a seed whose last fetch failed (this run or an earlier one)."""
        row = self.state.requeue(url, 0) if self.state is not None else None
        if row is None:
            return None
        self.logger.warning("seed %s failed before (%s: %s): fetching it again", url, row.get("o"),
                            row.get("m", "")[:200])
        if row.get("o") == ROBOTS_UNAVAILABLE:
            robots = getattr(self.crawler, "afm_robots", None)
            if robots is not None:
                robots.forget_unavailable(url)  # ask the host's robots.txt again
        self._denied.discard(url)
        self._last_activity = time.monotonic()
        self.crawler.stats.inc_value("afm/requeued_seeds")
        return self._request(url, 0, dont_filter=True)

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

    def _request(self, url: str, depth: int, dont_filter: bool = False, attempt: int = 0) -> Request:
        return Request(
            url,
            callback=self.parse,
            errback=self.on_error,
            # retries are the spider's (after a backoff, fetching.retry), not Scrapy's at once
            meta={"depth": depth, "afm_url": url, "afm_attempt": attempt, "dont_retry": True},
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
        if self.retry.transient_status(response.status) and not response.meta.get("afm_sitemap"):
            self._failed(response.request, request_url, f"http_{response.status}",
                         f"HTTP {response.status} from {response.url}", transient=True)
            return
        is_html = _is_html(response) and isinstance(response, TextResponse)  # links need text
        # afm.crawler.rules.pages: the batch fetcher (afm fetch) reads them the same way
        directives = own_directives(_headers(response), response.body, is_html, self.cfg.user_agent)
        requests = list(self._follow(response, directives, is_html))
        if self.shared:
            for request in requests:
                self.crawler.engine.crawl(request)  # on the shared queue now
            requests = []
        if "noindex" in directives:
            stats.inc_value("afm/noindex")
            self._fetch_ended(True, "noindex")
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
        """The page's training-use decision as WARC fields (see the module docstring):
        :func:`afm.crawler.rules.pages.training_fields`, as the batch fetcher decides."""
        robots = getattr(self.crawler, "afm_robots", None)
        rules = robots_file = tdm = tdm_file = None
        if robots is not None:
            rules, robots_file, tdm, tdm_file = robots.host_files(response.url)
        decision, fields = training_fields(self.policy, response.url, headers, response.body,
                                           _is_html(response), fetched_at, robots=rules,
                                           robots_file=robots_file, tdm=tdm, tdm_file=tdm_file)
        self.crawler.stats.inc_value(f"afm/training/{decision.use}")
        return fields

    def _store(self, response: Response, request_url: str) -> None:
        fetched_at = dt.datetime.now(dt.UTC)
        headers = _headers(response)
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
        self._fetch_ended(True, "page")
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
        if self.stopping:  # cancelled by SIGTERM: not finished, so the next run fetches it
            self.crawler.stats.inc_value("afm/cancelled_at_stop")
            return
        kind = classify_failure(failure, request)
        message = request.meta.get("afm_refused") or str(failure.value)
        if kind.startswith("error_"):
            self.logger.warning("%s failed: %s", request.url, failure.getTraceback())
        self._failed(request, request.meta.get("afm_url", request.url), kind, message,
                     transient=self.retry.transient_failure(failure.value, kind))

    def _failed(self, request: Request, url: str, kind: str, message: str, transient: bool) -> None:
        """A request that produced no page: tried again after a backoff when the reason may
        pass and tries are left, else recorded with its reason."""
        stats = self.crawler.stats
        attempt = int(request.meta.get("afm_attempt", 0))
        if transient and self.retry.retry_now(kind, attempt) and not self.stopping:
            stats.inc_value(f"afm/retries/{kind}")
            self._retry_later(request, attempt + 1, self.retry.backoff(attempt))
            return
        stats.inc_value(f"afm/outcome/{kind}")
        if is_failure(kind):
            if kind == PRIVATE_ADDRESS and not self.cfg.allow_private:
                message += " (allow_private: true, or --allow-private, fetches it)"
            stats.inc_value(f"afm/failed/{kind}")
            stats.set_value(f"afm/last_error/{kind}", {"url": url, "reason": message[:300], "at": time.time()})
            self._fetch_ended(False, kind)
            self._log_failure(url, kind, message, transient)
        if self.state is not None:  # None only if the spider failed to open
            self.state.finish(url, kind, message[:300], transient=transient)

    def _log_failure(self, url: str, kind: str, message: str, transient: bool) -> None:
        """The first failures of each kind said in the log as they happen, with the reason
        and what happens next (they were visible only in the state file and the summary);
        later ones of that kind are counted on /metrics and the stats line, not logged."""
        logged = self._failures_logged[kind] = self._failures_logged.get(kind, 0) + 1
        if logged > FAILURES_LOGGED_PER_KIND:
            return
        then = ("fetched again by the next run" if transient
                else "fetched by the next run that allows it" if kind == PRIVATE_ADDRESS
                else "fetched again if seeded again")
        more = (f"; further {kind} failures are only counted (/metrics, the stats line)"
                if logged == FAILURES_LOGGED_PER_KIND else "")
        self.logger.warning("not fetched: %s: %s: %s (%s)%s", url, kind, message[:300], then, more)

    def _retry_later(self, request: Request, attempt: int, delay: float) -> None:
        from twisted.internet import reactor

        def again() -> None:
            self._retries.discard(call)
            if not self.stopping:
                retry = request.replace(dont_filter=True)
                retry.meta["afm_attempt"] = attempt
                self.crawler.engine.crawl(retry)

        call = reactor.callLater(delay, again)
        self._retries.add(call)

    def _fetch_ended(self, ok: bool, kind: str) -> None:
        self.recent.append((ok, kind))
        self.last_fetch_at = time.monotonic()
        self._last_activity = self.last_fetch_at

    def health_facts(self) -> dict[str, Any]:
        """What ``/healthz`` judges by (:mod:`afm.crawler.operations.metrics`): the last
        fetches' results, when one last ended, how many wait to be tried again."""
        return {"recent": list(self.recent), "last_fetch_at": self.last_fetch_at,
                "retries_waiting": len(self._retries)}


def classify_failure(failure: Failure, request: Request) -> str:
    """A short, stable name for why a request produced no page."""
    exc = failure.value
    message = str(exc)
    if isinstance(exc, RobotsDenied):
        return ROBOTS_UNAVAILABLE if exc.unavailable else "robots_denied"
    if isinstance(exc, PrivateAddressRefused) or (
        isinstance(exc, DNSLookupError) and "private address" in message
    ):
        return "private_address"
    reason = request.meta.get("afm_refused", "")
    if isinstance(exc, StopDownload) or reason:
        return refused(reason)
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
    return page_is_html(_headers(response), response.body)


def _headers(response: Response) -> list[tuple[str, str]]:
    """The response's header field lines as ``(name, value)`` pairs."""
    return [(k.decode("latin-1"), v.decode("latin-1"))
            for k, values in response.headers.items() for v in values]


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
