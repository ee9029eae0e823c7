"""One slice of a fetch: the URLs of one server (one host, or several hosts on one IP
address), fetched politely and recorded exactly as the crawler records them.

For each host of the slice: its control files (robots.txt first; tdmrep.json once the
host has a URL robots.txt allows, as the crawler's middleware does) come from an earlier
stage of the run or are fetched here, once; then every URL is checked against robots.txt
before any request, fetched through its host's and its server's pacers
(:mod:`afm.crawler.batch.pacing`: ``Crawl-delay`` or the default interval, one at a time
under a Crawl-delay), retried with backoff when the failure is transient, and its
redirects are followed: a hop on the same host here (through the same checks), a hop to
another host handed back to the pipeline (:class:`Handoff`), which fetches it in the next
round with that host's own robots.txt and pacing, so no two workers ever fetch one host at
once. Every URL of the list ends as exactly one outcome (:mod:`afm.crawler.rules.outcomes`),
written to the store's outcome log as it ends; a page is written to the WARC files first.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urljoin

from afm.crawler.batch.client import Fetched, FetchError, HttpClient
from afm.crawler.batch.config import FetchConfig
from afm.crawler.batch.control import ROBOTS, TDMREP, HostFiles, fetch_control
from afm.crawler.batch.pacing import Pacer, paced
from afm.crawler.batch.store import PageStore
from afm.crawler.frontier.urls import clean_url, host_key
from afm.crawler.rules import outcomes
from afm.crawler.rules.pages import own_directives, page_is_html, training_fields
from afm.crawler.rules.responses import (
    MAX_REDIRECTS,
    REDIRECT_STATUSES,
    is_transient_status,
    retry_backoff,
)

ROBOTS_UNAVAILABLE = "robots_unavailable"  # robots.txt 5xx / 429 / unreachable: disallow all


@dataclass
class UrlJob:
    """A URL to fetch: the one to request now, the URL of the list it stands for, and the
    redirect hops taken so far."""

    url: str
    request_url: str
    hops: int = 0


@dataclass
class SliceJob:
    """The URLs of one server (or one slice of a large one), by host."""

    server: str
    urls: dict[str, list[UrlJob]]
    slot: int = 0
    slices: int = 1
    round: int = 0  # 0: the list; 1, 2, ...: redirect targets on other hosts
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # origin -> HostFiles JSON

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.urls.values())


@dataclass
class Handoff:
    """A redirect to another host: fetched in the next round, by that host's rules."""

    url: str
    request_url: str
    hops: int

    @property
    def origin(self) -> str:
        return host_key(self.url)


@dataclass
class SliceResult:
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    handoffs: list[Handoff] = field(default_factory=list)


def outcome_row(request_url: str, outcome: str, *, reason: str = "", url: str = "", status: int | None = None,
                training_use: str | None = None, warc_file: str = "", round_: int = 0) -> dict[str, Any]:
    """One URL's end, as the outcome log and the run's report hold it."""
    return {"request_url": request_url, "url": url or request_url, "host": host_key(request_url),
            "outcome": outcome, "reason": reason[:300], "status": status,
            "training_use": training_use, "warc_file": warc_file, "round": round_}


