"""A WARC (and ARC) reader that survives damaged files: every record is met once.

warcio's ``ArchiveIterator`` reads a stream front to back and stops at the first thing it
cannot parse: a corrupt gzip member, a record whose ``Content-Length`` is wrong, a file cut
off mid-record (whose partial last record it returns as if it were whole). Everything
after that point vanishes. This reader frames records itself and uses warcio only to
decode each record's HTTP message (status line, headers, chunked transfer, content
encodings). It yields, per record, one :mod:`afm.readers` item:

* a ``page`` :class:`~afm.readers.Record` for an HTTP response
  (``{"url", "status", "headers", "body", "fetched_at"}``; ``headers`` is every HTTP field
  line as ``[name, value]`` pairs in order, :class:`afm.headers.Headers` reads them: a
  repeated ``X-Robots-Tag`` line is two lines, never one lost to a dict). When the record
  carries them, the crawler's stored training-use decision (``AFM-Training-Use``,
  ``AFM-Training-Evidence``) is ``training_use`` / ``training_evidence``, and a
  ``WARC-Truncated`` field (WARC 1.1 section 5.13) is ``warc_truncated``;
* :class:`~afm.readers.Skipped` for records that are not documents (request, warcinfo,
  metadata, revisit, DNS and other non-HTTP responses);
* :class:`~afm.readers.Failure` for a record that cannot be read, with its offset.

Framing: a record is ``WARC/x.y`` header lines, a blank line, ``Content-Length`` bytes and
``\\r\\n\\r\\n``. A record that does not end where its length says, a header that does not
parse, or a corrupt gzip member is one failure, and reading resumes at the next line that
starts with ``WARC/`` (after a gzip member, the next member that decompresses). A record
cut off by the end of the file is a ``truncated`` failure, never a page; how many records
the missing tail held cannot be known, which the failure says.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

from afm import fs
from afm.headers import Headers
from afm.readers.byte_stream import Damage, MemberEnd, MemberStart, iter_events
from afm.readers.records import (
    MAX_RECORD_BYTES,
    VERIFY_LOOKAHEAD,
    Failure,
    Item,
    Record,
    Skipped,
    Where,
)

MAX_HEADER_BYTES = 1 << 20
NOT_DOCUMENTS = {"request", "warcinfo", "metadata", "revisit", "conversion", "continuation",
                 "resource"}
_WARC_START = re.compile(rb"WARC/\d")
_WARC_VERSION_LINE = re.compile(rb"WARC/\d\.\d+\r?\n")
_ARC_HEADER = re.compile(rb"^[a-z]+:\S* \S+ \d{14} \S+ \d+\r?$")
# WARC named fields copied onto the page (lower-cased WARC field -> page key): the
# crawler's training-use decision (afm.crawler.storage.warc) and WARC 1.1's truncation mark.
PAGE_FIELDS = {"afm-training-use": "training_use", "afm-training-evidence": "training_evidence",
               "warc-truncated": "warc_truncated"}


def _warc_start(data: bytes) -> bool:
    return data.startswith(b"WARC/") or not data


def _arc_start(data: bytes) -> bool:
    return bool(data) and b" " in data.split(b"\n", 1)[0]


class _Cursor:
    """The file's decompressed bytes, pulled from :func:`afm.readers.byte_stream.iter_events` on
    demand. Offsets are absolute (decompressed) positions; a :class:`Damage` stops
    filling until the reader has dealt with it."""

    def __init__(self, events: Iterator[Any]) -> None:
        self.events = events
        self.buf = bytearray()
        self.base = 0
        self.members: list[tuple[int, int]] = []  # (decompressed, compressed) starts
        self.damage: Damage | None = None
        self.ended = False
        self.gzip = False  # set by the first MemberStart
        self.verified = 0  # bytes before this offset belong to members that ended cleanly

    @property
    def end(self) -> int:
        return self.base + len(self.buf)

    def fill(self, upto: int) -> bool:
        """Have bytes up to absolute offset ``upto``; False at a damage or end of file."""
        while self.end < upto and self.damage is None and not self.ended:
            event = next(self.events, None)
            if event is None:
                self.ended = True
            elif isinstance(event, MemberStart):
                self.gzip = True
                self.members.append((self.end, event.offset))
            elif isinstance(event, MemberEnd):
                self.verified = self.end
            elif isinstance(event, Damage):
                self.damage = event
            else:
                self.buf += event
        return self.end >= upto

    def verify(self, upto: int) -> bool:
        """Whether the bytes before ``upto`` passed their gzip members' CRC checks (always,
        for plain files). Waits for the member to end, up to ``VERIFY_LOOKAHEAD`` bytes
        (a whole-file gzip cannot be verified record by record); False at a damage."""
        while self.gzip and self.verified < upto:
            if self.damage is not None:
                return False
            if self.ended or self.end - upto > VERIFY_LOOKAHEAD:
                return True
            self.fill(self.end + 1)
        return True

    def take(self, start: int, stop: int) -> bytes:
        return bytes(self.buf[start - self.base : stop - self.base])

    def byte(self, at: int) -> int:
        return self.buf[at - self.base]

    def find(self, pattern: bytes, start: int, limit: int) -> int | None:
        """Absolute offset of ``pattern`` in ``[start, limit)``, filling as needed; None
        when absent before ``limit``, the end of the file or a damage."""
        search_from = start
        while True:
            lo = max(search_from, self.base) - self.base
            hi = min(limit, self.end) - self.base
            hit = self.buf.find(pattern, lo, hi) if hi > lo else -1
            if hit >= 0:
                return self.base + hit
            if self.end >= limit:
                return None
            before = self.end
            self.fill(self.end + 65536)
            if self.end == before:
                return None
            search_from = max(start, before - len(pattern) + 1)

    def drop_before(self, at: int) -> None:
        cut = min(at, self.end) - self.base
        if cut > 0:
            del self.buf[:cut]
            self.base += cut
        keep = [m for m in self.members if m[0] >= self.base]
        self.members = ([m for m in self.members if m[0] < self.base][-1:] + keep)

    def file_offset(self, at: int) -> int:
        """The compressed offset of the gzip member holding ``at`` (plain files: ``at``)."""
        starts = [m for m in self.members if m[0] <= at]
        return starts[-1][1] if starts else at


def read_warc(fh: BinaryIO, path: str, max_record_bytes: int = MAX_RECORD_BYTES
              ) -> Iterator[Item]:
    """Every record of a WARC or ARC file (plain or gzip, damaged or not) as items."""
    arc = path.lower().endswith((".arc", ".arc.gz"))
    events = iter_events(fh, gzip=True if path.lower().endswith(".gz") else None,
                         is_start=_arc_start if arc else _warc_start)
    yield from _Framer(_Cursor(events), path, arc, max_record_bytes).items()


class _Framer:
    def __init__(self, cur: _Cursor, path: str, arc: bool, max_record_bytes: int) -> None:
        self.cur = cur
        self.path = path
        self.arc = arc
        self.max_record_bytes = max_record_bytes

    def where(self, at: int) -> Where:
        return Where(self.path, offset=self.cur.file_offset(at))

    def damage_failure(self, at: int, in_record: bool) -> Failure:
        """The failure for the damage the cursor stopped at; clears it."""
        cur = self.cur
        damage = cur.damage
        assert damage is not None
        cur.damage = None
        what = {"truncated": "the file ends inside a gzip member",
                "garbage": "bytes that are not gzip data"}.get(damage.reason, damage.error)
        if in_record:
            what = f"record cut short: {what}"
        return Failure(Where(self.path, offset=damage.offset if not in_record
                             else cur.file_offset(at)),
                       damage.reason, what, lost=None if damage.tail else 1,
                       extra={"resumed_at": damage.resumed_at})

    def items(self) -> Iterator[Item]:
        cur = self.cur
        pos = 0
        while True:
            # Separators between records (and stray blank lines) are not records.
            while cur.fill(pos + 1) and cur.byte(pos) in b"\r\n":
                pos += 1
            cur.drop_before(pos)
            if cur.end <= pos:
                if cur.damage is not None:
                    yield self.damage_failure(pos, in_record=False)
                    continue
                return
            item, nxt = self.arc_record(pos) if self.arc else self.warc_record(pos)
            yield item
            pos = nxt

    # ----------------------------------------------------------------------------- WARC

    def cut_short(self, start: int) -> tuple[Item, int]:
        """A record that the end of the file or a damage interrupted."""
        cur = self.cur
        if cur.damage is not None:
            failure = self.damage_failure(start, in_record=True)
            return failure, cur.end
        return Failure(self.where(start), "truncated",
                       "the file ends inside this record; records after it, if any, are lost",
                       lost=None), cur.end

    def bad(self, start: int, reason: str, error: str, url: str | None = None
            ) -> tuple[Item, int]:
        """A record that does not frame. If its gzip member turns out damaged, the damage
        is the reason (one failure for one member, not a framing error plus a damage)."""
        if not self.cur.verify(start + 1):
            return self.cut_short(start)
        return Failure(self.where(start), reason, error, url=url), self.resync(start + 1)

    def resync(self, start: int) -> int:
        """The next offset at or after ``start`` where a record header begins (a
        ``WARC/x.y`` version line; for ARC, a line shaped like an ARC header); the end of
        what can be read when none (end of file, or a damage the caller then reports)."""
        cur = self.cur
        at = start
        while True:
            hit = cur.find(b"\n" if self.arc else b"WARC/", at, at + (1 << 62))
            if hit is None:
                return cur.end  # end of file, or a damage the main loop reports
            if self.arc:
                line_end = cur.find(b"\n", hit + 1, hit + 1 + MAX_HEADER_BYTES)
                if line_end is None:
                    return cur.end
                if _ARC_HEADER.match(cur.take(hit + 1, line_end)):
                    return hit + 1
            else:
                cur.fill(hit + 16)
                if not _WARC_VERSION_LINE.match(cur.take(hit, min(hit + 16, cur.end))):
                    at = hit + 1
                    cur.drop_before(at - 1)
                    continue
                # Not required to start a line: a damaged trailer must not hide the next
                # record. A version line inside some content is framed and, failing, skipped.
                return hit
            at = hit + 1
            cur.drop_before(at - 1)

    def warc_record(self, start: int) -> tuple[Item, int]:
        cur = self.cur
        head_end = cur.find(b"\r\n\r\n", start, start + MAX_HEADER_BYTES)
        if head_end is None:
            if cur.damage is not None or cur.ended:
                return self.cut_short(start)
            return self.bad(start, "bad_header", f"no end of header within {MAX_HEADER_BYTES} bytes")
        header_block = cur.take(start, head_end)
        if not _WARC_START.match(header_block):
            return self.bad(start, "not_a_warc_record",
                            f"expected a WARC header, found {header_block[:40]!r}")
        headers = _parse_headers(header_block)
        url = headers.get("warc-target-uri")
        try:
            length = int(headers.get("content-length", ""))
            if length < 0:
                raise ValueError(length)
        except ValueError:
            return self.bad(start, "bad_content_length",
                            f"Content-Length {headers.get('content-length')!r} is not a length",
                            url)
        body_start = head_end + 4
        end = body_start + length + 4
        if length > self.max_record_bytes:
            return self.skip_large(start, end, url, length)
        if not cur.fill(end):
            return self.cut_short(start)
        if cur.take(end - 4, end) != b"\r\n\r\n":
            return self.bad(start, "bad_content_length",
                            f"the record does not end where Content-Length {length} says", url)
        if not cur.verify(end):  # its gzip member turned out corrupt or cut short
            return self.cut_short(start)
        raw = cur.take(start, end)
        return self.interpret(raw, headers, start), end

    def skip_large(self, start: int, end: int, url: str | None, length: int) -> tuple[Item, int]:
        cur = self.cur
        while cur.end < end:
            cur.drop_before(cur.end)
            if not cur.fill(min(end, cur.end + (1 << 22))):
                if cur.end < end:
                    return self.cut_short(start)
        return Failure(self.where(start), "record_too_large",
                       f"{length} bytes, above the {self.max_record_bytes}-byte limit",
                       url=url), end

    def interpret(self, raw: bytes, headers: dict[str, str], start: int) -> Item:
        where = self.where(start)
        rtype = headers.get("warc-type", "").strip().lower()
        url = headers.get("warc-target-uri")
        ctype = headers.get("content-type", "").lower()
        if rtype in NOT_DOCUMENTS:
            return Skipped(where, rtype)
        if rtype != "response":
            return Failure(where, "unknown_record_type", f"WARC-Type {rtype or '(missing)'!r}",
                           url=url)
        if (url or "").startswith("dns:") or "text/dns" in ctype:
            return Skipped(where, "dns response")
        http = "application/http" in ctype
        page, error = _http_page(raw)
        if page is None:
            if http:
                return Failure(where, "bad_http_response", error, url=url)
            return Skipped(where, "non-HTTP response")
        page["url"] = url
        page["fetched_at"] = _warc_date(headers.get("warc-date"))
        for field, key in PAGE_FIELDS.items():
            if headers.get(field):
                page[key] = headers[field]
            elif field == "warc-truncated" and field in headers:
                page[key] = "unspecified"  # truncated, reason not given: still truncated
        notes = ("warc_truncated",) if "warc-truncated" in headers else ()
        return Record(page, where, kind="page", notes=notes)

    # ------------------------------------------------------------------------------ ARC

    def arc_record(self, start: int) -> tuple[Item, int]:
        """ARC v1: ``URL IP DATE MIME LENGTH\\n`` + LENGTH bytes (+ a newline)."""
        cur = self.cur
        line_end = cur.find(b"\n", start, start + MAX_HEADER_BYTES)
        if line_end is None:
            if cur.damage is not None or cur.ended:
                return self.cut_short(start)
            return self.bad(start, "bad_header", "no ARC header line")
        fields = cur.take(start, line_end).decode("latin-1").split()
        try:
            length = int(fields[-1])
            url = fields[0]
        except (IndexError, ValueError):
            return self.bad(start, "bad_header", f"not an ARC header: {fields[:5]!r}")
        end = line_end + 1 + length
        if length > self.max_record_bytes:
            return self.skip_large(start, end, url, length)
        if not cur.fill(end) or not cur.verify(end):
            return self.cut_short(start)
        where = self.where(start)
        if url.startswith("filedesc:"):
            return Skipped(where, "arc file header"), end
        if url.startswith("dns:"):
            return Skipped(where, "dns response"), end
        content = cur.take(line_end + 1, end)
        date = fields[2] if len(fields) >= 5 else ""
        raw = (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: " + url.encode()
               + b"\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: "
               + str(len(content)).encode() + b"\r\n\r\n" + content + b"\r\n\r\n")
        page, error = _http_page(raw)
        if page is None:
            return Failure(where, "bad_http_response", error, url=url), end
        page["url"] = url
        page["fetched_at"] = _arc_date(date)
        return Record(page, where, kind="page"), end


def _parse_headers(block: bytes) -> dict[str, str]:
    """WARC named fields (lower-cased names; the first occurrence wins)."""
    out: dict[str, str] = {}
    for line in block.decode("utf-8", errors="replace").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep and name.strip():
            out.setdefault(name.strip().lower(), value.strip())
    return out


def _http_page(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """``({"status", "headers", "body"}, "")`` from one whole WARC record, or
    ``(None, why)`` when it holds no parseable HTTP response."""
    from warcio.archiveiterator import ArchiveIterator

    try:
        record = next(iter(ArchiveIterator(io.BytesIO(raw))))
        http = record.http_headers
        if http is None:
            return None, "no HTTP headers"
        protocol = (http.protocol or "").upper()
        if protocol and not protocol.startswith("HTTP"):
            return None, f"protocol {http.protocol!r}"
        try:
            body = record.content_stream().read()
        except Exception:  # noqa: BLE001 - a corrupt content encoding: keep the raw payload
            body = record.raw_stream.read()
        try:
            status = int(http.get_statuscode() or 0)
        except (TypeError, ValueError):
            status = 0
        return {"status": status, "headers": Headers(http.headers).pairs(), "body": body}, ""
    except Exception as exc:  # noqa: BLE001 - any parse failure is this record's reject
        return None, f"{type(exc).__name__}: {exc}"[:300]


def _warc_date(value: str | None) -> dt.datetime | None:
    """WARC-Date as an aware UTC datetime; None when missing or unparseable (unknown is
    better than a made-up epoch for a document's ``fetched_at``)."""
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)


def _arc_date(value: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(value[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def iter_warc_pages(source: str | BinaryIO) -> Iterator[dict[str, Any]]:
    """Only the HTTP responses of a WARC file (a path on any filesystem) or stream, as page
    dicts (failures and non-document records left out): for callers that want pages and
    nothing else."""
    if isinstance(source, str):
        with fs.open_read(source) as fh:
            yield from iter_warc_pages(fh)
        return
    name = getattr(source, "name", "stream.warc")
    for item in read_warc(source, str(name)):
        if isinstance(item, Record):
            yield item.value
