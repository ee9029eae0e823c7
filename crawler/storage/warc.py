"""WARC output (warcio) with a Parquet index; reading goes through the one WARC reader.

Writing: :class:`WarcStore` appends a response and a request record per page, each
record its own gzip member (so any record can be read from its offset alone), into a
file named ``.<name>.open`` while it grows. Past ``max_bytes`` (and at close) the file
is closed and renamed to ``<name>.warc.gz``, then its index shard
``index/<name>.parquet`` (url, request_url, status, warc_file, offset, length,
fetched_at, content_type, training_use, training_evidence) is written atomically. A reader therefore never sees a half
file, and after a crash the durable record of what was fetched is exactly the set of
closed files: a restart re-fetches the open file's pages and nothing else.

Reading: :mod:`afm.readers.warc` (every record of any WARC, damaged or not, met
once); :func:`iter_warc_responses` here yields just its HTTP responses as plain dicts, and
recovery re-indexes a closed file with it too, so a page's ``fetched_at`` is the same
everywhere (None when its WARC-Date does not parse). warcio is used here for writing only.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from afm import fs
from afm.headers import Headers
from afm.io import read_shard, write_shard
from afm.readers import Record, read_file
from afm.readers.warc import iter_warc_pages

INDEX_SCHEMA = pa.schema(
    [
        ("url", pa.string()),
        ("request_url", pa.string()),  # the URL scheduled (differs after redirects)
        ("status", pa.int32()),
        ("warc_file", pa.string()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("fetched_at", pa.timestamp("us", tz="UTC")),
        ("content_type", pa.string()),
        # The training-use decision (afm.consent.training): "allowed" / "optout", and the
        # opt-out evidence as JSON (empty when allowed, or for records of other writers).
        ("training_use", pa.string()),
        ("training_evidence", pa.string()),
    ]
)
TRAINING_USE_HEADER = "AFM-Training-Use"
TRAINING_EVIDENCE_HEADER = "AFM-Training-Evidence"

# Hop-by-hop and encoding headers describe the transfer, not the stored body (we store
# the decoded body): keep them under X-Crawler-* as Common Crawl does.
_TRANSFER_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}


def _http_status_line(status: int, reason: str = "") -> str:
    from http import HTTPStatus

    if not reason:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
    return f"{status} {reason}"


class WarcStore:
    """Rotating WARC writer + Parquet index shards in ``out_dir``."""

    def __init__(self, out_dir: str | Path, prefix: str = "afm", max_bytes: int = 256 << 20) -> None:
        self.out_dir = Path(out_dir)
        self.warc_dir = self.out_dir / "warc"
        self.index_dir = self.out_dir / "index"
        self.warc_dir.mkdir(parents=True, exist_ok=True)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self._writer_id = f"{socket.gethostname().split('.')[0]}-{os.getpid()}"
        self._seq = 0
        self._fh: Any = None
        self._writer: WARCWriter | None = None
        self._name = ""
        self._rows: list[dict[str, Any]] = []
        self.closed_files: list[str] = []
        self.records = 0
        self.bytes = 0

    # ---- recovery -----------------------------------------------------------------------
    def recover(self) -> dict[str, int]:
        """After a crash: drop open (unfinished) files, index closed files lacking a shard."""
        dropped = reindexed = 0
        for tmp in self.warc_dir.glob(".*.open"):
            tmp.unlink()
            dropped += 1
        for warc in sorted(self.warc_dir.glob("*.warc.gz")):
            shard = self.index_dir / (warc.name[: -len(".warc.gz")] + ".parquet")
            if not shard.exists():
                _write_index(shard, index_rows_from_warc(warc))
                reindexed += 1
        return {"dropped_open_files": dropped, "reindexed": reindexed}

    # ---- writing ------------------------------------------------------------------------
    def write(
        self,
        url: str,
        status: int,
        headers: list[tuple[str, str]],
        body: bytes,
        *,
        request_url: str | None = None,
        request_headers: list[tuple[str, str]] | None = None,
        method: str = "GET",
        fetched_at: dt.datetime | None = None,
        warc_headers: dict[str, str] | None = None,
    ) -> tuple[str, int]:
        """Append the response and request records of one page; return (file, offset).
        ``warc_headers``: extra named fields of the response record (the training-use
        decision: ``AFM-Training-Use``, ``AFM-Training-Evidence``)."""
        if self._writer is None:
            self._open()
        assert self._writer is not None and self._fh is not None
        fetched_at = fetched_at or dt.datetime.now(dt.UTC)
        warc_date = fetched_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        http_headers = []
        content_type = ""
        for key, value in headers:
            low = key.lower()
            if low in _TRANSFER_HEADERS:
                http_headers.append((f"X-Crawler-{key}", value))
            else:
                http_headers.append((key, value))
            if low == "content-type" and not content_type:
                content_type = value
        http_headers.append(("Content-Length", str(len(body))))
        resp = self._writer.create_warc_record(
            url,
            "response",
            payload=io.BytesIO(body),
            length=len(body),
            warc_headers_dict={"WARC-Date": warc_date, **(warc_headers or {})},
            http_headers=StatusAndHeaders(_http_status_line(status), http_headers, protocol="HTTP/1.1"),
        )
        target = request_url or url
        path = target.split("://", 1)[-1]
        path = "/" + path.split("/", 1)[1] if "/" in path else "/"
        req = self._writer.create_warc_record(
            url,
            "request",
            payload=io.BytesIO(b""),
            length=0,
            warc_headers_dict={
                "WARC-Date": warc_date,
                "WARC-Concurrent-To": resp.rec_headers.get_header("WARC-Record-ID"),
            },
            http_headers=StatusAndHeaders(f"{method} {path} HTTP/1.1", request_headers or [], is_http_request=True),
        )
        offset = self._fh.tell()
        self._writer.write_record(resp)
        length = self._fh.tell() - offset
        self._writer.write_record(req)
        self._rows.append(
            {
                "url": url,
                "request_url": target,
                "status": int(status),
                "warc_file": self._name + ".warc.gz",
                "offset": offset,
                "length": length,
                "fetched_at": fetched_at,
                "content_type": content_type,
                "training_use": (warc_headers or {}).get(TRAINING_USE_HEADER),
                "training_evidence": (warc_headers or {}).get(TRAINING_EVIDENCE_HEADER),
            }
        )
        self.records += 1
        self.bytes += len(body)
        if self._fh.tell() >= self.max_bytes:
            self.rotate()
        return self._name + ".warc.gz", offset

    def rotate(self) -> None:
        """Close the open file (rename into place, write its index shard)."""
        if self._writer is None:
            return
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        final = self.warc_dir / (self._name + ".warc.gz")
        os.replace(self._tmp_path(), final)
        _write_index(self.index_dir / (self._name + ".parquet"), self._rows)
        self.closed_files.append(str(final))
        self._fh = self._writer = None
        self._rows = []

    def close(self) -> None:
        self.rotate()

    def _tmp_path(self) -> Path:
        return self.warc_dir / f".{self._name}.open"

    def _open(self) -> None:
        self._seq += 1
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        self._name = f"{self.prefix}-{stamp}-{self._writer_id}-{self._seq:05d}"
        self._fh = open(self._tmp_path(), "wb")  # noqa: SIM115 - kept open across records
        self._writer = WARCWriter(self._fh, gzip=True)
        info = self._writer.create_warcinfo_record(
            self._name + ".warc.gz", {"software": "afm crawler (Scrapy, warcio)", "format": "WARC/1.1"}
        )
        self._writer.write_record(info)


def _write_index(path: Path, rows: list[dict[str, Any]]) -> None:
    write_shard(path, pa.Table.from_pylist(rows, schema=INDEX_SCHEMA), INDEX_SCHEMA)


def read_index(out_dir: str | Path) -> list[dict[str, Any]]:
    """All rows of a crawl's index shards (``out_dir/index`` or the index dir itself)."""
    path = Path(out_dir)
    index_dir = path / "index" if (path / "index").is_dir() else path
    rows: list[dict[str, Any]] = []
    for shard in sorted(index_dir.glob("*.parquet")):
        rows.extend(read_shard(shard).to_pylist())
    return rows


