"""W3C TDM Reservation Protocol (TDMRep), decided the same way by the crawler and curate.

A publisher reserves text-and-data-mining rights (the EU DSM Directive's Article 4
opt-out) in three places, read here in the protocol's processing order:

1. ``/.well-known/tdmrep.json`` on the origin: a JSON array of rules ``{"location",
   "tdm-reservation", "tdm-policy"?}``. Rules are tried in order and the first whose
   ``location`` matches the URL's path decides; no match leaves the value unset.
   ``location`` uses robots.txt's notation (``*``, a final ``$``, prefix match), so it is
   matched with the robots.txt matcher (:class:`afm.consent.robots.PathPattern`).
2. The ``tdm-reservation`` (and ``tdm-policy``) HTTP response header: supersedes the file.
3. ``<meta name="tdm-reservation">`` in HTML: supersedes both.

The absence of a value never resets one found earlier; ``1`` reserves, ``0`` does not,
any other value is a protocol error and counts as unset. Why not a library: no maintained
Python implementation of TDMRep exists, and the protocol is these few rules.

The file is fetched once per origin and cached like robots.txt, with robots.txt's error
rules (RFC 9309 2.3.1, see :func:`tdm_from_fetch`): a 4xx means no file; a 5xx, 429 or
no response means "reserved" until it can be fetched. A 2xx body that is not a JSON array
is, in the protocol's words, a server that does not implement it: unset, recorded as
``invalid`` (soft-404 pages answer 200 with HTML for any path).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from afm.consent.robots import (
    MAX_CACHE_SECONDS,
    MAX_ROBOTS_BYTES,
    RETRY_UNREACHABLE_SECONDS,
    Expiring,
    PathPattern,
    match_form,
    path_of,
    url_forms,
)

WELL_KNOWN_PATH = "/.well-known/tdmrep.json"
HEADER = "tdm-reservation"
POLICY_HEADER = "tdm-policy"


def reservation_value(value: Any) -> int | None:
    """``1`` or ``0``; anything else (a protocol error, or absence) is None (unset)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    return None


@dataclass(frozen=True)
class TdmRule:
    """One rule of a ``tdmrep.json`` file (``index``: its place in the array, from 0)."""

    location: str
    reservation: int | None
    policy: str | None
    index: int
    _pattern: PathPattern = field(compare=False, repr=False)

    def matches(self, forms: str | tuple[str, ...]) -> bool:
        return self._pattern.matches(forms)


class TdmRepError(ValueError):
    """A ``tdmrep.json`` body that is not a JSON array of rules."""


def parse_tdmrep(body: bytes | str) -> list[TdmRule]:
    """The rules of a ``tdmrep.json`` body, in order; raises :class:`TdmRepError` when it
    is not a JSON array. Rules without a string ``location`` are left out (it is
    mandatory); a rule whose ``tdm-reservation`` is not 0 or 1 is kept with ``None``."""
    if isinstance(body, bytes):
        body = body[:MAX_ROBOTS_BYTES].decode("utf-8", errors="replace")
    try:
        data = json.loads(body.lstrip("\ufeff"))
    except ValueError as exc:
        raise TdmRepError(f"not JSON: {exc}") from exc
    if not isinstance(data, list):
        raise TdmRepError(f"expected a JSON array of rules, got {type(data).__name__}")
    rules = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("location"), str):
            continue
        location = item["location"].strip()
        if not location:
            continue
        policy = item.get(POLICY_HEADER)
        rules.append(TdmRule(location, reservation_value(item.get(HEADER)),
                             policy if isinstance(policy, str) else None, i,
                             PathPattern(match_form(location))))
    return rules


@dataclass(frozen=True)
class TdmVerdict:
    """A reservation value and where it came from."""

    reservation: int  # 0 or 1
    source: str  # "tdmrep.json" | "tdm-reservation header" | "tdm-reservation meta"
    policy: str | None = None
    detail: str = ""  # e.g. the matching rule, or why the whole origin is reserved

    @property
    def reserved(self) -> bool:
        return self.reservation == 1


@dataclass
class TdmFile(Expiring):
    """What one fetch of ``/.well-known/tdmrep.json`` means for an origin.

    ``kind``: ``parsed`` (rules), ``absent`` (4xx: no file), ``invalid`` (2xx that is not
    a rules array: unset), ``reserved_all`` (5xx, 429, no response: reserved until it can
    be fetched)."""

    kind: str
    rules: list[TdmRule] = field(default_factory=list)
    status: int | None = None
    fetched_at: float = field(default_factory=time.time)
    ttl: float = MAX_CACHE_SECONDS
    reason: str = ""

    def decide(self, url: str) -> TdmVerdict | None:
        """The file's value for ``url``: None when it sets none."""
        if self.kind == "reserved_all":
            return TdmVerdict(1, "tdmrep.json", detail=f"unavailable ({self.reason}): reserved "
                              "until it can be fetched (robots.txt's rule for 5xx)")
        forms = url_forms(path_of(url))  # RFC 9309 2.2.2's comparison (TDMRep 3.1)
        for rule in self.rules:
            if rule.matches(forms):
                if rule.reservation is None:
                    return None  # the first match decides; a protocol error means unset
                return TdmVerdict(rule.reservation, "tdmrep.json", rule.policy,
                                  f"rule {rule.index}: location {rule.location}")
        return None


def tdm_from_fetch(
    status: int | None,
    body: bytes | None,
    *,
    error: str = "",
    fetched_at: float | None = None,
    cache_seconds: float = MAX_CACHE_SECONDS,
    retry_seconds: float = RETRY_UNREACHABLE_SECONDS,
) -> TdmFile:
    """The meaning of one ``tdmrep.json`` fetch, with robots.txt's error rules."""
    when = time.time() if fetched_at is None else fetched_at
    ttl = min(cache_seconds, MAX_CACHE_SECONDS)
    retry = min(retry_seconds, ttl)
    if status is None:
        return TdmFile("reserved_all", fetched_at=when, ttl=retry, reason=error or "unreachable")
    if 200 <= status < 300:
        try:
            rules = parse_tdmrep(body or b"")
        except TdmRepError as exc:
            return TdmFile("invalid", status=status, fetched_at=when, ttl=ttl, reason=str(exc))
        return TdmFile("parsed", rules, status=status, fetched_at=when, ttl=ttl)
    if status == 429 or status >= 500:
        return TdmFile("reserved_all", status=status, fetched_at=when, ttl=retry,
                       reason=f"HTTP {status}")
    return TdmFile("absent", status=status, fetched_at=when, ttl=ttl, reason=f"HTTP {status}")


def combine(file_value: TdmVerdict | None, header: TdmVerdict | None,
            meta: TdmVerdict | None) -> TdmVerdict | None:
    """The protocol's processing priority: the header supersedes the file, HTML metadata
    supersedes both, and an absent value never resets an earlier one."""
    for value in (meta, header, file_value):
        if value is not None:
            return value
    return None


__all__ = ["HEADER", "POLICY_HEADER", "WELL_KNOWN_PATH", "TdmFile", "TdmRepError", "TdmRule",
           "TdmVerdict", "combine", "parse_tdmrep", "reservation_value", "tdm_from_fetch"]
