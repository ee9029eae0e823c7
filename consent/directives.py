"""What a page says about itself: ``X-Robots-Tag`` and meta robots directives, TDMRep's
``tdm-reservation`` header and meta, and the usage-preference response fields
(``Content-Usage``, ``Content-Signal``), read the same way by the crawler and by curate.

Headers are read through :class:`afm.headers.Headers`, so a field sent as several field
lines, or as one line a proxy combined (RFC 9110 section 5.3: the same thing), reads the
same: ``X-Robots-Tag: noai`` then ``X-Robots-Tag: noarchive`` is ``noai, noarchive``;
``tdm-reservation: 1, 1`` is two values 1. TDMRep defines one value per field; when a
response carries several, a valid ``1`` among them reserves (an opt-out found is never
outvoted by a repeat), ``0`` applies only when no valid value is ``1``.

Why a scanner instead of an HTML parser: the crawler and the curate stage both need only
``<meta name=... content=...>`` tags, on every page, before any extraction; a regular
expression over the raw bytes finds them in linear time in whatever state the HTML is.

Directives may be scoped to a product token (``X-Robots-Tag: afmbot: noindex``, ``<meta
name="afmbot" ...>``): a scoped value applies only when its token is one of ``agents``
(the crawl token, the training tokens); unscoped ones apply to everyone. In one field line
a scope covers the directives after it (``googlebot: noindex, nofollow``); since a proxy
may have joined an unscoped line onto a scoped one, a training opt-out (``noai``,
``noimageai``) after another agent's scope is read as unscoped: never a silent allow.
``none`` means ``noindex, nofollow``. ``noai`` / ``noimageai`` are the de-facto opt-outs
of AI training. Their only definition is DeviantArt's (2022-11), which asks that content
carrying *either* directive be left out of AI training data sets (``noimageai`` naming the
page's images); where a text says so we err toward opting out, so both are honoured by
default, on text pages too (``directives`` in :class:`~afm.consent.training.ConsentSettings`).

Whether a response is HTML (so its metas are read) is one rule for the crawler and curate,
:func:`is_html`: its Content-Type, or, with none, the WHATWG MIME Sniffing standard's
section 7.1 (an HTML5 page need not have an ``<html>`` tag: ``<!doctype html>`` or
``<title>`` first is HTML).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from afm.consent.tdmrep import HEADER, POLICY_HEADER, TdmVerdict, reservation_value
from afm.headers import Headers, list_members

KNOWN = ("noindex", "nofollow", "noai", "noimageai")
TRAINING_DIRECTIVES = ("noai", "noimageai")
CONTENT_USAGE_HEADER = "Content-Usage"
CONTENT_SIGNAL_HEADER = "Content-Signal"
# Directives whose own value follows a colon: "max-snippet: 20" is not a scope.
_VALUE_DIRECTIVES = {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
_META = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE)
_ATTR = re.compile(r"""([A-Za-z_:][-A-Za-z0-9_:.]*)\s*(?:=\s*("[^"]*"|'[^']*'|[^\s"'=<>`]+))?""")
_SCOPED = re.compile(r"\s*([A-Za-z_-]+)\s*:(.*)", re.DOTALL)


# WHATWG MIME Sniffing 7.1 "identifying a resource with an unknown MIME type": the HTML
# patterns, matched case-insensitively after leading whitespace bytes, each followed by a
# tag-terminating byte (space or ">").
_HTML_PATTERNS = (b"<!doctype html", b"<html", b"<head", b"<script", b"<iframe", b"<h1",
                  b"<div", b"<font", b"<table", b"<a", b"<style", b"<title", b"<b",
                  b"<body", b"<br", b"<p", b"<!--")
_SNIFF_WHITESPACE = b"\t\n\x0c\r "
_RESOURCE_HEADER = 1445  # MIME Sniffing 5.2: the bytes a sniffer reads
_UNKNOWN_TYPES = {"", "unknown/unknown", "application/unknown", "*/*"}


def sniffs_as_html(body: bytes) -> bool:
    """MIME Sniffing 7.1's HTML rule: after leading whitespace the body starts with one of
    its 17 HTML patterns (``<!DOCTYPE HTML``, ``<HTML``, ``<HEAD``, ``<SCRIPT``, ``<P``,
    ``<!--``, ...) and a space or ``>``. One choice of ours: a UTF-8 byte order mark is
    skipped first (the standard would call the page text/plain and its ``noai`` meta
    unread; an opt-out is not lost over three bytes)."""
    head = body[:_RESOURCE_HEADER]
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    head = head.lstrip(_SNIFF_WHITESPACE).lower()
    for pattern in _HTML_PATTERNS:
        if head.startswith(pattern) and head[len(pattern):len(pattern) + 1] in (b" ", b">"):
            return True
    return False


def is_html(content_type: str | None, body: bytes | None) -> bool:
    """Whether a response is HTML, so its ``<meta>`` directives are read: the one rule of
    the crawler and curate. A declared HTML type (``text/html``, ``application/xhtml+xml``,
    any type naming html) is; a response with no Content-Type, one that does not parse as
    ``type/subtype``, or ``unknown/unknown`` / ``application/unknown`` / ``*/*`` is sniffed
    as the MIME Sniffing standard does (:func:`sniffs_as_html`: section 7.1, which these
    "undefined or unknown" types are sent to), or with an ``<html`` tag in its first KiB;
    any other declared type is not."""
    essence = (content_type or "").split(";", 1)[0].strip().lower()
    if "html" in essence:
        return True
    if essence in _UNKNOWN_TYPES or essence.count("/") != 1 or essence.startswith("/") \
            or essence.endswith("/"):
        body = body or b""
        # Beside the standard's rule, as before it: an ``<html`` tag in the first KiB
        # (XHTML with an XML prolog, which the standard sniffs as XML). Reading a page's
        # own metas can only add an opt-out, never remove one.
        return sniffs_as_html(body) or b"<html" in body[:1024].lower()
    return False


def _named(directive: str) -> set[str]:
    token = directive.strip().lower()
    if token == "none":
        return {"noindex", "nofollow"}
    return {token} if token in KNOWN else set()


def robots_directives(values: Iterable[str], agents: str | Iterable[str]) -> set[str]:
    """The known directives (``noindex``, ``nofollow``, ``noai``, ``noimageai``) in
    ``X-Robots-Tag`` field lines / meta robots contents ``values`` that apply to
    ``agents`` (see the module docstring for scopes)."""
    tokens = {agents.lower()} if isinstance(agents, str) else {a.lower() for a in agents}
    out: set[str] = set()
    for value in values:
        applies = True  # a field line starts unscoped
        for member in list_members(value.replace(";", ",")):
            scoped = _SCOPED.fullmatch(member)
            if scoped and scoped.group(1).lower() not in _VALUE_DIRECTIVES:
                applies = scoped.group(1).lower() in tokens
                if applies:
                    out |= _named(scoped.group(2))
                continue
            names = _named(member)
            out |= names if applies else names & set(TRAINING_DIRECTIVES)
    return out


def meta_tags(body: bytes) -> list[tuple[str, str]]:
    """``(name lower-cased, content)`` of every ``<meta name=... content=...>`` tag."""
    out = []
    for match in _META.finditer(body):
        attrs: dict[str, str] = {}
        for name, value in _ATTR.findall(match.group(0)[5:].decode("latin-1")):
            if value[:1] in ("'", '"'):
                value = value[1:-1]
            attrs.setdefault(name.lower(), html.unescape(value))
        if "name" in attrs and "content" in attrs:
            out.append((attrs["name"].strip().lower(), attrs["content"]))
    return out


@dataclass
class PageSignals:
    """A page's own training-use signals: directives by where they were found, the
    TDMRep values of its header and of its HTML, and its usage-preference fields (the
    combined field value, RFC 9110 5.3; None when absent)."""

    directives: dict[str, str] = field(default_factory=dict)  # directive -> first source
    tdm_header: TdmVerdict | None = None
    tdm_meta: TdmVerdict | None = None
    content_usage: str | None = None
    content_signal: str | None = None


def header_values(headers: Any, name: str) -> list[str]:
    """Every field line of ``name`` (folds undone), whatever shape ``headers`` has."""
    return Headers.of(headers).lines(name)


def tdm_value(values: Iterable[str]) -> int | None:
    """The reservation of several TDMRep values (field lines, list members, metas):
    1 when any valid one is 1, else 0 when any is 0, else None (unset)."""
    parsed = {reservation_value(v) for v in values} - {None}
    if 1 in parsed:
        return 1
    return 0 if 0 in parsed else None


def page_signals(headers: Any, body: bytes | None, is_html: bool,
                 agents: Iterable[str]) -> PageSignals:
    """Directives of ``X-Robots-Tag`` and meta robots (or meta named after one of
    ``agents``), TDMRep's header and meta, and the ``Content-Usage`` / ``Content-Signal``
    response fields of one response. ``headers``: :class:`afm.headers.Headers` or any
    shape it reads (pairs, a dict)."""
    fields = Headers.of(headers)
    agents = tuple(a for a in agents if a)
    names = {"robots", *(a.lower() for a in agents)}
    out = PageSignals()
    for directive in sorted(robots_directives(fields.lines("X-Robots-Tag"), agents)):
        out.directives.setdefault(directive, "X-Robots-Tag header")
    members = fields.members(HEADER)
    tdm = tdm_value(members)
    if tdm is not None:
        policy = fields.get(POLICY_HEADER)
        out.tdm_header = TdmVerdict(tdm, "tdm-reservation header", policy,
                                    f"{HEADER}: {fields.combined(HEADER)}")
    out.content_usage = fields.combined(CONTENT_USAGE_HEADER)
    out.content_signal = fields.combined(CONTENT_SIGNAL_HEADER)
    if is_html and body:
        metas = meta_tags(body)
        robots = [content for name, content in metas if name in names]
        for directive in sorted(robots_directives(robots, agents)):
            out.directives.setdefault(directive, "meta robots")
        contents = [m for name, content in metas if name == HEADER for m in list_members(content)]
        value = tdm_value(contents)
        if value is not None:
            policy = next((c for n, c in metas if n == POLICY_HEADER), None)
            out.tdm_meta = TdmVerdict(value, "tdm-reservation meta", policy,
                                      f'<meta name="{HEADER}" content="{value}">')
    return out


__all__ = ["CONTENT_SIGNAL_HEADER", "CONTENT_USAGE_HEADER", "KNOWN", "TRAINING_DIRECTIVES",
           "PageSignals", "header_values", "is_html", "meta_tags", "page_signals",
           "robots_directives", "sniffs_as_html", "tdm_value"]
