"""Asking a running crawler what it is doing: the client side of :mod:`afm.crawler.operations.metrics`.

``afm crawler status`` reads a daemon's ``/healthz`` and ``/metrics`` (found through
``<out>/state/endpoint.json``, or given as a URL), or a shared Redis frontier: the
queue's size, the URLs seen, and the heartbeat of every daemon that shares it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afm.crawler.operations.metrics import HEARTBEAT_KEY, endpoint_file


class StatusError(RuntimeError):
    """No running crawler could be asked (the message says what was tried)."""


@dataclass
class DaemonStatus:
    url: str
    healthy: bool  # running and "ok"
    health: dict[str, Any]
    metrics: dict[str, float] = field(default_factory=dict)  # name{labels} -> value
    up: bool = False  # running: "ok" or "degraded" (see health["reason"])
    last_errors: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> reason, url, at


def endpoint_url(out_dir: str | Path) -> str:
    """The base URL of the daemon writing to ``out_dir``."""
    path = endpoint_file(out_dir)
    if not path.exists():
        raise StatusError(f"no running crawler writes to {out_dir} (no {path}: the daemon is not "
                          "running, or its metrics endpoint is off: metrics_port)")
    info = json.loads(path.read_text())
    return f"http://{info['host']}:{info['port']}"


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - http(s) only, ours
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def daemon_status(url: str, timeout: float = 5.0, with_metrics: bool = True) -> DaemonStatus:
    """``/healthz`` (and ``/metrics``) of the daemon at ``url``."""
    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise StatusError(f"{url}: expected http://HOST:PORT")
    try:
        code, body = _get(base + "/healthz", timeout)
    except (urllib.error.URLError, OSError) as exc:
        raise StatusError(f"no crawler answers at {base} ({getattr(exc, 'reason', exc)}): stopped, "
                          "or another port (see <out>/state/endpoint.json)") from exc
    try:
        health = json.loads(body or b"{}")
    except ValueError:
        health = {"body": body[:200].decode("utf-8", "replace")}
    status = DaemonStatus(base, code == 200 and health.get("status") == "ok", health, up=code == 200)
    if with_metrics:
        _, text = _get(base + "/metrics", timeout)
        status.metrics = parse_metrics(text.decode("utf-8", "replace"))
        status.last_errors = last_errors(text.decode("utf-8", "replace"))
    return status


def last_errors(text: str) -> dict[str, dict[str, Any]]:
    """The last error of each kind (reason, URL, time) from a ``/metrics`` body."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "afm_crawler_last_error_timestamp_seconds":
            for sample in family.samples:
                out[sample.labels.get("kind", "?")] = {"reason": sample.labels.get("reason", ""),
                                                       "url": sample.labels.get("url", ""), "at": sample.value}
    return out


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> ``{"name{label=value}": value}`` (prometheus_client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return out


def wait_up(url_or_out: str, seconds: float, poll: float = 0.5) -> DaemonStatus:
    """Poll until the daemon (a URL, or the output directory it writes) is up: its
    ``/healthz`` answers 200, "ok" or "degraded". Before the daemon has written its
    endpoint file (a slow start) that file is waited for too, so a start check run
    beside the daemon's start succeeds as soon as the daemon serves."""
    deadline = time.monotonic() + seconds
    last: Exception | None = None
    while True:
        try:
            url = url_or_out if url_or_out.startswith(("http://", "https://")) else endpoint_url(url_or_out)
            status = daemon_status(url, timeout=min(5.0, max(0.5, deadline - time.monotonic())),
                                   with_metrics=False)
            if status.up:
                return status
            last = StatusError(f"{url}: {status.health}")
        except (StatusError, ValueError, KeyError, OSError) as exc:  # a file half there reads as not yet
            last = exc
        if time.monotonic() >= deadline:
            raise StatusError(f"not up within {seconds:g} s: {last}")
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))


def frontier_status(redis_url: str, key: str, stale_after_s: float = 300.0) -> dict[str, Any]:
    """The shared frontier: requests queued, URLs seen, and each daemon's last heartbeat."""
    import redis

    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    try:
        queued = client.zcard(f"{key}:requests")
        seen = client.scard(f"{key}:dupefilter")
        beats = client.hgetall(HEARTBEAT_KEY.format(key=key))
    except redis.exceptions.RedisError as exc:
        raise StatusError(f"cannot read the frontier at {redis_url}: {exc}") from exc
    now = time.time()
    daemons = []
    for name, raw in sorted(beats.items()):
        try:
            beat = json.loads(raw)
        except ValueError:
            continue
        age = now - float(beat.get("at", 0))
        daemons.append({"daemon": name.decode() if isinstance(name, bytes) else str(name),
                        "pages": beat.get("pages", 0), "bytes": beat.get("bytes", 0),
                        "in_flight": beat.get("in_flight", 0), "out_dir": beat.get("out_dir", ""),
                        "age_s": round(age, 1), "stale": age > stale_after_s})
    return {"redis_url": redis_url, "key": key, "queued": int(queued), "seen": int(seen),
            "daemons": daemons}


__all__ = ["DaemonStatus", "StatusError", "daemon_status", "endpoint_url", "frontier_status", "last_errors",
           "parse_metrics", "wait_up"]
