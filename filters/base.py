"""The filter contract: a plain object with a config and a ``__call__(doc) -> Decision``.

Filters know nothing about Beam or Scrapy. A filter may keep a document, drop it with a
reason, or keep a modified copy (e.g. PII redacted), and always reports the signals it
computed so they can be stored with the record and shown by ``afm inspect``.
"""

from __future__ import annotations

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


@runtime_checkable
class DocumentFilter(Protocol):
    """Anything with a ``name`` and ``__call__(doc) -> Decision`` is a filter."""

    name: str

    def __call__(self, doc: Document) -> Decision: ...


def _outcome(flt: DocumentFilter, doc: Document, decision: Decision
             ) -> tuple[Document | None, dict | None]:
    out = dict(decision.document if decision.document is not None else doc)
    if decision.signals:
        signals = dict(out.get("signals") or {})
        signals.update({f"{flt.name}.{k}": float(v) for k, v in decision.signals.items()})
        out["signals"] = signals
    if decision.keep:
        return out, None  # type: ignore[return-value]
    return None, make_reject(out, flt.name, decision.reason or "dropped", **decision.details)  # type: ignore[arg-type]


def apply_filter(flt: DocumentFilter, doc: Document) -> tuple[Document | None, dict | None]:
    """Run one filter; returns ``(kept_doc, None)`` or ``(None, reject_record)``.

    Signals are merged into the document's ``signals`` map either way, so rejects carry
    the evidence. A crash inside a filter becomes a reject with reason ``error:<Type>``
    instead of killing a whole pipeline bundle.
    """
    try:
        return _outcome(flt, doc, flt(doc))
    except Exception as exc:  # noqa: BLE001 - recorded, never lost
        return None, make_reject(doc, flt.name, f"error:{type(exc).__name__}", message=str(exc)[:500])


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
            results.append((None, make_reject(doc, flt.name, f"error:{type(exc).__name__}",
                                              message=str(exc)[:500])))
    return results