class SliceFetcher:
    """Fetches slices with one client and one store (one worker's; see the module docstring).
    ``host_files(origin)`` returns a host's control files known from an earlier stage or
    run (None: fetch them); ``on_outcome(row)`` is told each URL's end (progress)."""

    def __init__(self, cfg: FetchConfig, client: HttpClient, store: PageStore, *,
                 host_files: Callable[[str], HostFiles | None] | None = None,
                 on_outcome: Callable[[dict[str, Any]], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.cfg, self.client, self.store = cfg, client, store
        self.policy = cfg.training_policy()
        self.agent, self.fallback, self.first = cfg.user_agent, cfg.fallback_agent, cfg.fallback_first
        self.known = host_files or (lambda origin: None)
        self.on_outcome = on_outcome or (lambda row: None)
        self.clock = clock
        self.requests = 0

    # ---- a slice --------------------------------------------------------------------------
    async def run(self, job: SliceJob) -> SliceResult:
        result = SliceResult()
        given = {origin: self._files_given(origin, job) for origin in job.urls}
        # A slice of a split server carries its hosts' control files: the server's grid is
        # as wide as the longest interval among them (afm.crawler.batch.pacing).
        longest = max((self._interval(files) for files, _here in given.values() if files is not None),
                      default=0.0)
        server = Pacer(self.cfg.min_interval(), self.cfg.per_host_concurrency, slot=job.slot,
                       slices=job.slices, grid_interval=longest, clock=self.clock)
        await asyncio.gather(*(self._host(origin, jobs, server, job, result, given[origin])
                               for origin, jobs in sorted(job.urls.items())))
        return result

    async def control_files(self, origin: str, server: Pacer, tdm: bool) -> HostFiles:
        """Fetch ``origin``'s robots.txt (and tdmrep.json when ``tdm``), keep the responses
        as snapshots and the state for later stages."""
        files = HostFiles(origin)
        files.robots_fetch = await fetch_control(self.client, origin, ROBOTS, [server], self._keep_control)
        # The host's spacing (its Crawl-delay, read just now) counts from robots.txt's answer.
        files.last_start = max(files.robots_fetch.fetched_at, self.clock())
        if tdm and self.cfg.tdmrep:
            await self._tdm(files, [server, self._host_pacer(files)])
        self.store.save_host(origin, files.to_json())
        return files

    async def _host(self, origin: str, jobs: list[UrlJob], server: Pacer, job: SliceJob,
                    result: SliceResult, given: tuple[HostFiles | None, bool]) -> None:
        files, fetched_here = given
        if files is None:
            files = await self.control_files(origin, server, tdm=False)
            fetched_here = True
        rules = files.rules(self.cfg)
        host = self._host_pacer(files)
        if job.round > 0 and not fetched_here:
            host.last_start = server.last_start = max(self.clock(), host.last_start)
        allowed: list[UrlJob] = []
        # disallow_all is what a 5xx, a 429 or no response means (RFC 9309 2.3.1.3-4): the
        # host is unavailable, not refusing; a rerun of the job asks again
        kind = ROBOTS_UNAVAILABLE if rules.kind == "disallow_all" else outcomes.ROBOTS_DENIED
        why = f"robots.txt ({rules.kind}{': ' + rules.reason if rules.reason else ''})"
        for j in jobs:
            if rules.allowed(j.url, self.agent, self.fallback, self.first):
                allowed.append(j)
            else:
                self._end(result, outcome_row(j.request_url, kind, reason=why, url=j.url, round_=job.round))
        if allowed and self.cfg.tdmrep and files.tdm_fetch is None:
            await self._tdm(files, [server, host])
            self.store.save_host(origin, files.to_json())
        await asyncio.gather(*(self._url(j, origin, files, [server, host], job.round, result)
                               for j in allowed))

    def _files_given(self, origin: str, job: SliceJob) -> tuple[HostFiles | None, bool]:
        if origin in job.hosts:
            return HostFiles.from_json(job.hosts[origin]), True
        files = self.known(origin)
        if files is not None and files.fresh(self.cfg, self.clock()):
            return files, False
        return None, False

    def _interval(self, files: HostFiles) -> float:
        """The host's spacing: its Crawl-delay, or the default when longer."""
        delay = files.rules(self.cfg).crawl_delay(self.agent, self.fallback, self.first)
        return max(self.cfg.min_interval(), delay or 0.0)

    def _host_pacer(self, files: HostFiles) -> Pacer:
        delay = files.rules(self.cfg).crawl_delay(self.agent, self.fallback, self.first)
        return Pacer(self._interval(files), 1 if delay else self.cfg.per_host_concurrency,
                     last_start=files.last_start, clock=self.clock)

    async def _tdm(self, files: HostFiles, pacers: list[Pacer]) -> None:
        files.tdm_fetch = await fetch_control(self.client, files.origin, TDMREP, pacers, self._keep_control)
        files._tdm = None

    def _keep_control(self, url: str, got: Fetched, when: float) -> None:
        self.store.keep_control(url, got.status, got.headers, got.body, when, got.url)

    # ---- a URL -----------------------------------------------------------------------------
    async def _url(self, job: UrlJob, origin: str, files: HostFiles, pacers: list[Pacer],
                   round_: int, result: SliceResult) -> None:
        url, hops = job.url, job.hops
        rules = files.rules(self.cfg)
        while True:
            if not rules.allowed(url, self.agent, self.fallback, self.first):
                self._end(result, outcome_row(job.request_url, outcomes.ROBOTS_DENIED, url=url,
                                              reason="robots.txt disallows the redirect target",
                                              round_=round_))
                return
            got, error = await self._request(url, pacers)
            if error is not None:
                self._end(result, outcome_row(job.request_url, error.kind, reason=str(error), url=url,
                                              round_=round_))
                return
            location = next((v for k, v in got.headers if k.lower() == "location"), None)
            if got.status in REDIRECT_STATUSES and location:
                hops += 1
                if hops > MAX_REDIRECTS:
                    self._end(result, outcome_row(job.request_url, outcomes.REDIRECT_LIMIT, url=url,
                                                  reason=f"more than {MAX_REDIRECTS} redirects",
                                                  round_=round_))
                    return
                try:
                    target = clean_url(urljoin(url, location.strip()))
                except Exception:  # noqa: BLE001 - a broken Location header
                    target = ""
                if not target.startswith(("http://", "https://")):
                    self._end(result, outcome_row(job.request_url, outcomes.ERROR_PREFIX + "redirect",
                                                  url=url, reason=f"redirect to {location[:200]!r}",
                                                  round_=round_))
                    return
                if host_key(target) != origin:
                    result.handoffs.append(Handoff(target, job.request_url, hops))
                    return
                url = target
                continue
            self._keep_page(got, job.request_url, files, round_, result)
            return

    async def _request(self, url: str, pacers: list[Pacer]) -> tuple[Fetched | None, FetchError | None]:
        """One URL with the crawler's retry rules (``retry_times``, transient failures only),
        waiting :func:`retry_backoff` and the pacers before each retry."""
        for attempt in range(self.cfg.retry_times + 1):
            if attempt:
                await asyncio.sleep(retry_backoff(attempt))
            try:
                async with paced(pacers):
                    self.requests += 1
                    got = await self.client.get(url)
            except FetchError as exc:
                if exc.transient and attempt < self.cfg.retry_times:
                    continue
                return None, exc
            if is_transient_status(got.status):
                if attempt < self.cfg.retry_times:
                    continue
                # still overloaded or failing after the retries: an error with its reason, not a
                # page (the Scrapy daemon records it so too, and fetches it again on a later run)
                return None, FetchError(f"http_{got.status}", f"HTTP {got.status} from {got.url}", transient=True)
            return got, None
        raise AssertionError("unreachable")

    def _keep_page(self, got: Fetched, request_url: str, files: HostFiles, round_: int,
                   result: SliceResult) -> None:
        html = page_is_html(got.headers, got.body)
        if "noindex" in own_directives(got.headers, got.body, html, self.agent):
            self._end(result, outcome_row(request_url, outcomes.NOINDEX, url=got.url, status=got.status,
                                          round_=round_))
            return
        fetched_at = dt.datetime.now(dt.UTC)
        decision, fields = training_fields(
            self.policy, got.url, got.headers, got.body, html, fetched_at,
            robots=files.rules(self.cfg), robots_file=files.robots_context(),
            tdm=files.tdm(self.cfg), tdm_file=files.tdm_context())
        warc_file, _offset = self.store.write_page(
            got.url, got.status, got.headers, got.body, request_url=request_url,
            request_headers=got.request_headers, fetched_at=fetched_at, warc_headers=fields)
        self._end(result, outcome_row(request_url, outcomes.FETCHED, url=got.url, status=got.status,
                                      training_use=decision.use, warc_file=warc_file, round_=round_))

    def _end(self, result: SliceResult, row: dict[str, Any]) -> None:
        self.store.outcome(row)
        result.outcomes.append(row)
        self.on_outcome(row)


def handoff_json(h: Handoff) -> dict[str, Any]:
    return asdict(h)


__all__ = ["ROBOTS_UNAVAILABLE", "Handoff", "SliceFetcher", "SliceJob", "SliceResult", "UrlJob",
           "handoff_json", "outcome_row"]
