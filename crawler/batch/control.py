"""A host's control files (robots.txt, and tdmrep.json when TDMRep is on): fetched once
per host per run, with RFC 9309's rules (five redirects, the status-code table, 500 KiB),
kept as the crawler keeps them (a snapshot per response, ``robotstxt/``), and passed
between the stages of a run as plain JSON (:class:`ControlFetch`), so a host that appears
again (a redirect's target, a slice of a large server) is never asked twice.

The meaning of each fetch is consent's (:func:`~afm.consent.robots.rules_from_fetch`,
:func:`~afm.consent.tdmrep.tdm_from_fetch`), exactly what the Scrapy daemon's middleware
applies; so is the evidence recorded with each training-use decision
(:class:`~afm.consent.training.FileContext`)."""

from __future__ import annotations

import base64
import datetime as dt
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urljoin

from afm.consent.robots import (
    MAX_ROBOTS_BYTES,
    MAX_ROBOTS_REDIRECTS,
    RobotsRules,
    rules_from_fetch,
    rules_past_redirect_limit,
)
from afm.consent.tdmrep import WELL_KNOWN_PATH, TdmFile, tdm_from_fetch
from afm.consent.training import FileContext
from afm.crawler.batch.client import FetchError, HttpClient
from afm.crawler.batch.config import FetchConfig
from afm.crawler.batch.pacing import Pacer, paced
from afm.crawler.rules.responses import REDIRECT_STATUSES

ROBOTS, TDMREP = "robots.txt", "tdmrep.json"


@dataclass
class ControlFetch:
    """One fetch of a control file: what came back (status and the first 500 KiB of the
    body, or the error), when, and where it ended after redirects."""

    kind: str  # robots.txt | tdmrep.json
    url: str
    fetched_at: float
    status: int | None = None
    body: bytes = b""
    final_url: str = ""
    error: str = ""
    redirect_limit: bool = False  # still redirecting after five hops

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["body"] = base64.b64encode(self.body).decode("ascii")
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ControlFetch:
        return cls(**{**data, "body": base64.b64decode(data.get("body") or "")})


@dataclass
class HostFiles:
    """What a host's control files say, for the fetcher's checks and the training-use
    decisions (built once per host from its :class:`ControlFetch` records)."""

    origin: str
    robots_fetch: ControlFetch | None = None
    tdm_fetch: ControlFetch | None = None
    last_start: float = 0.0  # the last request to the host (for the next stage's pacing)
    _rules: RobotsRules | None = field(default=None, repr=False)
    _tdm: TdmFile | None = field(default=None, repr=False)

    def rules(self, cfg: FetchConfig) -> RobotsRules:
        if self._rules is None:
            self._rules = robots_rules(self.robots_fetch, cfg)
        return self._rules

    def tdm(self, cfg: FetchConfig) -> TdmFile | None:
        if self._tdm is None and self.tdm_fetch is not None:
            self._tdm = tdm_file(self.tdm_fetch, cfg)
        return self._tdm

    def robots_context(self) -> FileContext | None:
        """As the crawler records it: only when a response came back."""
        f = self.robots_fetch
        if f is None or f.status is None:
            return None
        return FileContext(f.url, dt.datetime.fromtimestamp(f.fetched_at, dt.UTC), f.status)

    def tdm_context(self) -> FileContext | None:
        f = self.tdm_fetch
        if f is None:
            return None
        when = dt.datetime.fromtimestamp(f.fetched_at, dt.UTC) if f.status is not None else f.fetched_at
        return FileContext(f.url, when, f.status)

    def fresh(self, cfg: FetchConfig, now: float | None = None) -> bool:
        """Whether the robots.txt fetch may still be used (RFC 9309 2.4's cache rule)."""
        return self.robots_fetch is not None and not self.rules(cfg).expired(now)

    def to_json(self) -> dict[str, Any]:
        return {"origin": self.origin, "last_start": self.last_start,
                "robots": self.robots_fetch.to_json() if self.robots_fetch else None,
                "tdm": self.tdm_fetch.to_json() if self.tdm_fetch else None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostFiles:
        return cls(data["origin"],
                   ControlFetch.from_json(data["robots"]) if data.get("robots") else None,
                   ControlFetch.from_json(data["tdm"]) if data.get("tdm") else None,
                   float(data.get("last_start") or 0.0))


def robots_rules(f: ControlFetch | None, cfg: FetchConfig) -> RobotsRules:
    """The meaning of a robots.txt fetch (consent's table), dated when it was fetched."""
    if f is None:
        rules = rules_from_fetch(None, None, error="not fetched", retry_seconds=cfg.robots_retry_seconds)
    elif f.redirect_limit:
        rules = rules_past_redirect_limit(cfg.robots_cache_seconds)
    else:
        rules = rules_from_fetch(f.status, f.body if f.status is not None else None, error=f.error,
                                 cache_seconds=cfg.robots_cache_seconds,
                                 retry_seconds=cfg.robots_retry_seconds)
    if f is not None:
        rules.fetched_at = f.fetched_at
    return rules


def tdm_file(f: ControlFetch, cfg: FetchConfig) -> TdmFile:
    if f.redirect_limit or f.status is None:
        return tdm_from_fetch(None, None, error=f.error or "unreachable", fetched_at=f.fetched_at,
                              cache_seconds=cfg.robots_cache_seconds,
                              retry_seconds=cfg.robots_retry_seconds)
    return tdm_from_fetch(f.status, f.body, fetched_at=f.fetched_at,
                          cache_seconds=cfg.robots_cache_seconds,
                          retry_seconds=cfg.robots_retry_seconds)


async def fetch_control(client: HttpClient, origin: str, kind: str, pacers: list[Pacer],
                        keep: Any = None) -> ControlFetch:
    """Fetch ``origin``'s ``kind`` file once, following at most five redirects (each hop a
    paced request); ``keep(url, fetched)`` is handed the final response (the snapshot
    log). Never raises: a failure is a :class:`ControlFetch` with its error."""
    url = origin + ("/robots.txt" if kind == ROBOTS else WELL_KNOWN_PATH)
    target = url
    for _hop in range(MAX_ROBOTS_REDIRECTS + 1):
        started = time.time()
        try:
            async with paced(pacers) as started:
                got = await client.get(target, control=True)
        except FetchError as exc:
            return ControlFetch(kind, url, started, None, error=f"{exc.kind}: {exc}")
        location = next((v for k, v in got.headers if k.lower() == "location"), None)
        if got.status in REDIRECT_STATUSES and location:
            target = urljoin(target, location.strip())
            if not target.startswith(("http://", "https://")):
                return ControlFetch(kind, url, started, None, error=f"redirect to {target}")
            continue
        fetch = ControlFetch(kind, url, started, got.status, got.body[:MAX_ROBOTS_BYTES],
                             final_url=got.url)
        if keep is not None:
            keep(url, got, started)
        return fetch
    return ControlFetch(kind, url, time.time(), None, error="more than 5 redirects",
                        redirect_limit=True)


__all__ = ["ROBOTS", "TDMREP", "ControlFetch", "HostFiles", "fetch_control", "robots_rules",
           "tdm_file"]