def index_rows_from_warc(path: str | Path) -> list[dict[str, Any]]:
    """Index rows rebuilt from a closed WARC file (recovery after a crash), from the one
    WARC reader (:func:`afm.readers.read_file`). Each record is its own gzip member, so a
    response's length runs to where the next record starts (the end of the file for the
    last one): the bytes :meth:`WarcStore.write` counted."""
    path = str(path)
    rows: list[dict[str, Any]] = []
    unended: dict[str, Any] | None = None  # the last response, until the next record starts
    for item in read_file(path):
        start = item.where.offset
        if unended is not None and start is not None and start > unended["offset"]:
            unended["length"] = start - unended["offset"]
            unended = None
        if not (isinstance(item, Record) and item.kind == "page") or start is None:
            continue
        page = item.value
        unended = {
            "url": page["url"],
            "request_url": page["url"],
            "status": page["status"],
            "warc_file": fs.basename(path),
            "offset": start,
            "length": 0,
            "fetched_at": page["fetched_at"],
            "content_type": Headers.of(page["headers"]).get("Content-Type") or "",
            "training_use": page.get("training_use"),
            "training_evidence": page.get("training_evidence"),
        }
        rows.append(unended)
    if unended is not None:
        unended["length"] = fs.size(path) - unended["offset"]
    return rows


def iter_warc_responses(source: str | Path | BinaryIO) -> Iterator[dict[str, Any]]:
    """Every HTTP response record of a WARC (or ARC) file or binary stream, gzip per
    record or plain: ours, Common Crawl's, anyone's, damaged or not.

    Yields ``{"url", "status", "headers", "body", "fetched_at"}``; ``body`` is the
    payload with chunked transfer and content encodings removed, ``fetched_at`` an aware
    UTC datetime (None if the record has no valid date). Records that are not documents
    and records that cannot be read are left out: pipelines read through
    :func:`afm.readers.warc.read_warc`, which reports those as well.
    """

    yield from iter_warc_pages(str(source) if isinstance(source, Path) else source)
