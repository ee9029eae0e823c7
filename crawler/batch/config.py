"""``afm fetch``'s configuration: the crawl's own settings (:class:`CrawlConfig`: user agent,
consent, safety limits, politeness) plus what only a batch fetch of URL lists has.

Politeness is by construction, with these numbers:

* a host's requests start at least ``host_interval`` seconds apart (its robots.txt
  ``Crawl-delay`` when longer, and ``download_delay`` when longer still), at most
  ``per_host_concurrency`` at once (one at a time under a Crawl-delay);
* hosts on one server (one IP address) share that server's budget: ``host_interval``
  apart and ``per_host_concurrency`` at once over all of them;
* a server with more than ``slice_urls`` URLs is split into slices fetched by different
  workers, each on its own phase of a shared clock grid, so together they still keep the
  limits above (:mod:`afm.crawler.batch.pacing`);
* a worker fetches up to ``concurrent_requests`` requests and ``slices_in_flight`` slices
  at once, so its CPU, not the network wait, is the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from afm.crawler.config import CrawlConfig
from afm.errors import UserError


@dataclass
class FetchConfig(CrawlConfig):
    """Every :class:`CrawlConfig` setting that applies to one fetch (``seeds``, link
    following, budgets, the daemon's and the frontier's settings do not), plus these."""

    host_interval: float = 1.0  # seconds between request starts to one host (or server)
    slice_urls: int = 5_000  # URLs of one server per slice; more are split into slices
    slices_in_flight: int = 256  # slices (servers) fetched at once by one worker
    concurrent_requests: int = 256  # requests in flight at once in one worker
    warc_prefix: str = "afm-fetch"

    def check(self) -> None:
        """Refuse numbers that cannot work, before any work starts."""
        positive = {"slice_urls": self.slice_urls, "slices_in_flight": self.slices_in_flight,
                    "concurrent_requests": self.concurrent_requests,
                    "per_host_concurrency": self.per_host_concurrency,
                    "max_response_bytes": self.max_response_bytes,
                    "warc_max_bytes": self.warc_max_bytes}
        for name, value in positive.items():
            if value <= 0:
                raise UserError(f"{name}: must be > 0, got {value}")
        for name, value in {"host_interval": self.host_interval,
                            "download_delay": self.download_delay,
                            "retry_times": self.retry_times}.items():
            if value < 0:
                raise UserError(f"{name}: must be >= 0, got {value}")
        if self.download_timeout <= 0 or self.dns_timeout <= 0:
            raise UserError("download_timeout and dns_timeout must be > 0")
        self.check_consent()

    def min_interval(self) -> float:
        """The least time between two request starts to one host or server."""
        return max(self.host_interval, self.download_delay)


__all__ = ["FetchConfig"]
