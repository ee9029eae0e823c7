"""One coercion and validation step from a decoded record to the document schema.

Every command that reads documents passes each decoded record (a JSON value, a Parquet
row, a crawl page) through :func:`classify`, which returns a :class:`Outcome`:

* ``doc``: a complete document record whose every field has the type
  :data:`afm.schema.DOCUMENT_SCHEMA` declares, so no writer can fail on it later;
* ``page``: a crawl record (``body``/``html`` without ``text``) for the extract stage;
* ``bad``: a record that cannot be a document, with a reason code and details.

The rules, chosen so that one bad value costs at most that value, never the record's
neighbours:

* ``text`` must be a string (missing: ``missing_text``; another type: ``bad_text_type``).
* ``id`` becomes a string (``7`` -> ``"7"``); missing or empty, it is derived from the URL
  (else the text) as :func:`afm.schema.document_id` does; another type: ``bad_id``.
* Optional fields of the wrong type are converted when that loses nothing (a number as a
  title becomes its string, a numeric string as a score its number) and are otherwise
  cleared (set to None); each conversion or clearing is a *note* (``title:cleared``)
  that the run counts and reports, so nothing changes silently.
* A ``fetched_at`` outside what a timestamp can hold (``1e20``) is cleared, not fatal.
* Lone UTF-16 surrogates (``"\\ud800"`` in JSON; no UTF-8 encoder accepts them) are
  replaced by U+FFFD in every string, noted as ``<field>:surrogates_repaired``.
* ``source`` outside :data:`afm.schema.SOURCES` becomes the run's source (noted).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from afm.headers import Headers
from afm.schema import DOCUMENT_FIELDS, SOURCES, document_id

STRING_FIELDS = ("title", "language", "dup_cluster")
# Crawl-page fields kept as they are (afm.readers.warc.PAGE_FIELDS): the crawler's stored
# training-use decision, which the optout stage reads.
PAGE_EXTRA_FIELDS = ("training_use", "training_evidence", "warc_truncated")
FLOAT_FIELDS = ("language_score", "quality_score", "safety_score")
FLOAT32_MAX = 3.4028234663852886e38
_INT32 = 2**31 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Outcome:
    """What a decoded record is: ``doc``, ``page`` or ``bad`` (with ``reason``)."""

    kind: str
    value: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


def repair_surrogates(text: str) -> tuple[str, bool]:
    """``text`` with lone surrogates replaced by U+FFFD (pairs written as two escapes are
    joined first); and whether anything changed."""
    if not _SURROGATE.search(text):
        return text, False
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed, True


def _string(value: Any, name: str, notes: list[str]) -> str | None:
    """A string field: strings kept, numbers written out, anything else cleared."""
    if value is None:
        return None
    if isinstance(value, str):
        fixed, changed = repair_surrogates(value)
        if changed:
            notes.append(f"{name}:surrogates_repaired")
        return fixed
    if isinstance(value, int) and not isinstance(value, bool) or (
            isinstance(value, float) and math.isfinite(value)):
        notes.append(f"{name}:converted")
        return str(value)
    notes.append(f"{name}:cleared")
    return None


def _as_float(value: Any) -> float | None:
    """A JSON number as a float (None for other types, bools and ints beyond float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _float(value: Any, name: str, notes: list[str]) -> float | None:
    """A float32 field: numbers (and numeric strings) in range, else cleared."""
    if value is None:
        return None
    number = _as_float(value)
    if isinstance(value, str):
        try:
            number = float(value)
            notes.append(f"{name}:converted")
        except ValueError:
            number = None
    if number is None or (math.isfinite(number) and abs(number) > FLOAT32_MAX):
        notes.append(f"{name}:cleared")
        return None
    return number


def _timestamp(value: Any, name: str, notes: list[str]) -> dt.datetime | None:
    """An aware UTC datetime from a datetime, an ISO-8601 string or epoch seconds; a
    value no timestamp can hold is cleared."""
    if value is None:
        return None
    try:
        if isinstance(value, dt.datetime):
            out = value
        elif isinstance(value, str):
            out = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out = dt.datetime.fromtimestamp(float(value), tz=dt.UTC)
        else:
            raise TypeError(type(value).__name__)
        out = out.replace(tzinfo=dt.UTC) if out.tzinfo is None else out.astimezone(dt.UTC)
    except (ValueError, TypeError, OverflowError, OSError):
        notes.append(f"{name}:cleared")
        return None
    if isinstance(value, (int, float)):
        notes.append(f"{name}:converted")  # epoch seconds
    return out


def _number_map(value: Any, name: str, notes: list[str], integer: bool) -> dict[str, Any] | None:
    """A map field (``pii_redactions`` str->int32, ``signals`` str->float64): entries of
    the wrong type are dropped (noted), a non-map value is cleared."""
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        try:
            value = dict(value)  # Arrow's map shape: [(key, value), ...]
        except TypeError:  # a key that cannot be a key (a list, a dict)
            notes.append(f"{name}:cleared")
            return None
    if not isinstance(value, dict):
        notes.append(f"{name}:cleared")
        return None
    out: dict[str, Any] = {}
    dropped = False
    for key, item in value.items():
        key = repair_surrogates(str(key))[0]
        number = _as_float(item)
        if number is None:
            dropped = True
        elif integer:
            if not math.isfinite(number) or not number.is_integer() or abs(number) > _INT32:
                dropped = True
            else:
                out[key] = int(number)
        else:
            out[key] = number
    if dropped:
        notes.append(f"{name}:entries_dropped")
    return out


def _id(value: Any, notes: list[str]) -> tuple[str | None, str]:
    """``(id, "")``, ``(None, "")`` when it must be derived, or ``(None, why)``."""
    if value is None or value == "":
        return None, ""
    if isinstance(value, str):
        fixed, changed = repair_surrogates(value)
        if changed:
            notes.append("id:surrogates_repaired")
        return fixed, ""
    if isinstance(value, int) and not isinstance(value, bool):
        notes.append("id:converted")
        return str(value), ""
    if isinstance(value, float) and value.is_integer():
        notes.append("id:converted")
        return str(int(value)), ""
    return None, f"id of type {type(value).__name__} ({str(value)[:80]!r})"


def _text_of(rec: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The record's text, and the record itself adjusted for code-file records
    (``content`` + ``path``: the file's text; url and title from repository and path)."""
    text = rec.get("text")
    if text is None and isinstance(rec.get("content"), str) and rec.get("path"):
        text = rec["content"]
        repo = rec.get("repo") or rec.get("repository") or ""
        rec = {**rec, "url": rec.get("url") or f"{repo}/{rec['path']}".lstrip("/"),
               "title": rec.get("title") or str(rec["path"])}
    return text, rec


def with_text_from(rec: Any, text_fields: Iterable[str]) -> Any:
    """A record whose ``text`` is its ``text_fields`` joined by blank lines (e.g. an SFT
    example's prompt and response); records without any such string field keep no text."""
    if not isinstance(rec, dict):
        return rec
    texts = [rec.get(f) for f in text_fields]
    strings = [t for t in texts if isinstance(t, str)]
    return {**rec, "text": "\n\n".join(strings) if strings else None}


def classify(rec: Any, source: str) -> Outcome:
    """A decoded record -> document, crawl page, or invalid (see the module docstring).
    ``source`` is the run's source, used when the record names none (or an unknown one)."""
    if not isinstance(rec, dict):
        return Outcome("bad", {}, reason="not_a_record",
                       details={"value": repr(rec)[:200], "type": type(rec).__name__})
    text, rec = _text_of(rec)
    if text is None and (rec.get("body") is not None or rec.get("html") is not None):
        return _page(rec)
    notes: list[str] = []
    url = rec.get("url")
    url = _string(url, "url", notes) if not isinstance(url, (int, float)) else _clear(notes, "url")
    if not isinstance(text, str):
        reason = "missing_text" if text is None else "bad_text_type"
        return Outcome("bad", {"url": url}, notes, reason,
                       {"keys": sorted(map(str, rec))[:20], "text_type": type(text).__name__})
    text, changed = repair_surrogates(text)
    if changed:
        notes.append("text:surrogates_repaired")
    doc_id, why = _id(rec.get("id"), notes)
    if why:
        return Outcome("bad", {"url": url, "text": text}, notes, "bad_id", {"error": why})
    doc: dict[str, Any] = dict.fromkeys(DOCUMENT_FIELDS)
    doc["id"] = doc_id or document_id(url, text)
    doc["url"] = url
    doc["text"] = text
    src = rec.get("source")
    if src is None or src == "":
        doc["source"] = source
    elif src in SOURCES:
        doc["source"] = src
    else:
        doc["source"] = source
        notes.append("source:replaced")
    for name in STRING_FIELDS:
        doc[name] = _string(rec.get(name), name, notes)
    for name in FLOAT_FIELDS:
        doc[name] = _float(rec.get(name), name, notes)
    doc["fetched_at"] = _timestamp(rec.get("fetched_at"), "fetched_at", notes)
    doc["pii_redactions"] = _number_map(rec.get("pii_redactions"), "pii_redactions", notes, True)
    doc["signals"] = _number_map(rec.get("signals"), "signals", notes, False)
    if isinstance(rec.get("license"), str):  # code files: the repository licence (CodeFilter)
        doc["license"] = rec["license"]
    if isinstance(rec.get("page_type"), str) and rec["page_type"]:  # the report's per-kind view
        doc["page_type"] = rec["page_type"][:40]
    return Outcome("doc", doc, notes)


def _clear(notes: list[str], name: str) -> None:
    notes.append(f"{name}:cleared")
    return None


def _page(rec: dict[str, Any]) -> Outcome:
    """A crawl record (``body`` or ``html``) -> the page shape the extractor reads."""
    notes: list[str] = []
    body = rec.get("body") if rec.get("body") is not None else rec.get("html")
    if isinstance(body, str):
        fixed, changed = repair_surrogates(body)
        if changed:
            notes.append("body:surrogates_repaired")
        body = fixed.encode("utf-8")
    elif isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    elif not isinstance(body, bytes):
        return Outcome("bad", {"url": rec.get("url") if isinstance(rec.get("url"), str) else None},
                       notes, "bad_body", {"body_type": type(body).__name__})
    url = rec.get("url")
    url = _string(url, "url", notes) if not isinstance(url, (int, float)) else _clear(notes, "url")
    status = rec.get("status")
    if status is None:
        status = 200  # a stored page without a status was stored because it was fetched
    elif isinstance(status, str) and status.strip().isdigit():
        status = int(status.strip())
    elif isinstance(status, float) and status.is_integer():
        status = int(status)
    # Anything else stays as it is: the extractor drops it as ``http_status`` and names
    # the value, which says more than a reader's guess would.
    # Every field line is kept (a repeated X-Robots-Tag is two lines; a dict value may be
    # a list of lines): afm.headers.Headers, the one representation readers share.
    headers = rec.get("headers")
    if headers is not None and not isinstance(headers, (list, tuple, dict)):
        notes.append("headers:cleared")
        headers = None
    pairs = Headers.of(headers).pairs()
    if headers and not pairs:
        notes.append("headers:cleared")
    page = {"url": url, "status": status, "headers": pairs, "body": body,
            "fetched_at": _timestamp(rec.get("fetched_at"), "fetched_at", notes)}
    for key in PAGE_EXTRA_FIELDS:  # the crawler's stored training-use decision
        if isinstance(rec.get(key), str) and rec[key]:
            page[key] = rec[key]
    return Outcome("page", page, notes)
