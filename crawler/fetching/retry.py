"""What a failed fetch means: try again soon, try again on the next run, or give up.

A URL that produced no page ends with an *outcome* (``state/outcomes.jsonl``, kind and
reason). Which outcomes may heal decides what the crawler does next:

* **transient** (the site's fault, may pass): a timeout, a refused or lost connection, a
  DNS failure (Scrapy's own ``RETRY_EXCEPTIONS``), an HTTP status of ``RETRY_HTTP_CODES``
  (429, 5xx). Retried in this run after a backoff (``retry_backoff_seconds``, doubled each
  time, at most ``retry_backoff_max_seconds``) up to ``retry_times``, then recorded with
  its reason; fetched again on the next run.
* **robots_unavailable**: robots.txt answered 5xx / 429 or not at all, so RFC 9309 says
  "disallow all" until it can be fetched. Not retried within the run (the host's rules
  are cached for ``robots_retry_seconds``), fetched again on the next run.
* **fixable by configuration**: ``private_address`` (``allow_private``), fetched again on
  a run whose config allows it.
* **final**: robots.txt disallows it, ``noindex``, a refused content type, size or
  decompression bomb, a malformed request.

Any failed URL seeded again (``--seeds``, the daemon's inbox) is queued again: seeding it
is the operator saying "try this".
"""

from __future__ import annotations

from typing import Any

from scrapy.utils.misc import load_object

# Outcome kinds that are a fetch that failed (the health check and the error counts);
# the others are decisions (robots.txt, noindex, refusals) or bookkeeping.
NOT_FAILURES = ("robots_denied", "noindex", "requeued", "ignored")
ROBOTS_UNAVAILABLE = "robots_unavailable"
PRIVATE_ADDRESS = "private_address"


def is_failure(kind: str) -> bool:
    """Whether outcome ``kind`` is a fetch that failed (not a decision not to keep a page)."""
    return not (kind in NOT_FAILURES or kind.startswith("refused_"))


class RetryPolicy:
    """The crawl's retry rules (see the module docstring), from its config and Scrapy's
    ``RETRY_EXCEPTIONS`` / ``RETRY_HTTP_CODES`` settings."""

    def __init__(self, cfg: Any, settings: Any) -> None:
        self.times = max(0, int(cfg.retry_times))
        self.first = max(0.0, float(cfg.retry_backoff_seconds))
        self.cap = max(self.first, float(cfg.retry_backoff_max_seconds))
        self.allow_private = bool(cfg.allow_private)
        self.exceptions = tuple(load_object(x) if isinstance(x, str) else x
                                for x in settings.getlist("RETRY_EXCEPTIONS"))
        self.http_codes = frozenset(int(c) for c in settings.getlist("RETRY_HTTP_CODES"))

    def transient_failure(self, exc: BaseException, kind: str) -> bool:
        """Whether a failed request of ``kind`` (raising ``exc``) may succeed later."""
        if kind in (PRIVATE_ADDRESS, ROBOTS_UNAVAILABLE) or kind.startswith("refused_"):
            return kind == ROBOTS_UNAVAILABLE
        return isinstance(exc, self.exceptions) or kind in ("timeout", "dns_error")

    def transient_status(self, status: int) -> bool:
        return status in self.http_codes

    def retry_now(self, kind: str, attempt: int) -> bool:
        """Whether a transient failure on try ``attempt`` (0 = first) is tried again in
        this run (robots.txt's unavailability is not: its rules are cached)."""
        return kind != ROBOTS_UNAVAILABLE and attempt < self.times

    def backoff(self, attempt: int) -> float:
        """Seconds before try ``attempt + 1``: the first wait, doubled per try, capped."""
        return min(self.cap, self.first * (2 ** attempt))

    def requeue_on_start(self, row: dict[str, Any]) -> bool:
        """Whether a URL whose last outcome is ``row`` is fetched again by this run."""
        kind = row.get("o", "")
        if row.get("t"):  # recorded as transient
            return True
        return kind == PRIVATE_ADDRESS and self.allow_private


__all__ = ["NOT_FAILURES", "PRIVATE_ADDRESS", "ROBOTS_UNAVAILABLE", "RetryPolicy", "is_failure"]
