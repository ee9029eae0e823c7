"""What a fetched page says about itself, read the same way by the Scrapy daemon and the
batch fetcher: its own crawl directives (``noindex``: not stored; ``nofollow``: links not
followed) and its training-use decision with the WARC fields that record it.

The readers are consent's (:mod:`afm.consent.directives`, :mod:`afm.consent.training`),
the ones curate reads stored pages with; this module only puts them together for a
response in hand."""

from __future__ import annotations

import json
from typing import Any

from afm.consent.directives import header_values, is_html, meta_tags, robots_directives
from afm.consent.directives import page_signals as read_page_signals
from afm.consent.robots import RobotsRules
from afm.consent.tdmrep import TdmFile
from afm.consent.training import FileContext, TrainingDecision, TrainingPolicy
from afm.crawler.storage.warc import TRAINING_EVIDENCE_HEADER, TRAINING_USE_HEADER

OWN_DIRECTIVES = frozenset({"noindex", "nofollow"})


def page_is_html(headers: list[tuple[str, str]], body: bytes) -> bool:
    """:func:`afm.consent.directives.is_html` of a response: its Content-Type, or with
    none the MIME Sniffing standard's HTML rule (curate reads stored pages by it too)."""
    content_type = next((v for k, v in headers if k.lower() == "content-type"), None)
    return is_html(content_type, body)


def own_directives(headers: list[tuple[str, str]], body: bytes, html: bool, agent: str) -> set[str]:
    """``noindex`` / ``nofollow`` for ``agent`` from ``X-Robots-Tag`` and, in HTML, meta
    robots (or a meta named after ``agent``). A value may be scoped (``afmbot: noindex``);
    unscoped values apply to every agent; ``none`` means both. The training-use
    directives (``noai``) are read by :func:`training_fields` for every token."""
    values = header_values(headers, "X-Robots-Tag")
    if html:
        values += [content for name, content in meta_tags(body) if name in ("robots", agent.lower())]
    return robots_directives(values, agent) & OWN_DIRECTIVES


def training_fields(policy: TrainingPolicy, url: str, headers: list[tuple[str, str]], body: bytes,
                    html: bool, fetched_at: Any, *, robots: RobotsRules | None = None,
                    robots_file: FileContext | None = None, tdm: TdmFile | None = None,
                    tdm_file: FileContext | None = None) -> tuple[TrainingDecision, dict[str, str]]:
    """The page's training-use decision and the WARC fields that record it:
    ``AFM-Training-Use`` (``allowed`` / ``optout``) and, for an opt-out,
    ``AFM-Training-Evidence`` (JSON: each signal, where it was found, the rule or value,
    the fetch time)."""
    signals = read_page_signals(headers, body, html, policy.agents)
    decision = policy.decide(url, signals=signals, fetched_at=fetched_at, robots=robots,
                             robots_file=robots_file, tdm=tdm, tdm_file=tdm_file)
    fields = {TRAINING_USE_HEADER: decision.use}
    if decision.optout:
        fields[TRAINING_EVIDENCE_HEADER] = json.dumps(decision.evidence, sort_keys=True)
    return decision, fields


__all__ = ["OWN_DIRECTIVES", "own_directives", "page_is_html", "training_fields"]
