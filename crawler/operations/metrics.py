"""Watching a running crawler: a Prometheus metrics endpoint, a health endpoint, and the
numbers and facts the stats line (:mod:`afm.crawler.operations.progress`) and
``afm crawler status`` (:mod:`afm.crawler.operations.status`) read.

:class:`MetricsEndpoint` (a Scrapy extension) serves, on loopback by default (a crawler's
numbers are nobody else's business), from the crawler's own reactor:

* ``/metrics``: Prometheus text format (``prometheus_client``), made from Scrapy's stats at
  scrape time: pages and bytes fetched, responses by status, robots.txt denials and
  fetches, training-use outcomes (opted out or not, and why), pages skipped or refused
  by reason, errors, the frontier's size and what is in flight, WARC files closed, and
  the process's own memory and CPU;
* ``/healthz``: ``200`` with a JSON body while the engine runs, its ``status`` ``ok`` or
  ``degraded`` with a ``reason`` (every recent fetch failed, or requests wait and none
  ends: :func:`judge_health`); ``503`` once it stops (what the systemd unit's start check
  and the container's ``HEALTHCHECK`` ask).

The endpoint's address is written to ``<out>/state/endpoint.json`` so that ``afm crawler
status --out DIR`` finds a running daemon without being told the port. With a Redis
frontier, every daemon also writes a heartbeat (its pages, frontier view, time) into the
hash ``<redis_key>:daemons`` at each stats interval, so ``afm crawler status --redis-url``
shows every daemon sharing the frontier.

``metrics_port``: ``-1`` (default) = 9410 for a daemon, off for a one-shot crawl; ``0`` =
any free port (tests; the chosen one is in ``endpoint.json``); ``> 0`` = that port.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from twisted.web.resource import Resource

from afm.crawler.fetching.components import CrawlerComponent, crawl_config, on

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

DEFAULT_DAEMON_PORT = 9410
ENDPOINT_FILE = "endpoint.json"
HEARTBEAT_KEY = "{key}:daemons"


def metrics_port(cfg: Any) -> int | None:
    """The port to serve on, or None when the endpoint is off (see the module docstring)."""
    if cfg.metrics_port == -1:
        return DEFAULT_DAEMON_PORT if cfg.daemon else None
    return int(cfg.metrics_port)


def endpoint_file(out_dir: str | Path) -> Path:
    return Path(out_dir) / "state" / ENDPOINT_FILE


def daemon_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ----------------------------------------------------------------------------- the numbers


def snapshot(crawler: Crawler) -> dict[str, Any]:
    """What the crawler is doing now, from its stats and engine (all cheap to read)."""
    stats = crawler.stats.get_stats()
    engine = getattr(crawler, "engine", None)
    slot = getattr(engine, "_slot", None) or getattr(engine, "slot", None)
    scheduler = getattr(slot, "scheduler", None)
    frontier = None
    if scheduler is not None:
        try:
            frontier = len(scheduler)  # the local queue, or the Redis queue (ZCARD)
        except Exception:  # noqa: BLE001 - a frontier that cannot be read is shown as unknown
            frontier = None
    in_flight = len(getattr(slot, "inprogress", ()) or ()) if slot is not None else 0
    by_prefix = lambda p: {k[len(p):]: int(v) for k, v in stats.items() if k.startswith(p)}  # noqa: E731
    # Every error by kind: each failed fetch's kind (after its retries), the spider's own
    # exceptions and logged errors; with the last reason of each failure kind.
    errors = by_prefix("afm/failed/")
    spider_errors = sum(int(v) for k, v in stats.items() if k.startswith("spider_exceptions/"))
    if spider_errors:
        errors["spider_exception"] = spider_errors
    if int(stats.get("log_count/ERROR", 0)):
        errors["logged_error"] = int(stats.get("log_count/ERROR", 0))
    last_errors = {k[len("afm/last_error/"):]: dict(v) for k, v in stats.items()
                   if k.startswith("afm/last_error/") and isinstance(v, dict)}
    return {
        "pages": int(stats.get("afm/pages", 0)),
        "bytes": int(stats.get("afm/bytes", 0)),
        "status": by_prefix("afm/status/"),
        "robots_denied": int(stats.get("afm/robots_denied", 0)),
        "robots_fetches": int(stats.get("afm/robots_fetches", 0)),
        "robots_unreachable": int(stats.get("afm/robots_unreachable", 0)),
        "tdmrep_fetches": int(stats.get("afm/tdmrep_fetches", 0)),
        "training": by_prefix("afm/training/"),
        "skipped": by_prefix("afm/skipped/"),
        "refused": by_prefix("afm/refused/"),
        "outcomes": by_prefix("afm/outcome/"),
        "scheduled": int(stats.get("afm/scheduled", 0)),
        "errors": errors,
        "last_errors": last_errors,
        "retries": by_prefix("afm/retries/"),
        "frontier": frontier,
        "in_flight": in_flight,
        "warc_files_closed": int(stats.get("afm/warc_files", 0)),
        "running": bool(engine is not None and getattr(engine, "running", False)),
    }


def judge_health(crawler: Crawler, started: float, s: dict[str, Any] | None = None) -> tuple[str, str]:
    """``("ok" | "degraded" | "stopping", reason)``. Degraded: every one of the last
    fetches failed (``health_recent_fetches`` of them, or all so far), or requests wait (in
    the frontier, in flight, or for a retry) but no fetch has ended for
    ``health_stall_seconds`` (counted from ``started``, the crawl's monotonic start, before
    the first). The reason names the kinds and the last error's reason."""
    s = s if s is not None else snapshot(crawler)
    if not s["running"]:
        return "stopping", ""
    spider = getattr(crawler, "spider", None)
    facts = spider.health_facts() if spider is not None and hasattr(spider, "health_facts") else {}
    recent = facts.get("recent") or []
    if recent and not any(ok for ok, _ in recent):
        kinds: dict[str, int] = {}
        for _, kind in recent:
            kinds[kind] = kinds.get(kind, 0) + 1
        newest = recent[-1][1]
        last = s["last_errors"].get(newest, {})
        return "degraded", (f"the last {len(recent)} fetches all failed ("
                            + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
                            + f"); last: {newest}: {last.get('reason', '?')} ({last.get('url', '?')})")
    cfg = crawl_config(crawler)
    waiting = (s["frontier"] or 0) + s["in_flight"] + int(facts.get("retries_waiting", 0))
    since = facts.get("last_fetch_at") or started
    if waiting:
        quiet = time.monotonic() - since
        if quiet >= cfg.health_stall_seconds:
            return "degraded", (f"no progress: no fetch ended for {quiet:.0f} s while {waiting} requests wait "
                                f"(frontier {s['frontier']}, in flight {s['in_flight']}, "
                                f"retries {facts.get('retries_waiting', 0)})")
    return "ok", ""


