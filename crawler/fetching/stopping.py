"""Stopping a crawl on SIGTERM within a bound: nothing new starts, what is in flight is cancelled.

Scrapy's graceful stop waits for every request the engine handed to the downloader:
those transferring *and* those queued in a host's slot behind its download delay or
Crawl-delay. A daemon stopped mid-crawl therefore fetched on for as long as its slowest
host took (14 pages over 21 s, and past a unit's stop limit with slow hosts, after which
systemd's SIGKILL loses the open WARC file). Here, at the first SIGTERM / Ctrl-C:

1. the spider schedules nothing more (inbox, retries; :meth:`AfmSpider.begin_stop`);
2. :class:`StopGate`, the last downloader middleware, refuses every request still on its
   way to the downloader (one that was waiting for its host's robots.txt, say);
3. every request queued in a download slot is cancelled, and every transfer in flight
   is cancelled through :class:`CancellableHTTPDownloadHandler` (its connection closed).

The cancelled requests are not recorded as finished (the spider ignores failures while
stopping), so the next run fetches them; what was stored is in the WARC file, which
Scrapy's close then closes and indexes as usual. The stop therefore takes what closing
the file and its index shard takes, plus Scrapy's one-second wait for idle connections:
a few seconds, whatever the hosts are doing (docs/crawler.md states the bound). A second
SIGTERM stops at once, as Scrapy does (the open WARC file is then lost and re-fetched).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from afm.crawler.fetching.components import CrawlerComponent

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

_STOPPING = "afm_stopping"  # the crawler's attribute: True once the stop began
_HANDLERS = "afm_http_handlers"  # the crawler's attribute: its cancellable download handlers


def stopping(crawler: Crawler) -> bool:
    return bool(getattr(crawler, _STOPPING, False))


class StopCancelled(IgnoreRequest):
    """A request refused or cancelled because the crawler is stopping (fetched next run)."""


class StopGate(CrawlerComponent):
    """The last downloader middleware: once the stop began, no request reaches the network."""

    def process_request(self, request: Request) -> None:
        if stopping(self.crawler):
            raise StopCancelled("the crawler is stopping")


class CancellableHTTPDownloadHandler(HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler, keeping each download it runs so the stop can cancel it
    (cancelling aborts the connection, as Scrapy's own download timeout does)."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._in_flight: set[Any] = set()
        self._cancelled: set[Any] = set()
        handlers = getattr(crawler, _HANDLERS, None)
        if handlers is None:
            handlers = []
            setattr(crawler, _HANDLERS, handlers)
        handlers.append(self)

    async def download_request(self, request: Request) -> Response:
        if stopping(self._crawler):
            raise StopCancelled("the crawler is stopping")
        download = deferred_from_coro(super().download_request(request))
        self._in_flight.add(download)
        try:
            return await maybe_deferred_to_future(download)
        except BaseException:
            # A cancelled download ends in asyncio's CancelledError, a BaseException that
            # Scrapy's downloader does not catch (its waiters would hang): an ordinary
            # failure instead, which the spider ignores while stopping.
            if download in self._cancelled:
                raise StopCancelled(f"cancelled in flight: the crawler is stopping ({request.url})") from None
            raise
        finally:
            self._in_flight.discard(download)
            self._cancelled.discard(download)

    def cancel_all(self) -> int:
        downloads = list(self._in_flight)
        self._cancelled.update(downloads)
        for download in downloads:
            download.cancel()
        return len(downloads)


def stop_fetching(crawler: Crawler) -> dict[str, int]:
    """Begin the stop (see the module docstring); run in the reactor's thread. Returns how
    many queued and transferring requests were cancelled."""
    setattr(crawler, _STOPPING, True)
    spider = getattr(crawler, "spider", None)
    if spider is not None and hasattr(spider, "begin_stop"):
        spider.begin_stop()
    queued = transferring = 0
    engine = getattr(crawler, "engine", None)
    downloader = getattr(engine, "downloader", None)
    for slot in list(getattr(downloader, "slots", {}).values()):
        if slot.latercall is not None:
            slot.latercall.cancel()
            slot.latercall = None
        while slot.queue:
            _request, waiting = slot.queue.popleft()
            waiting.cancel()
            queued += 1
    for handler in getattr(crawler, _HANDLERS, ()):
        transferring += handler.cancel_all()
    crawler.stats.set_value("afm/stop_cancelled", queued + transferring)
    return {"queued": queued, "transferring": transferring}


__all__ = ["CancellableHTTPDownloadHandler", "StopCancelled", "StopGate", "stop_fetching", "stopping"]
