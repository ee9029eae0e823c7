"""The input boundary: one reader per format, every record met exactly once.

``read_file(path)`` yields, for every record of a WARC, JSONL or Parquet file, exactly
one of

* :class:`Record`: a decoded record (a JSON value, a Parquet row, or a crawl page of a
  WARC response) and where it was (:class:`Where`);
* :class:`Failure`: a record, or a damaged stretch of the file, that could not be decoded,
  with where, why, and how many records it stands for (``lost``: 1, or None when the
  format cannot tell, e.g. a truncated gzip tail);
* :class:`Skipped`: a record that is by design not a document (WARC request, warcinfo
  and metadata records), counted apart so that every record of the file is accounted.

Readers never raise for bad input (an unreadable file is one :class:`Failure`), never
stop early, and resynchronise after damage (the next gzip member, the next JSONL line,
the next WARC record, the next Parquet row group). Counting these items as they are met is
what makes "documents in" include what could not be decoded.

What a record *means* (document, crawl page, or reject) is decided by
:mod:`afm.pipelines.beam.coerce`; readers only decode.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from afm import fs
from afm.parquet import open_parquet
from afm.readers.byte_stream import Damage, MemberEnd, MemberStart, iter_events
from afm.readers.records import (
    JSONL_SUFFIXES,
    MAX_RECORD_BYTES,
    PARQUET_BATCH_ROWS,
    PARQUET_SUFFIXES,
    SUPPORTED_SUFFIXES,
    VERIFY_LOOKAHEAD,
    WARC_SUFFIXES,
    Failure,
    Item,
    Record,
    Skipped,
    Where,
)
from afm.readers.warc import read_warc


def file_format(path: str) -> str | None:
    """``warc`` | ``parquet`` | ``jsonl`` from the name, or None (unsupported)."""
    low = path.lower()
    if low.endswith(WARC_SUFFIXES):
        return "warc"
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return None


def read_file(path: str, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[Item]:
    """Every record of one file (see the module docstring). Raises only for a file name
    of no supported format (a usage error, decided before any reading)."""
    fmt = file_format(path)
    if fmt is None:
        raise ValueError(f"{path}: unsupported input (expected one of "
                         f"{', '.join(SUPPORTED_SUFFIXES)})")
    try:
        fh = fs.open_read(path)
    except Exception as exc:  # noqa: BLE001 - missing, unreadable, permission denied
        yield Failure(Where(path), "unreadable_file", f"{type(exc).__name__}: {exc}", lost=None)
        return
    with fh:
        if fmt == "jsonl":
            yield from read_jsonl(fh, path, max_record_bytes)
        elif fmt == "parquet":
            yield from read_parquet(fh, path)
        else:
            yield from read_warc(fh, path, max_record_bytes)


# ---------------------------------------------------------------------------------- JSONL


def _json_start(data: bytes) -> bool:
    return data.lstrip()[:1] in (b"{", b"")


def read_jsonl(fh: Any, path: str, max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[Item]:
    """One item per non-blank line (plain or gzip, even damaged gzip).

    A line that is not JSON is a ``bad_json`` failure; invalid UTF-8 is repaired
    (U+FFFD, noted) rather than losing the record. In gzip files the lines of a member are
    held until its CRC is checked: a member that cannot be decompressed is one failure
    (its lines are untrustworthy; how many it held is unknown), and reading resumes at the
    next member. A truncated tail is one failure too, and the partial line before it is
    part of it (never kept); the complete lines before the cut are kept, since a deflate
    stream's prefix decompresses to exactly the original prefix.
    """
    lineno = 0
    pos = 0  # decompressed offset of the current event's first byte
    line_start = 0  # decompressed offset where the current line began
    member = None
    partial = bytearray()
    too_long = False
    pending: list[Item] = []  # lines of the current gzip member, not yet verified
    pending_bytes = 0

    def where(line: int, start: int) -> Where:
        # gzip: the member's compressed offset (a line's own offset means nothing there)
        return Where(path, offset=member if member is not None else start, line=line)

    def finish(line: bytes, place: Where) -> Item | None:
        if too_long:
            return Failure(place, "record_too_large", f"line longer than {max_record_bytes} bytes")
        if not line.strip():
            return None
        return _decode_json_line(line, place)

    for event in iter_events(fh, gzip=True if path.lower().endswith(".gz") else None,
                             is_start=_json_start):
        if isinstance(event, MemberStart):
            member = event.offset
            continue
        if isinstance(event, MemberEnd):
            yield from pending
            pending.clear()
            pending_bytes = 0
            continue
        if isinstance(event, Damage):
            what = {"truncated": "the file ends inside a gzip member",
                    "garbage": "bytes that are not gzip data"}.get(event.reason, event.error)
            if event.reason == "truncated":
                yield from pending  # a clean prefix: the complete lines are intact
            elif pending:
                what += (f"; {len(pending)} line(s) already decompressed from the damaged "
                         "member were dropped with it (they cannot be verified)")
            pending.clear()
            pending_bytes = 0
            if partial.strip():
                what += f"; a partial line of {len(partial)} bytes was dropped with it"
            yield Failure(Where(path, offset=event.offset, line=lineno + 1), event.reason, what,
                          lost=None, extra={"resumed_at": event.resumed_at})
            partial.clear()
            too_long = False
            line_start = pos
            continue
        start = 0
        while True:
            nl = event.find(b"\n", start)
            piece = event[start:] if nl < 0 else event[start:nl]
            if not too_long:
                partial += piece
                if len(partial) > max_record_bytes:
                    too_long = True
                    partial.clear()
            if nl < 0:
                break
            lineno += 1
            item = finish(bytes(partial), where(lineno, line_start))
            if item is not None:
                if member is None:
                    yield item
                else:
                    pending.append(item)
                    pending_bytes += len(partial) + 1
                    if pending_bytes > VERIFY_LOOKAHEAD:  # a huge member: cannot wait
                        yield from pending
                        pending.clear()
                        pending_bytes = 0
            partial.clear()
            too_long = False
            start = nl + 1
            line_start = pos + start
        pos += len(event)
    yield from pending
    if partial.strip() or too_long:
        item = finish(bytes(partial), where(lineno + 1, line_start))
        if item is not None:
            yield item


def _decode_json_line(line: bytes, where: Where) -> Item:
    notes: tuple[str, ...] = ()
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        text = line.decode("utf-8", errors="replace")
        notes = ("utf8_repaired",)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        return Failure(where, "bad_json", f"not valid JSON ({msg})")
    return Record(value, where, notes=notes)


# -------------------------------------------------------------------------------- Parquet


def read_parquet(fh: Any, path: str, columns: list[str] | None = None) -> Iterator[Item]:
    """One item per row. A row group that cannot be decoded gives one failure per row its
    footer declares (so the count stays exact); an unreadable footer is one failure whose
    loss is unknown."""
    try:
        pf = open_parquet(fh)
        meta = pf.metadata
        schema = pf.schema_arrow
    except Exception as exc:  # noqa: BLE001 - not Parquet, truncated, corrupt footer
        yield Failure(Where(path), "unreadable_file", f"{type(exc).__name__}: {exc}",
                      lost=None)
        return
    maps = [f.name for f in schema if pa.types.is_map(f.type)]
    # A footer whose row groups do not add up to its row count contradicts itself: its
    # per-group counts cannot be trusted to count what a damaged group lost.
    consistent = sum(meta.row_group(rg).num_rows for rg in range(meta.num_row_groups)) \
        == meta.num_rows
    row = 0
    for rg in range(meta.num_row_groups):
        declared = meta.row_group(rg).num_rows
        done = 0
        error = ""
        try:
            for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=[rg],
                                         columns=columns):
                rows = batch.to_pylist()
                if done + len(rows) > declared:
                    raise ValueError(f"row group {rg} decodes to more rows than the "
                                     f"{declared} its footer declares")
                for rec in rows:
                    for name in maps:
                        if isinstance(rec.get(name), list):
                            rec[name] = dict(rec[name])
                    yield Record(rec, Where(path, row=row + done))
                    done += 1
        except Exception as exc:  # noqa: BLE001 - a corrupt page, bad encoding, ...
            error = f"{type(exc).__name__}: {exc}"
        if done < declared:
            why = error or f"row group {rg} decoded {done} of its {declared} rows"
            if not consistent:
                yield Failure(Where(path, row=row + done), "unreadable_row_group",
                              f"row group {rg}: {why}; the footer contradicts itself "
                              f"({meta.num_rows} rows in all), so what was lost is unknown",
                              lost=None)
            else:
                for i in range(done, declared):
                    yield Failure(Where(path, row=row + i), "unreadable_row_group",
                                  f"row group {rg}: {why}")
        row += declared


__all__ = ["JSONL_SUFFIXES", "MAX_RECORD_BYTES", "PARQUET_SUFFIXES", "SUPPORTED_SUFFIXES", "WARC_SUFFIXES",
           "Failure", "Item", "Record", "Skipped", "Where", "file_format", "read_file", "read_jsonl",
           "read_parquet"]