class _Collector:
    """A prometheus_client collector over :func:`snapshot` (read at each scrape)."""

    def __init__(self, crawler: Crawler, started: float):
        self.crawler, self.started = crawler, started

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        s = snapshot(self.crawler)
        p = "afm_crawler_"

        def counter(name: str, doc: str, value: float) -> Any:
            return CounterMetricFamily(p + name, doc, value=value)

        def labelled(name: str, doc: str, label: str, values: dict[str, int]) -> Any:
            family = CounterMetricFamily(p + name, doc, labels=[label])
            for key, value in sorted(values.items()):
                family.add_metric([key], value)
            return family

        yield counter("pages", "Pages fetched and written to WARC", s["pages"])
        yield counter("bytes", "Response body bytes fetched", s["bytes"])
        yield labelled("responses", "Responses by HTTP status", "status", s["status"])
        yield counter("robots_denied", "Requests refused by robots.txt before fetching", s["robots_denied"])
        yield counter("robots_fetches", "robots.txt files fetched", s["robots_fetches"])
        yield counter("robots_unreachable", "robots.txt fetches that failed (host treated per RFC 9309)",
                      s["robots_unreachable"])
        yield counter("tdmrep_fetches", "tdmrep.json files fetched", s["tdmrep_fetches"])
        yield labelled("training_use", "Pages by recorded training use (opt-outs and why)", "use", s["training"])
        yield labelled("skipped", "URLs not scheduled, by reason", "reason", s["skipped"])
        yield labelled("refused", "Responses refused, by reason", "reason", s["refused"])
        yield labelled("outcomes", "Requests that ended without a page, by kind", "kind", s["outcomes"])
        yield labelled("errors", "Errors by kind: fetches that failed after their retries (timeout, dns_error, "
                       "private_address, robots_unavailable, http_503, error_<exception>), spider exceptions, "
                       "logged errors", "kind", s["errors"])
        yield labelled("retries", "Fetches tried again after a backoff, by the failure's kind", "kind", s["retries"])
        reasons = GaugeMetricFamily(p + "last_error_timestamp_seconds", "When each kind of error last happened, "
                                    "with its reason and URL (one series per kind)", labels=["kind", "reason", "url"])
        for kind, last in sorted(s["last_errors"].items()):
            reasons.add_metric([kind, str(last.get("reason", ""))[:200], str(last.get("url", ""))[:200]],
                               float(last.get("at", 0)))
        yield reasons
        health, _ = judge_health(self.crawler, self.started, s)
        yield GaugeMetricFamily(p + "degraded", "1 while /healthz says degraded (the reason is in /healthz)",
                                value=int(health == "degraded"))
        yield counter("scheduled", "Requests this process scheduled", s["scheduled"])
        yield counter("warc_files_closed", "WARC files closed (complete, indexed)", s["warc_files_closed"])
        yield GaugeMetricFamily(p + "frontier_requests", "Requests waiting in the frontier (shared with "
                                "Redis)", value=-1 if s["frontier"] is None else s["frontier"])
        yield GaugeMetricFamily(p + "in_flight_requests", "Requests being downloaded", value=s["in_flight"])
        yield GaugeMetricFamily(p + "up", "1 while the crawl engine runs", value=int(s["running"]))
        yield GaugeMetricFamily(p + "uptime_seconds", "Seconds since the crawl started",
                                value=time.monotonic() - self.started)


