"""The filter contract: a plain object with a config and a ``__call__(doc) -> Decision``.

Filters know nothing about Beam or Scrapy. A filter may keep a document, drop it with a
reason, or keep a modified copy (e.g. PII redacted), and always reports the signals it
computed so they can be stored with the record and shown by ``afm inspect``. What a
decision becomes (a kept document with the filter's signals, or a reject) is decided here
once, for document filters, page stages (crawl page -> document) and record stages (a
crawl page judged before extraction).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from afm.schema import Document, make_reject


@dataclass
class Decision:
    """What a filter decided about one document."""

    keep: bool
    reason: str | None = None  # short code when dropped, e.g. "profanity_ratio"
    signals: dict[str, float] = field(default_factory=dict)
    document: Document | None = None  # a modified copy to pass on; None = unchanged
    details: dict[str, Any] = field(default_factory=dict)  # extra JSON-able specifics

    @classmethod
    def drop(cls, reason: str, signals: dict[str, float] | None = None, **details: Any) -> Decision:
        return cls(keep=False, reason=reason, signals=signals or {}, details=details)


def explain(details: dict[str, Any] | str | None) -> str:
    """What decided a drop, in one line: the value or score and the threshold it was held
    to (``0.61 vs threshold 0.65``; a heuristic rule's bound reads ``>= 0.12``), then the
    other details (``language=en``, the rules that failed). ``details`` as a decision
    holds them or as a reject stores them (JSON)."""
    if isinstance(details, str):
        try:
            details = json.loads(details)
        except ValueError:
            return details
    d = dict(details) if isinstance(details, dict) else {}
    value = next((d.pop(k) for k in ("value", "score", "ratio", "char_ratio") if k in d), None)
    threshold = d.pop("threshold", None)
    rule = d.pop("rule", None)
    d.pop("failed", None)
    head = ""
    if isinstance(value, (int, float)) and threshold is not None:
        bound = str(threshold)
        bound = bound if bound[:1] in "<>i=o" else f"threshold {bound}"
        head = f"{rule + ' ' if rule else ''}{value:.4g} vs {bound}"
    elif isinstance(value, (int, float)):
        head = f"score {value:.4g}"
    rest = ", ".join(f"{k}={v}" for k, v in d.items() if v not in (None, "", [], {}))
    return "; ".join(x for x in (head, rest) if x)


@runtime_checkable
class DocumentFilter(Protocol):
    """Anything with a ``name`` and ``__call__(doc) -> Decision`` is a filter."""

    name: str

    def __call__(self, doc: Document) -> Decision: ...


def _outcome(flt: DocumentFilter, doc: Document, decision: Decision
             ) -> tuple[Document | None, dict | None]:
    """The one outcome rule: the decision's document (or ``doc``) with the filter's signals
    merged in under ``<filter>.<signal>``, kept, or made the filter's reject (reason
    ``dropped`` when the filter named none)."""
    out = dict(decision.document if decision.document is not None else doc)
    if decision.signals:
        signals = dict(out.get("signals") or {})
        signals.update({f"{flt.name}.{k}": float(v) for k, v in decision.signals.items()})
        out["signals"] = signals
    if decision.keep:
        return out, None  # type: ignore[return-value]
    return None, make_reject(out, flt.name, decision.reason or "dropped", **decision.details)  # type: ignore[arg-type]


def _crashed(flt: DocumentFilter, doc: Document, exc: Exception) -> dict:
    return make_reject(doc, flt.name, f"error:{type(exc).__name__}", message=str(exc)[:500])


def apply_page_filter(flt: DocumentFilter, page: dict[str, Any], skeleton: Callable[[dict[str, Any]], Document]
                      ) -> tuple[Document | None, dict | None]:
    """A page stage (crawl page -> document): ``(document, None)`` when the filter made a
    document with a text, else ``(None, reject)``; a page that yields none is the reject of
    ``skeleton(page)`` (a text-less document with the page's URL, so the reject has an id),
    with the reason ``no_text`` when the filter kept it without a text."""
    try:
        decision = flt(page)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - recorded, never lost
        return None, _crashed(flt, skeleton(page), exc)
    doc = decision.document
    if decision.keep and doc is not None and isinstance(doc.get("text"), str):
        return _outcome(flt, doc, decision)
    base = dict(doc) if doc is not None and doc.get("id") else skeleton(page)
    dropped = Decision(False, decision.reason or ("no_text" if decision.keep else "dropped"),
                       decision.signals, details={"url": page.get("url"), **decision.details})
    return _outcome(flt, base, dropped)  # type: ignore[arg-type]


def apply_record_filter(flt: DocumentFilter, page: dict[str, Any], skeleton: Callable[[dict[str, Any]], Document],
                        measure: Callable[[dict[str, Any]], dict[str, Any]] | None = None
                        ) -> tuple[bool, dict | None]:
    """A record stage on a crawl page (it judges the page, it makes no document):
    ``(True, None)`` keeps the page as it is; else ``(False, reject)``, the reject of
    ``skeleton(page)`` with the decision's details and what ``measure(page)`` adds (what the
    page would have yielded, for the stage's report)."""
    try:
        decision = flt(page)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - recorded, never lost
        return False, _crashed(flt, skeleton(page), exc)
    if decision.keep:
        return True, None
    details = {**decision.details, **(measure(page) if measure is not None else {})}
    return False, make_reject(skeleton(page), flt.name, decision.reason or "dropped", **details)


def apply_filter(flt: DocumentFilter, doc: Document) -> tuple[Document | None, dict | None]:
    """Run one filter; returns ``(kept_doc, None)`` or ``(None, reject_record)``.

    Signals are merged into the document's ``signals`` map either way, so rejects carry
    the evidence. A crash inside a filter becomes a reject with reason ``error:<Type>``
    instead of killing a whole pipeline bundle.
    """
    try:
        return _outcome(flt, doc, flt(doc))
    except Exception as exc:  # noqa: BLE001 - recorded, never lost
        return None, _crashed(flt, doc, exc)


@runtime_checkable
class BatchDocumentFilter(DocumentFilter, Protocol):
    """A filter that decides a whole batch at once (one model call for many documents)."""

    def decide_batch(self, docs: list[Document]) -> list[Decision]: ...


def apply_filter_batch(flt: BatchDocumentFilter, docs: list[Document]
                       ) -> list[tuple[Document | None, dict | None]]:
    """:func:`apply_filter` for a batch, in order. If the batch call fails, each document
    is run alone, so one bad document becomes its own ``error:<Type>`` reject and the
    others are still decided."""
    try:
        decisions = flt.decide_batch(list(docs))
        if len(decisions) != len(docs):
            raise RuntimeError(f"{flt.name}: {len(decisions)} decisions for {len(docs)} documents")
    except Exception:  # noqa: BLE001 - retried one by one, each failure recorded
        return [apply_filter(flt, d) for d in docs]
    results = []
    for doc, decision in zip(docs, decisions):
        try:
            results.append(_outcome(flt, doc, decision))
        except Exception as exc:  # noqa: BLE001 - recorded, never lost
            results.append((None, _crashed(flt, doc, exc)))
    return results
