"""Limits on what a fetch accepts, and how redirects and retries go: one set of numbers
and rules for the Scrapy daemon and the batch fetcher.

* **content type**: a response whose ``Content-Type`` names a media type outside the
  crawl's allow-list (``content_types``) is refused as soon as its headers arrive;
* **size**: a declared ``Content-Length`` over ``max_response_bytes`` is refused at the
  headers, a body that grows past it while read is cut off and refused;
* **decompression**: a compressed body may decompress to at most
  ``max_compression_ratio`` x its wire size (never less than 1 MiB, never more than the
  size cap), so bombs that stay under the size cap are refused too;
* **redirects**: at most :data:`MAX_REDIRECTS` hops (RFC 9309's five for robots.txt, and
  the crawler's for pages), each target checked against its own host's robots.txt;
* **retries**: a transient failure (a network error, a timeout, one of
  :data:`RETRY_HTTP_CODES`) is retried ``retry_times`` times, waiting
  :func:`retry_backoff` before each; nothing is retried forever.
"""

from __future__ import annotations

#: Redirect hops followed for one URL (Scrapy's REDIRECT_MAX_TIMES is set from it).
MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Statuses worth a retry (Scrapy's default RETRY_HTTP_CODES): overload and gateways.
RETRY_HTTP_CODES = (500, 502, 503, 504, 522, 524, 408, 429)
#: The least a compressed body may be allowed to decompress to (tables compress well).
MIN_DECOMPRESSED_CAP = 1 << 20


def media_type(value: str | bytes | None) -> str:
    """``text/html`` of ``text/html; charset=utf-8`` (lower case; "" when absent)."""
    if not value:
        return ""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return value.split(";", 1)[0].strip().lower()


def header_refusal(content_type: str | bytes | None, declared_length: int | None,
                   allowed: set[str] | frozenset[str], max_bytes: int) -> str | None:
    """Why a response is refused from its headers alone: ``content_type <type>`` or
    ``oversize <bytes>``, else None. ``allowed``: lower-case media types (empty: any)."""
    media = media_type(content_type)
    if media and allowed and media not in allowed:
        return f"content_type {media}"
    if declared_length and declared_length > 0 and max_bytes and declared_length > max_bytes:
        return f"oversize {declared_length}"
    return None


def decompression_cap(wire_bytes: int, ratio: float, max_bytes: int) -> int:
    """The most a compressed body of ``wire_bytes`` may decompress to (see the module
    docstring); ``ratio`` <= 0 turns the ratio rule off."""
    if ratio <= 0:
        return max_bytes
    return min(max_bytes, max(int(wire_bytes * ratio), MIN_DECOMPRESSED_CAP))


def is_transient_status(status: int) -> bool:
    return status in RETRY_HTTP_CODES


def retry_backoff(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Seconds to wait before retry number ``attempt`` (1, 2, ...): doubling from
    ``base``, at most ``cap``."""
    return min(cap, base * (2 ** max(0, attempt - 1)))


__all__ = ["MAX_REDIRECTS", "MIN_DECOMPRESSED_CAP", "REDIRECT_STATUSES", "RETRY_HTTP_CODES",
           "decompression_cap", "header_refusal", "is_transient_status", "media_type",
           "retry_backoff"]