def render_metrics(crawler: Crawler, started: float) -> bytes:
    """The ``/metrics`` body: this crawler's numbers and the process's (memory, CPU)."""
    from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

    registry = CollectorRegistry()
    registry.register(_Collector(crawler, started))  # type: ignore[arg-type]
    ProcessCollector(registry=registry)
    return generate_latest(registry)


# ----------------------------------------------------------------------------- the server


class MetricsEndpoint(CrawlerComponent):
    """The extension (see the module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.port = metrics_port(self.cfg)
        self.started = time.monotonic()
        self.listening: Any = None

    @on(signals.spider_opened)
    def opened(self, spider: Any) -> None:
        if self.port is None:
            return
        from twisted.internet import reactor
        from twisted.internet.error import CannotListenError
        from twisted.web.server import Site

        try:
            self.listening = reactor.listenTCP(self.port, Site(_Root(self)), interface=self.cfg.metrics_host)
        except CannotListenError as exc:
            raise RuntimeError(
                f"metrics endpoint: cannot listen on {self.cfg.metrics_host}:{self.port} ({exc.socketError}); "
                "another daemon uses it? give each its own --set metrics_port=N (0 = any free port)") from exc
        port = self.listening.getHost().port
        path = endpoint_file(self.cfg.out_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"host": self.cfg.metrics_host, "port": port, "pid": os.getpid(),
                                   "daemon": daemon_id(), "started_at": time.time()}))
        tmp.replace(path)

    @on(signals.spider_closed)
    def closed(self, spider: Any) -> None:
        if self.listening is not None:
            self.listening.stopListening()
            endpoint_file(self.cfg.out_dir).unlink(missing_ok=True)

    def health(self) -> tuple[int, dict[str, Any]]:
        """``/healthz``: 200 while the engine runs, "ok" or "degraded" with the reason;
        503 "stopping" once it stops."""
        s = snapshot(self.crawler)
        status, reason = judge_health(self.crawler, self.started, s)
        body = {"status": status, "daemon": daemon_id(),
                "uptime_s": round(time.monotonic() - self.started, 1), "pages": s["pages"],
                "frontier": s["frontier"], "in_flight": s["in_flight"], "errors": s["errors"]}
        if reason:
            body["reason"] = reason
        return (200 if s["running"] else 503), body


class _Root(Resource):
    isLeaf = True

    def __init__(self, endpoint: MetricsEndpoint):
        super().__init__()
        self.endpoint = endpoint

    def render_GET(self, request: Any) -> bytes:  # noqa: N802 - twisted's name
        path = request.path.decode("ascii", "replace").rstrip("/") or "/"
        if path == "/metrics":
            request.setHeader(b"Content-Type", b"text/plain; version=0.0.4; charset=utf-8")
            return render_metrics(self.endpoint.crawler, self.endpoint.started)
        if path == "/healthz":
            code, body = self.endpoint.health()
            request.setResponseCode(code)
            request.setHeader(b"Content-Type", b"application/json")
            return json.dumps(body).encode()
        request.setResponseCode(404)
        return b"afm crawler: /metrics (Prometheus) or /healthz\n"


__all__ = ["DEFAULT_DAEMON_PORT", "HEARTBEAT_KEY", "MetricsEndpoint", "daemon_id", "endpoint_file",
           "judge_health", "metrics_port", "render_metrics", "snapshot"]
