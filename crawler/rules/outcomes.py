"""The names of what became of a URL, shared by the Scrapy daemon and the batch fetcher
(the crawler's ``afm/outcome/<name>`` stats, ``afm fetch``'s per-URL outcomes).

A URL is either stored (``fetched``; its training use says whether it was opted out of
training) or it ends as one of the other names, with a reason where one helps."""

from __future__ import annotations

FETCHED = "fetched"  # a WARC record was written (any HTTP status, as the crawler stores them)
NOINDEX = "noindex"  # fetched, not stored: the page asked not to be indexed
ROBOTS_DENIED = "robots_denied"  # robots.txt disallows it (or the URL a redirect led to)
PRIVATE_ADDRESS = "private_address"
TIMEOUT = "timeout"
DNS_ERROR = "dns_error"
REDIRECT_LIMIT = "redirect_limit"  # more than MAX_REDIRECTS hops
REFUSED_PREFIX = "refused_"  # refused_content_type, refused_oversize, refused_decompression_bomb
ERROR_PREFIX = "error_"  # error_<exception type>: anything else
# Before any request (afm fetch's URL lists; the crawler counts these as afm/skipped/*):
BAD_URL = "bad_url"
SCHEME = "scheme"
DUPLICATE = "duplicate"
TRAP_PREFIX = "trap_"  # trap_url_too_long, trap_repeated_segments, ...


def refused(reason: str) -> str:
    """``refused_content_type`` of ``content_type text/css`` (a refusal's first word)."""
    return REFUSED_PREFIX + (reason.split()[0] if reason else "stopped")


__all__ = ["BAD_URL", "DNS_ERROR", "DUPLICATE", "ERROR_PREFIX", "FETCHED", "NOINDEX",
           "PRIVATE_ADDRESS", "REDIRECT_LIMIT", "REFUSED_PREFIX", "ROBOTS_DENIED", "SCHEME",
           "TIMEOUT", "TRAP_PREFIX", "refused"]
