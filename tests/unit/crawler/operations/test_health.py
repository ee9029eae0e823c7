"""Issue 56: /healthz says "degraded" with the reason when every recent fetch failed, or
when requests wait but no fetch has ended for ``health_stall_seconds``. The stall is
judged from a last fetch placed far enough in the past that no machine's slowness
changes the verdict (no sleeping, no clock race)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from afm.crawler.config import CrawlConfig
from afm.crawler.fetching.components import CONFIG_SETTING
from afm.crawler.operations.metrics import judge_health


def _crawler(facts: dict[str, Any]) -> SimpleNamespace:
    cfg = CrawlConfig(seeds=["http://example.com/"], health_stall_seconds=300)
    spider = SimpleNamespace(health_facts=lambda: facts)
    return SimpleNamespace(spider=spider, settings={CONFIG_SETTING: cfg})


def _snapshot(frontier: int = 0, in_flight: int = 0, last_errors: dict | None = None) -> dict[str, Any]:
    return {"running": True, "frontier": frontier, "in_flight": in_flight, "last_errors": last_errors or {}}


def test_waiting_requests_and_no_fetch_ended_for_the_stall_limit_is_degraded() -> None:
    now = time.monotonic()
    stalled = _crawler({"recent": [(True, "stored")], "last_fetch_at": now - 3600, "retries_waiting": 1})
    status, reason = judge_health(stalled, started=now - 7200, s=_snapshot(frontier=4, in_flight=2))
    assert status == "degraded" and reason.startswith("no progress: no fetch ended for")
    assert "7 requests wait" in reason and "frontier 4, in flight 2, retries 1" in reason


def test_a_crawl_with_nothing_waiting_or_a_recent_fetch_is_ok() -> None:
    now = time.monotonic()
    idle = _crawler({"recent": [(True, "stored")], "last_fetch_at": now - 3600})
    assert judge_health(idle, started=now - 7200, s=_snapshot()) == ("ok", "")  # done, not stalled
    busy = _crawler({"recent": [(True, "stored")], "last_fetch_at": now + 3600})  # a fetch "just" ended
    assert judge_health(busy, started=now, s=_snapshot(frontier=10)) == ("ok", "")


def test_every_recent_fetch_failed_is_degraded_with_the_kinds_and_the_last_reason() -> None:
    now = time.monotonic()
    failing = _crawler({"recent": [(False, "private_address"), (False, "http_503"), (False, "http_503")],
                        "last_fetch_at": now})
    errors = {"http_503": {"url": "http://h/", "reason": "HTTP 503 Service Unavailable"}}
    status, reason = judge_health(failing, started=now, s=_snapshot(frontier=1, last_errors=errors))
    assert status == "degraded" and "the last 3 fetches all failed (http_503 2, private_address 1)" in reason
    assert "last: http_503: HTTP 503 Service Unavailable (http://h/)" in reason
