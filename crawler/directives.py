"""What a page says about itself: ``X-Robots-Tag`` and meta robots directives, TDMRep's
``tdm-reservation`` header and meta, read the same way by the crawler and by curate.

Why a scanner instead of an HTML parser: the crawler and the curate stage both need only
``<meta name=... content=...>`` tags, on every page, before any extraction; a regular
expression over the raw bytes finds them in linear time in whatever state the HTML is.

Directives may be scoped to a product token (``X-Robots-Tag: afmbot: noindex``, ``<meta
name="afmbot" ...>``): a scoped value applies only when its token is one of ``agents``
(the crawl token, the training token); unscoped ones apply to everyone. ``none`` means
``noindex, nofollow``. ``noai`` / ``noimageai`` are the de-facto opt-outs of AI training
(text and images respectively).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from afm.crawler.tdmrep import HEADER, POLICY_HEADER, TdmVerdict, reservation_value

KNOWN = ("noindex", "nofollow", "noai", "noimageai")
_META = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE)
_ATTR = re.compile(r"""([A-Za-z_:][-A-Za-z0-9_:.]*)\s*(?:=\s*("[^"]*"|'[^']*'|[^\s"'=<>`]+))?""")
_SCOPE = re.compile(r"\s*[A-Za-z_-]+\s*")


def robots_directives(values: Iterable[str], agents: str | Iterable[str]) -> set[str]:
    """The known directives (``noindex``, ``nofollow``, ``noai``, ``noimageai``) in
    ``X-Robots-Tag`` / meta robots ``values`` that apply to ``agents``."""
    tokens = {agents.lower()} if isinstance(agents, str) else {a.lower() for a in agents}
    out: set[str] = set()
    for value in values:
        scope, _, rest = value.partition(":")
        if rest and _SCOPE.fullmatch(scope) and scope.strip().lower() != "unavailable_after":
            if scope.strip().lower() not in tokens:
                continue
            value = rest
        for token in value.lower().replace(";", ",").split(","):
            token = token.strip()
            if token == "none":
                out.update(("noindex", "nofollow"))
            elif token in KNOWN:
                out.add(token)
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
    """A page's own training-use signals: directives by where they were found, and the
    TDMRep values of its header and of its HTML."""

    directives: dict[str, str] = field(default_factory=dict)  # directive -> first source
    tdm_header: TdmVerdict | None = None
    tdm_meta: TdmVerdict | None = None


def header_values(headers: Iterable[tuple[str, str]], name: str) -> list[str]:
    name = name.lower()
    return [v for k, v in headers if k.lower() == name]


def page_signals(headers: Iterable[tuple[str, str]], body: bytes | None, is_html: bool,
                 agents: Iterable[str]) -> PageSignals:
    """Directives of ``X-Robots-Tag`` and meta robots (or meta named after one of
    ``agents``), and TDMRep's header and meta, of one response."""
    headers = list(headers)
    agents = tuple(a for a in agents if a)
    names = {"robots", *(a.lower() for a in agents)}
    out = PageSignals()
    for directive in sorted(robots_directives(header_values(headers, "X-Robots-Tag"), agents)):
        out.directives.setdefault(directive, "X-Robots-Tag header")
    tdm = _first_valid(header_values(headers, HEADER))
    if tdm is not None:
        policy = next(iter(header_values(headers, POLICY_HEADER)), None)
        out.tdm_header = TdmVerdict(tdm, "tdm-reservation header", policy, f"{HEADER}: {tdm}")
    if is_html and body:
        metas = meta_tags(body)
        robots = [content for name, content in metas if name in names]
        for directive in sorted(robots_directives(robots, agents)):
            out.directives.setdefault(directive, "meta robots")
        value = _first_valid(content for name, content in metas if name == HEADER)
        if value is not None:
            policy = next((c for n, c in metas if n == POLICY_HEADER), None)
            out.tdm_meta = TdmVerdict(value, "tdm-reservation meta", policy,
                                      f'<meta name="{HEADER}" content="{value}">')
    return out


def _first_valid(values: Iterable[str]) -> int | None:
    for value in values:
        parsed = reservation_value(value)
        if parsed is not None:
            return parsed
    return None


__all__ = ["KNOWN", "PageSignals", "header_values", "meta_tags", "page_signals",
           "robots_directives"]
