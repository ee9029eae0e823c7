"""URL canonicalisation (for de-duplication) and crawler-trap rules.

The crawler requests a URL as found (minus its fragment), but remembers it by its
canonical form, so ``HTTP://Example.com:80/a?b=1&a=2#x`` and ``http://example.com/a?a=2&b=1``
are one page. Trap rules are cheap string tests that end the classic infinite spaces:
ever-longer URLs, repeated path segments (``/a/b/a/b/a/b``) and calendars.
"""

from __future__ import annotations

import datetime as _dt
import re
from urllib.parse import urlsplit, urlunsplit

from w3lib.url import canonicalize_url, safe_url_string

from afm.consent.urls import origin_of, with_normalized_host

_DATE_SEGMENT = re.compile(r"^(\d{4}|\d{4}-\d{1,2}(-\d{1,2})?|\d{1,2})$")
_QUERY_YEAR = re.compile(r"(?:^|&)(?:year|date|cal|calendar|y)=(\d{4})", re.IGNORECASE)


def clean_url(url: str) -> str:
    """The URL to request: host as the URL Standard writes it (IDNA, case, default port:
    :func:`afm.consent.urls.with_normalized_host`, the one normalisation consent uses),
    path and query percent-encoded, fragment removed."""
    safe = safe_url_string(with_normalized_host(url.strip()))
    parts = urlsplit(safe)
    return urlunsplit((parts.scheme.lower(), parts.netloc, parts.path or "/", parts.query, ""))


def canonical_url(url: str) -> str:
    """The de-duplication key: clean URL with sorted query arguments."""
    return canonicalize_url(clean_url(url), keep_fragments=False)


def host_key(url: str) -> str:
    """``scheme://host[:port]`` - the unit robots.txt, budgets and politeness apply to:
    the origin as consent names it (:func:`afm.consent.urls.origin_of`), so the crawler's
    robots.txt, its snapshots and curate's lookups agree."""
    return origin_of(url)


def trap_reason(
    url: str,
    *,
    max_length: int = 2000,
    max_repeated_segments: int = 2,
    max_path_segments: int = 30,
    max_calendar_depth: int = 3,
) -> str | None:
    """Why ``url`` looks like a crawler trap, or None."""
    if len(url) > max_length:
        return "url_too_long"
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) > max_path_segments:
        return "too_many_segments"
    counts: dict[str, int] = {}
    for seg in segments:
        counts[seg] = counts.get(seg, 0) + 1
        if counts[seg] > max_repeated_segments:
            return "repeated_segments"
    dates = [seg for seg in segments if _DATE_SEGMENT.match(seg)]
    if len(dates) > max_calendar_depth:
        return "calendar"
    # Calendars link to "next month" forever; no real page is dated after next year.
    horizon = _dt.datetime.now(_dt.UTC).year + 1
    path_years = [int(seg[:4]) for seg in dates if len(seg) >= 4] if len(dates) >= 2 else []
    years = path_years + [int(y) for y in _QUERY_YEAR.findall(parts.query or "")]
    if any(horizon < y < 2200 for y in years):
        return "calendar"
    return None

