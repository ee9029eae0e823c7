"""The document and reject records: defined once here, used by every writer.

Every stage of the system passes documents as plain ``dict`` records (cheap to pickle
between Beam workers) whose keys and types are fixed by :data:`DOCUMENT_SCHEMA`.
A dropped document keeps every field and gains ``rejected_by`` (the stage), ``reason``
(a short machine-readable code) and ``details`` (JSON with specifics such as
``duplicate_of`` or the colliding benchmark n-gram), so nothing is ever lost silently.
Records from outside (JSONL, Parquet, crawl pages) reach these types through one
coercion step, :mod:`afm.pipelines.beam.coerce`, so every writer can trust them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any, TypedDict

import pyarrow as pa

SOURCES = ("web", "code", "math", "licensed", "public", "synthetic")

DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("source", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("language", pa.string()),
        pa.field("language_score", pa.float32()),
        pa.field("fetched_at", pa.timestamp("us", tz="UTC")),
        pa.field("quality_score", pa.float32()),
        pa.field("safety_score", pa.float32()),
        pa.field("pii_redactions", pa.map_(pa.string(), pa.int32())),
        pa.field("dup_cluster", pa.string()),
        # Every other numeric signal a filter computed (rule values, classifier scores).
        pa.field("signals", pa.map_(pa.string(), pa.float64())),
    ],
    metadata={"afm.record": "document", "afm.schema_version": "1"},
)

REJECT_SCHEMA = pa.schema(
    list(DOCUMENT_SCHEMA)
    + [
        pa.field("rejected_by", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("details", pa.string()),
    ],
    metadata={"afm.record": "reject", "afm.schema_version": "1"},
)

DOCUMENT_FIELDS = tuple(DOCUMENT_SCHEMA.names)
# Input fields outside the schema that a record carries through the run without writing
# them: a document's page type (article, forum ...), counted by kind in report.html.
CARRIED_FIELDS = ("page_type",)
REJECT_FIELDS = tuple(REJECT_SCHEMA.names)


class Document(TypedDict, total=False):
    """The Python shape of a document record (all keys of :data:`DOCUMENT_SCHEMA`)."""

    id: str
    url: str | None
    source: str
    text: str
    title: str | None
    language: str | None
    language_score: float | None
    fetched_at: dt.datetime | None
    quality_score: float | None
    safety_score: float | None
    pii_redactions: dict[str, int] | None
    dup_cluster: str | None
    signals: dict[str, float] | None


class Reject(Document, total=False):
    """A document record plus why and where it was dropped."""

    rejected_by: str
    reason: str
    details: str | None


def document_id(url: str | None, text: str = "") -> str:
    """A stable id: SHA-1 of the URL when there is one (a page keeps its id across
    re-crawls), else of the text. 20 hex chars keep collisions negligible at 10^12 docs."""
    key = url if url else text
    return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def make_document(
    text: str,
    *,
    url: str | None = None,
    source: str = "web",
    id: str | None = None,  # noqa: A002 - the schema's own field name
    fetched_at: dt.datetime | None = None,
    **fields: Any,
) -> Document:
    """Build a complete document record, every schema key present (missing ones None)."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {SOURCES}")
    unknown = set(fields) - set(DOCUMENT_FIELDS)
    if unknown:
        raise ValueError(f"unknown document fields: {sorted(unknown)}")
    doc: dict[str, Any] = dict.fromkeys(DOCUMENT_FIELDS)
    doc.update(fields)
    doc.update(
        id=id or document_id(url, text),
        url=url,
        source=source,
        text=text,
        fetched_at=fetched_at,
    )
    return doc  # type: ignore[return-value]


def make_reject(doc: Document, stage: str, reason: str, **details: Any) -> Reject:
    """Turn a document into a reject record (stage + reason + JSON details)."""
    rec: dict[str, Any] = {k: doc.get(k) for k in DOCUMENT_FIELDS}
    for k in CARRIED_FIELDS:  # not written; read by the run on the way (report.html's kinds)
        if doc.get(k) is not None:
            rec[k] = doc[k]
    rec["rejected_by"] = stage
    rec["reason"] = reason
    rec["details"] = json.dumps(details, sort_keys=True, default=str) if details else None
    return rec  # type: ignore[return-value]


def invalid_reject(record: Any, stage: str, problem: str) -> Reject:
    """The ``invalid_document`` reject of a record that is not a document (no text string,
    no id, not even a mapping), so that a stage can still write and count it, never drop
    it: the schema's required fields filled (empty text, a known source, an id derived
    from the record itself: the same record always gets the same id), the record as it
    came, as JSON, in ``details.record``, and what is wrong with it in ``details.message``."""
    doc = dict(record) if isinstance(record, dict) else {}
    original = json.dumps(record, default=str, sort_keys=True)[:2000]
    if not isinstance(doc.get("text"), str):
        doc["text"] = ""
    if doc.get("source") not in SOURCES:
        doc["source"] = "web"
    if not isinstance(doc.get("id"), str) or not doc["id"]:
        doc["id"] = document_id(None, original)
    return make_reject(doc, stage, "invalid_document", message=problem, record=original)  # type: ignore[arg-type]


def normalize_record(rec: dict[str, Any], schema: pa.Schema = DOCUMENT_SCHEMA) -> dict[str, Any]:
    """Keep only the schema's keys (missing ones None); maps given as dicts are kept as
    dicts (pyarrow converts them), numpy scalars turned into Python numbers."""
    out: dict[str, Any] = {}
    for name in schema.names:
        value = rec.get(name)
        if isinstance(value, dict):
            value = {str(k): (v.item() if hasattr(v, "item") else v) for k, v in value.items()}
        elif hasattr(value, "item") and not isinstance(value, (str, bytes)):
            value = value.item()
        out[name] = value
    return out


def to_table(records: list[dict[str, Any]], schema: pa.Schema = DOCUMENT_SCHEMA) -> pa.Table:
    """Records -> an Arrow table with exactly ``schema`` (extra keys dropped)."""
    rows = [normalize_record(r, schema) for r in records]
    for row in rows:
        for name in ("pii_redactions", "signals"):
            if isinstance(row.get(name), dict):
                row[name] = list(row[name].items())
    return pa.Table.from_pylist(rows, schema=schema)


def from_table(table: pa.Table) -> list[dict[str, Any]]:
    """An Arrow table -> records, maps turned back into dicts."""
    rows = table.to_pylist()
    for row in rows:
        for name in ("pii_redactions", "signals"):
            value = row.get(name)
            if isinstance(value, list):
                row[name] = dict(value)
    return rows
