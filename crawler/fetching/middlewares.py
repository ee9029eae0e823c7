"""Scrapy components of the crawler: robots.txt, crawl-delay, size and bomb guards.

* :class:`RobotsMiddleware` (downloader middleware) - fetches ``/robots.txt`` once per
  ``scheme://host:port`` (cached at most 24 h, redirects up to 5 hops), decides with
  :mod:`afm.consent.robots`, refuses disallowed requests *before* they reach the
  network, and turns ``Crawl-delay`` into the host's download-slot delay (concurrency 1,
  no jitter, AutoThrottle told not to adjust it).
  With ``tdmrep`` on it also fetches ``/.well-known/tdmrep.json`` once per host (same
  cache and error rules, :mod:`afm.consent.tdmrep`); both files' responses are kept as
  snapshots in ``<out>/robotstxt/`` (:class:`afm.crawler.storage.snapshot_log.SnapshotWriter`) so
  ``afm curate`` can apply a later opt-out, and their parsed state is what the spider's
  training-use decision reads (:meth:`RobotsMiddleware.host_files`).
* :class:`BombGuardMiddleware` - lowers the decompression cap of a compressed response to
  ``max_compression_ratio`` x its wire size, so Scrapy's decompressor refuses bombs that
  stay under the absolute size cap.
* :class:`ContentGuard` (extension) - stops a download as soon as its headers show a
  content type outside the allow-list or a declared size over the cap.

Each is a :class:`~afm.crawler.fetching.components.CrawlerComponent`: the crawler, its
config and signals are wired there once. The stats line and heartbeat (an extension too)
are :mod:`afm.crawler.operations.progress`.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http.request import NO_CALLBACK
from twisted.internet.defer import Deferred

from afm.consent.robots import (
    MAX_ROBOTS_REDIRECTS,
    RobotsRules,
    rules_from_fetch,
    rules_past_redirect_limit,
)
from afm.consent.tdmrep import WELL_KNOWN_PATH, TdmFile, tdm_from_fetch
from afm.consent.training import FileContext
from afm.crawler.fetching.components import CrawlerComponent, on
from afm.crawler.frontier.urls import host_key
from afm.crawler.rules.responses import decompression_cap, header_refusal
from afm.crawler.storage.snapshot_log import SnapshotWriter

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class RobotsDenied(IgnoreRequest):
    """robots.txt disallows this URL for our product token; ``unavailable``: because the
    file could not be fetched (5xx, 429, no answer: RFC 9309's "disallow all" for now)."""

    def __init__(self, message: str, unavailable: bool = False) -> None:
        super().__init__(message)
        self.unavailable = unavailable


class ContentRefused(IgnoreRequest):
    """The response was refused: content type, size or decompression ratio."""


class RobotsMiddleware(CrawlerComponent):
    """robots.txt (and tdmrep.json) before every request; Crawl-delay (see the module docstring)."""

    DOWNLOAD_PRIORITY = 1000

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        cfg = self.cfg
        self.agent: str = cfg.user_agent
        self.fallback: str | None = cfg.fallback_agent
        self.fallback_first: bool = cfg.fallback_first
        self.cache_seconds: float = cfg.robots_cache_seconds
        self.retry_seconds: float = cfg.robots_retry_seconds
        self._rules: dict[str, RobotsRules] = {}
        self._pending: dict[str, Deferred] = {}
        self.tdmrep: bool = cfg.tdmrep
        self._tdm: dict[str, TdmFile] = {}
        self._tdm_pending: dict[str, Deferred] = {}
        # host -> (robots.txt fetch, tdmrep.json fetch): URL, time, status, for evidence
        self._context: dict[tuple[str, str], FileContext] = {}
        self._snapshots: Any = None
        self._keep_snapshots: bool = cfg.snapshots
        self._out_dir: str = cfg.out_dir
        self._warc_prefix: str = cfg.warc_prefix
        self._sitemaps_seen: set[str] = set()
        crawler.afm_robots = self  # type: ignore[attr-defined] - the spider's pre-check

    # ---- synchronous view for the spider (no fetch) -------------------------------------
    def cached_decision(self, url: str) -> bool | None:
        """True/False if this host's robots.txt is cached and fresh, else None."""
        rules = self._rules.get(host_key(url))
        if rules is None or rules.expired():
            return None
        return rules.allowed(url, self.agent, self.fallback, self.fallback_first)

    def forget_unavailable(self, url: str) -> None:
        """Drop the cached "disallow all" of ``url``'s host that an unavailable robots.txt
        left, so the file is asked again (a seed of that host was given again)."""
        key = host_key(url)
        rules = self._rules.get(key)
        if rules is not None and rules.kind == "disallow_all" and key not in self._pending:
            del self._rules[key]

    def host_files(self, url: str) -> tuple[RobotsRules | None, FileContext | None,
                                            TdmFile | None, FileContext | None]:
        """The robots.txt and tdmrep.json state of ``url``'s host, with where each came
        from (what the spider's training-use decision reads)."""
        key = host_key(url)
        return (self._rules.get(key), self._context.get((key, "robots.txt")),
                self._tdm.get(key), self._context.get((key, "tdmrep.json")))

    # ---- downloader middleware ----------------------------------------------------------------
    async def process_request(self, request: Request) -> None:
        if request.meta.get("afm_robots_fetch") or request.url.startswith(("data:", "file:")):
            return None
        key = host_key(request.url)
        rules = await self._get_rules(key)
        if not rules.allowed(request.url, self.agent, self.fallback, self.fallback_first):
            self.crawler.stats.inc_value("afm/robots_denied")
            unavailable = rules.kind == "disallow_all"  # only a file that could not be fetched says that
            why = f"robots.txt unavailable: {rules.reason}" if unavailable else rules.kind
            raise RobotsDenied(f"robots.txt disallows {request.url} ({why})", unavailable=unavailable)
        if self.tdmrep:
            await self._get_tdm(key)
        delay = rules.crawl_delay(self.agent, self.fallback, self.fallback_first)
        if delay:
            self._apply_crawl_delay(request, delay)
        return None

    async def _get_rules(self, key: str) -> RobotsRules:
        def failed(exc: Exception) -> RobotsRules:
            return rules_from_fetch(None, None, error=repr(exc), retry_seconds=self.retry_seconds)

        return await self._fetched_once(key, self._rules, self._pending, self._fetch, failed,
                                        lambda rules: self._on_new_rules(key, rules))

    async def _get_tdm(self, key: str) -> TdmFile:
        """The host's tdmrep.json, fetched once and cached like robots.txt."""
        def failed(exc: Exception) -> TdmFile:
            return tdm_from_fetch(None, None, error=repr(exc), retry_seconds=self.retry_seconds)

        return await self._fetched_once(key, self._tdm, self._tdm_pending, self._fetch_tdm, failed)

    @staticmethod
    async def _fetched_once(key: str, cache: dict[str, Any], pending: dict[str, Deferred],
                            fetch: Any, failed: Any, on_new: Any = None) -> Any:
        """A host's file (robots.txt, tdmrep.json) from ``cache`` while it has not expired;
        otherwise fetched once however many requests ask at the same time (the others wait
        on the first one's Deferred), a failed fetch becoming ``failed(exc)``."""
        value = cache.get(key)
        if value is not None and not value.expired():
            return value
        waiter = pending.get(key)
        if waiter is None:
            waiter = pending[key] = Deferred()
            try:
                value = await fetch(key)
            except Exception as exc:  # noqa: BLE001 - never leave waiters hanging
                value = failed(exc)
            cache[key] = value
            del pending[key]
            waiter.callback(value)
            if on_new is not None:
                on_new(value)
            return value
        from scrapy.utils.defer import maybe_deferred_to_future

        # Wait for the fetch in progress. The Deferred's result is passed along its
        # callback chain (and is None for all but the first waiter), so read the cache.
        await maybe_deferred_to_future(waiter)
        return cache[key]

    async def _fetch_tdm(self, key: str) -> TdmFile:
        url = f"{key}{WELL_KNOWN_PATH}"
        stats = self.crawler.stats
        stats.inc_value("afm/tdmrep_fetches")
        try:
            response = await self._download(url)
        except Exception as exc:  # noqa: BLE001 - unreachable: robots.txt's rule (reserved)
            stats.inc_value("afm/tdmrep_unreachable")
            self._context[(key, "tdmrep.json")] = FileContext(url, time.time(), None)
            return tdm_from_fetch(None, None, error=f"{type(exc).__name__}: {exc}",
                                  cache_seconds=self.cache_seconds, retry_seconds=self.retry_seconds)
        stats.inc_value(f"afm/tdmrep_status/{response.status}")
        return tdm_from_fetch(response.status, response.body, cache_seconds=self.cache_seconds,
                              retry_seconds=self.retry_seconds)

    async def _download(self, url: str) -> Response:
        """Fetch a control file (robots.txt, tdmrep.json) ahead of pages, and keep it."""
        request = Request(url, priority=self.DOWNLOAD_PRIORITY, callback=NO_CALLBACK,
                          meta={"afm_robots_fetch": True, "redirect_ttl": MAX_ROBOTS_REDIRECTS,
                                "dont_obey_robotstxt": True})
        response = await self.crawler.engine.download_async(request)
        now = dt.datetime.now(dt.UTC)
        kind = "tdmrep.json" if url.endswith(WELL_KNOWN_PATH) else "robots.txt"
        self._context[(host_key(url), kind)] = FileContext(url, now, response.status)
        self._snapshot(url, response, now)
        return response

    def _snapshot(self, url: str, response: Response, when: dt.datetime) -> None:
        if not self._keep_snapshots:
            return
        if self._snapshots is None:
            self._snapshots = SnapshotWriter(self._out_dir, prefix=self._warc_prefix)
        headers = [(k.decode("latin-1"), v.decode("latin-1"))
                   for k, values in response.headers.items() for v in values]
        self._snapshots.write(url, response.status, headers, response.body, when,
                              final_url=response.url)
        self.crawler.stats.inc_value("afm/control_file_snapshots")

    @on(signals.spider_closed)
    def _close_snapshots(self, spider: Any = None, reason: str = "") -> None:
        if self._snapshots is not None:
            self._snapshots.close()
            self._snapshots = None

    async def _fetch(self, key: str) -> RobotsRules:
        request = Request(
            f"{key}/robots.txt",
            priority=self.DOWNLOAD_PRIORITY,
            callback=NO_CALLBACK,
            meta={
                "afm_robots_fetch": True,
                "redirect_ttl": MAX_ROBOTS_REDIRECTS,
                "dont_obey_robotstxt": True,
            },
        )
        stats = self.crawler.stats
        stats.inc_value("afm/robots_fetches")
        try:
            response = await self._download(request.url)
        except IgnoreRequest as exc:
            if "redirect" in str(exc):
                # RFC 9309 2.3.1.2: past five redirects robots.txt MAY be taken as unavailable.
                stats.inc_value("afm/robots_redirect_limit")
                return rules_past_redirect_limit(self.cache_seconds)
            stats.inc_value("afm/robots_unreachable")  # e.g. a private address: refused
            return rules_from_fetch(None, None, error=str(exc), cache_seconds=self.cache_seconds,
                                    retry_seconds=self.retry_seconds)
        except Exception as exc:  # noqa: BLE001 - any failure means "unreachable"
            stats.inc_value("afm/robots_unreachable")
            return rules_from_fetch(None, None, error=f"{type(exc).__name__}: {exc}",
                                    cache_seconds=self.cache_seconds, retry_seconds=self.retry_seconds)
        stats.inc_value(f"afm/robots_status/{response.status}")
        return rules_from_fetch(response.status, response.body, cache_seconds=self.cache_seconds,
                                retry_seconds=self.retry_seconds)

    def _on_new_rules(self, key: str, rules: RobotsRules) -> None:
        spider = self.crawler.spider
        new = [s for s in rules.sitemaps if s not in self._sitemaps_seen]
        self._sitemaps_seen.update(new)
        if new and hasattr(spider, "add_sitemaps"):
            spider.add_sitemaps(new)

    def _apply_crawl_delay(self, request: Request, delay: float) -> None:
        """Honour Crawl-delay: one request at a time, ``delay`` seconds apart, no jitter."""
        request.meta["autothrottle_dont_adjust_delay"] = True
        downloader = self.crawler.engine.downloader
        slot_key = downloader.get_slot_key(request)
        settings = downloader.per_slot_settings.setdefault(slot_key, {})
        if settings.get("delay") != delay:
            settings.update({"delay": delay, "concurrency": 1, "jitter": 0})
        slot = downloader.slots.get(slot_key)
        if slot is not None and (slot.delay < delay or slot.concurrency != 1):
            slot.delay = max(slot.delay, delay)
            slot.concurrency = 1
            slot.jitter = 0


class BombGuardMiddleware(CrawlerComponent):
    """Cap decompression at ``ratio`` x the compressed size (bombs under the size cap)."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.ratio: float = self.cfg.max_compression_ratio
        self.max_size: int = self.cfg.max_response_bytes

    def process_response(self, request: Request, response: Response) -> Response:
        if response.headers.get(b"Content-Encoding") and self.ratio > 0:
            wire = len(response.body)
            cap = decompression_cap(wire, self.ratio, self.max_size)  # afm.crawler.rules.responses
            request.meta["download_maxsize"] = cap
            request.meta["afm_wire_bytes"] = wire
        return response


class ContentGuard(CrawlerComponent):
    """Stop downloads early on a disallowed content type or an oversize declared length."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.allowed = {t.lower() for t in self.cfg.content_types}
        self.max_size: int = self.cfg.max_response_bytes

    @on(signals.headers_received)
    def headers_received(self, headers: Any, body_length: int, request: Request, spider: Any) -> None:
        if request.meta.get("afm_robots_fetch"):
            return
        refusal = header_refusal(headers.get(b"Content-Type"), body_length, self.allowed, self.max_size)
        if refusal:  # afm.crawler.rules.responses (Scrapy cancels oversize too; this says why)
            self.stats.inc_value(f"afm/refused/{refusal.split()[0]}")
            request.meta["afm_refused"] = refusal
            raise StopDownload(fail=True)
