"""The crawl's periodic stats line and, with a Redis frontier, this daemon's heartbeat.

:class:`Progress` (a Scrapy extension) prints the numbers of
:func:`afm.crawler.operations.metrics.snapshot` every ``progress_seconds`` (with a
timestamp for a daemon, whose log is read later) and writes the same numbers into the
shared frontier's hash of daemons, which ``afm crawler status --redis-url`` reads.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals

from afm.console import console
from afm.crawler.fetching.components import CrawlerComponent, on
from afm.crawler.operations.metrics import HEARTBEAT_KEY, daemon_id, judge_health, snapshot

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def error_summary(s: dict[str, Any]) -> str:
    """``0``, or the errors by kind with each kind's last reason:
    ``3 (timeout 2: Getting http://h/ took longer than 30 seconds; private_address 1: ...)``."""
    total = sum(s["errors"].values())
    if not total:
        return "0"
    parts = []
    for kind, count in sorted(s["errors"].items(), key=lambda kv: -kv[1]):
        reason = s["last_errors"].get(kind, {}).get("reason", "")
        parts.append(f"{kind} {count:,}" + (f": {reason[:120]}" if reason else ""))
    return f"{total:,} ({'; '.join(parts)})"


class Progress(CrawlerComponent):
    """The periodic stats line, every ``progress_seconds``: pages (and the rate over the
    last interval, what a long-running daemon is doing now), bytes, statuses, robots.txt
    denials, training opt-outs, errors, the frontier, in-flight requests and WARC files
    closed. With a Redis frontier the same numbers are this daemon's heartbeat in
    ``<redis_key>:daemons`` (``afm crawler status --redis-url``)."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.interval = float(self.cfg.progress_seconds)
        self.start = time.monotonic()
        self._last = (self.start, 0)
        self._task: Any = None

    @on(signals.spider_opened)
    def opened(self, spider: Any) -> None:
        self.start = time.monotonic()
        self._last = (self.start, 0)
        if self.interval > 0:
            from twisted.internet import task

            self._task = task.LoopingCall(self.report)
            self._task.start(self.interval, now=False)

    @on(signals.spider_closed)
    def closed(self, spider: Any) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        self._heartbeat(None)

    def line(self, s: dict[str, Any]) -> str:
        now = time.monotonic()
        then, pages_then = self._last
        self._last = (now, s["pages"])
        rate = (s["pages"] - pages_then) / max(now - then, 1e-9)
        statuses = " ".join(f"{k}:{v:,}" for k, v in sorted(s["status"].items())) or "-"
        optouts = sum(v for k, v in s["training"].items() if k != "allowed")
        return (f"[crawl] pages {s['pages']:,} ({rate:,.1f}/s now, {s['pages'] / max(now - self.start, 1e-9):,.1f}/s "
                f"overall)  bytes {s['bytes']:,}  status {statuses}  robots-denied {s['robots_denied']:,}  "
                f"training-optout {optouts:,}  errors {error_summary(s)}  "
                f"frontier {'?' if s['frontier'] is None else format(s['frontier'], ',')}  "
                f"in-flight {s['in_flight']}  warc-closed {s['warc_files_closed']}")

    def report(self) -> None:
        s = snapshot(self.crawler)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if self.cfg.daemon else ""
        line = self.line(s)
        health, reason = judge_health(self.crawler, self.start, s)
        if health == "degraded":
            line += f"  DEGRADED: {reason}"
        console.print(f"{stamp} {line}".strip(), highlight=False, markup=False, soft_wrap=True)
        self._heartbeat({**s, "health": health, "health_reason": reason})

    def _heartbeat(self, s: dict[str, Any] | None) -> None:
        """This daemon's numbers (or, when it stops, its removal) in the shared frontier's
        hash of daemons."""
        if not self.cfg.redis_url:
            return
        try:
            server = self.crawler.engine._slot.scheduler.server  # scrapy-redis's client
            key = HEARTBEAT_KEY.format(key=self.cfg.redis_key)
            if s is None:
                server.hdel(key, daemon_id())
            else:
                server.hset(key, daemon_id(), json.dumps({**s, "out_dir": self.cfg.out_dir, "at": time.time()}))
        except Exception:  # noqa: BLE001 - a heartbeat is informational; the crawl goes on
            return


__all__ = ["Progress", "error_summary"]
