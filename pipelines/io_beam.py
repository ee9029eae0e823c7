"""Beam I/O for the curate pipeline: read crawl/document files, write Parquet shards.

Reading goes through Beam's ``FileSystems`` so ``gs://``, ``s3://`` and local paths all
work; each input file is one element (WARC.gz is not splittable), spread over workers
by a Reshuffle. Every record read becomes exactly one of: a *page* (an HTTP response,
for extraction), a *document* (already has text), or a *reject* of the ``read`` stage
(bad record, unreadable file), so nothing read is ever lost without a trace.

Writing is deterministic and atomic: a document goes to shard ``hash(id) % N`` where N
comes from the total size and the target shard size; a shard is sorted by id, written to
a temporary name under ``.tmp/`` and renamed into place only when complete. A retried
bundle rewrites the identical file, so retries never duplicate rows nor expose a partial
shard.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from afm.io import atomic_path
from afm.schema import DOCUMENT_FIELDS, SOURCES, make_document, make_reject, to_table

PAGE, DOC, BAD = "page", "doc", "bad"
WARC_SUFFIXES = (".warc", ".warc.gz", ".arc.gz")
PARQUET_SUFFIXES = (".parquet",)
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
TMP_DIR = ".tmp"


# ----------------------------------------------------------------------------- inputs


def is_remote(path: str) -> bool:
    return "://" in path


def join(base: str, *parts: str) -> str:
    """Path join that needs no filesystem plugin (so a dry run can name gs:// paths on a
    machine without Beam's GCP extra)."""
    if is_remote(base):
        return "/".join([base.rstrip("/"), *[p.strip("/") for p in parts]])
    return os.path.join(base, *parts)


def input_kind(path: str) -> str:
    """``warc`` | ``parquet`` | ``jsonl`` | ``dir`` (a directory of code repositories)."""
    low = path.lower()
    if low.endswith(WARC_SUFFIXES):
        return "warc"
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if not is_remote(path) and os.path.isdir(path):
        return "dir"
    raise ValueError(
        f"{path}: unsupported input (expected .warc[.gz], .parquet, .jsonl[.gz], "
        "or for --source code a directory of repositories)"
    )


def resolve_inputs(patterns: list[str], source: str) -> tuple[list[str], list[str]]:
    """``(inputs, skipped)``: the files named by paths, directories and globs (local or
    any Beam filesystem), and the files found under a directory or glob that are not a
    supported input type (listed in the manifest, not read). A file named explicitly must
    be supported. For ``--source code`` a local directory is one input (a tree of
    repositories); a directory holding WARC files is a crawl, whose WARCs are the input.
    Sorted and deduplicated.
    """
    from afm.io import expand_inputs

    found: list[str] = []
    ignored: list[str] = []
    explicit: set[str] = set()
    for pattern in patterns:
        if is_remote(pattern):
            glob = pattern + "**" if pattern.endswith("/") else pattern
            try:
                matches = FileSystems.match([glob])[0].metadata_list
            except ValueError:
                # No filesystem plugin here for this scheme (e.g. gs:// without Beam's GCP
                # extra): keep the pattern; only a dry run gets this far with it (the option
                # check refuses to submit without the extra).
                found.append(pattern)
                explicit.add(pattern)
                continue
            if not matches:
                raise FileNotFoundError(f"input not found: {pattern}")
            found.extend(m.path for m in matches)
            if glob == pattern and not any(c in pattern for c in "*?["):
                explicit.add(pattern)
        elif source == "code" and os.path.isdir(pattern):
            found.append(os.path.abspath(pattern))
        elif os.path.isdir(pattern):
            files = [os.path.abspath(p) for p in expand_inputs([pattern])]
            warcs = [f for f in files if f.lower().endswith(WARC_SUFFIXES)]
            if warcs:
                # A crawl directory: its WARCs are the pages; the crawler's index Parquet,
                # frontier/outcome JSONL and summary are bookkeeping, not documents.
                found.extend(warcs)
                ignored.extend(sorted(set(files) - set(warcs)))
            else:
                found.extend(files)
        else:
            if os.path.isfile(pattern):
                explicit.add(os.path.abspath(pattern))
            found.extend(os.path.abspath(p) for p in expand_inputs([pattern]))
    inputs, skipped = [], []
    for f in sorted(set(found)):
        try:
            input_kind(f)
            inputs.append(f)
        except ValueError:
            if f in explicit:
                raise
            skipped.append(f)
    if not inputs:
        raise FileNotFoundError(f"no supported input files in {patterns}")
    return inputs, sorted(set(skipped) | set(ignored))


def _parse_warc_date(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.UTC)
    except ValueError:
        return None


def iter_warc_pages(fileobj: Any) -> Iterator[dict[str, Any]]:
    """HTTP response records of a WARC stream (plain or per-record gzip) as page dicts
    ``{"url","status","headers","body","fetched_at"}``: the crawler's own reader, which
    also reads Common Crawl's files, so there is one WARC parser in the project."""
    from afm.crawler.warc import iter_warc_responses

    return iter_warc_responses(fileobj)


def _as_utc(value: Any) -> dt.datetime | None:
    if value is None or isinstance(value, dt.datetime):
        if isinstance(value, dt.datetime) and value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value
    if isinstance(value, str):
        return _parse_warc_date(value)
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, tz=dt.UTC)
    return None


def classify_record(rec: dict[str, Any], source: str) -> tuple[str, dict[str, Any]]:
    """One record of a Parquet/JSONL file -> ``(PAGE|DOC|BAD, payload)``.

    A record with ``text`` is a document; one with ``body``/``html`` and no text is a
    crawl record (page) for extraction; code-file records (``content`` + ``path``) become
    code documents; anything else is a ``read`` reject naming what was missing.
    """
    if not isinstance(rec, dict):
        skeleton = make_document("", source=source, id=_content_id(repr(rec)))
        return BAD, make_reject(skeleton, "read", "not_a_record", value=repr(rec)[:200])
    text = rec.get("text")
    if text is None and isinstance(rec.get("content"), str) and rec.get("path"):
        text = rec["content"]
        repo = rec.get("repo") or rec.get("repository") or ""
        rec = {**rec, "url": rec.get("url") or f"{repo}/{rec['path']}".lstrip("/"),
               "title": rec.get("title") or rec["path"]}
    if text is None and (rec.get("body") is not None or rec.get("html") is not None):
        body = rec.get("body") if rec.get("body") is not None else rec.get("html")
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogatepass")
        return PAGE, {
            "url": rec.get("url"),
            "status": int(rec.get("status") or 200),
            "headers": dict(rec.get("headers") or {}),
            "body": body,
            "fetched_at": _as_utc(rec.get("fetched_at")),
        }
    url = rec.get("url") if isinstance(rec.get("url"), str) else None
    if not isinstance(text, str):
        skeleton = make_document("", url=url, source=source,
                                 id=str(rec.get("id") or _content_id(repr(sorted(rec)))))
        return BAD, make_reject(skeleton, "read", "missing_text", keys=sorted(rec)[:20])
    fields = {k: rec[k] for k in DOCUMENT_FIELDS if k in rec and rec[k] is not None}
    for k in ("id", "url", "source", "text", "fetched_at"):
        fields.pop(k, None)
    doc_source = rec.get("source") if rec.get("source") in SOURCES else source
    doc = make_document(text, url=url, source=doc_source, id=rec.get("id") or None,
                        fetched_at=_as_utc(rec.get("fetched_at")), **fields)
    if rec.get("license") is not None:  # code files: the repository licence, for CodeFilter
        doc["license"] = rec["license"]  # type: ignore[typeddict-unknown-key]
    return DOC, doc


def _content_id(key: str) -> str:
    return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def read_file_items(path: str, source: str, allow_pages: bool = True
                    ) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every record of one input file as ``(kind, payload)``; a file that cannot be read
    (corrupt gzip, truncated WARC, not Parquet) ends with one ``read`` reject naming the
    file and the error, after the records read before the damage. When the source has no
    extract stage (``allow_pages=False``) a crawl page is a ``read`` reject too."""
    for kind, payload in _read_file_items(path, source):
        if kind == PAGE and not allow_pages:
            skeleton = make_document("", url=payload.get("url"), source=source,
                                     fetched_at=payload.get("fetched_at"))
            yield BAD, make_reject(skeleton, "read", "page_needs_extract",
                                   detail=f"source {source} has no extract stage")
        else:
            yield kind, payload


def _read_file_items(path: str, source: str) -> Iterator[tuple[str, dict[str, Any]]]:
    kind = input_kind(path)
    try:
        if kind == "warc":
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
                for page in iter_warc_pages(fh):
                    yield PAGE, page
        elif kind == "parquet" and source == "code" and not is_remote(path) and _is_code_parquet(path):
            from afm.filters.code import iter_parquet_files

            for rec in iter_parquet_files(path):
                yield DOC, dict(rec)
        elif kind == "parquet":
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
                pf = pq.ParquetFile(fh)
                for batch in pf.iter_batches(batch_size=512):
                    for rec in batch.to_pylist():
                        for name in ("pii_redactions", "signals"):
                            if isinstance(rec.get(name), list):
                                rec[name] = dict(rec[name])
                        yield classify_record(rec, source)
        elif kind == "jsonl":
            with FileSystems.open(path) as fh:  # AUTO: .gz decompressed
                for lineno, raw in enumerate(iter(fh.readline, b""), 1):
                    line = raw.strip()
                    if not line:
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as exc:
                        skeleton = make_document("", source=source,
                                                 id=_content_id(f"{path}:{lineno}"))
                        yield BAD, make_reject(skeleton, "read", "bad_json",
                                               file=path, line=lineno, error=exc.msg)
                        continue
                    yield classify_record(rec, source)
        elif kind == "dir":
            yield from _read_code_dir(path, source)
    except Exception as exc:  # noqa: BLE001 - recorded as a reject, never lost
        skeleton = make_document("", url=path, source=source, id=_content_id(f"file:{path}"))
        yield BAD, make_reject(skeleton, "read", "unreadable_file", file=path,
                               error=f"{type(exc).__name__}: {exc}"[:500])


def _is_code_parquet(path: str) -> bool:
    """A Parquet of code files (columns path, content, repo)."""
    return {"path", "content", "repo"} <= set(pq.read_schema(path).names)


def _read_code_dir(path: str, source: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """A directory of cloned repositories, through ``afm.filters.code.iter_repo_files``."""
    from afm.filters.code import iter_repo_files

    for rec in iter_repo_files(path):
        yield DOC, dict(rec)


class ReadInputs(beam.PTransform):
    """File paths -> ``items`` (every record, tagged) split into pages / docs / rejected."""

    def __init__(self, files: list[str], source: str, allow_pages: bool = True):
        super().__init__()
        self.files = list(files)
        self.source = source
        self.allow_pages = allow_pages

    def expand(self, pbegin: beam.pvalue.PBegin) -> dict[str, beam.PCollection]:
        source = self.source
        items = (
            pbegin
            | "files" >> beam.Create(self.files)
            | "spread files" >> beam.Reshuffle()
            | "read records" >> beam.FlatMap(read_file_items, source, self.allow_pages)
        )
        split = items | "split by kind" >> beam.Partition(
            lambda item, _n: {PAGE: 0, DOC: 1, BAD: 2}[item[0]], 3
        )
        unwrap = lambda item: item[1]  # noqa: E731
        return {
            "items": items,
            "pages": split[0] | "pages" >> beam.Map(unwrap),
            "docs": split[1] | "docs" >> beam.Map(unwrap),
            "rejected": split[2] | "bad records" >> beam.Map(unwrap),
        }


# ----------------------------------------------------------------------------- outputs


def shard_of(doc_id: str, num_shards: int) -> int:
    """Stable shard index of a document (same id -> same shard on every run and runner)."""
    h = hashlib.blake2b(str(doc_id).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(h, "big") % max(1, num_shards)


def record_size(rec: dict[str, Any]) -> int:
    """Approximate uncompressed bytes of a record (text dominates; 256 for the rest)."""
    return len(rec.get("text") or "") + len(rec.get("url") or "") + 256


def fail_once(point: str, key: str, marker_dir: str) -> None:
    """Fault injection: raise the first time ``(point, key)`` is seen (marker file)."""
    name = hashlib.sha1(f"{point}\0{key}".encode()).hexdigest()[:24]
    marker = join(marker_dir, f"{point}-{name}")
    if FileSystems.exists(marker):
        return
    FileSystems.mkdirs(marker_dir) if not FileSystems.exists(marker_dir) else None
    with FileSystems.create(marker) as fh:
        fh.write(key.encode("utf-8", "surrogatepass"))
    raise RuntimeError(f"injected failure at {point} ({key}); the retry will succeed")


class FailOncePerBundle(beam.DoFn):
    """Testing aid: the first element of each bundle fails on its first attempt."""

    def __init__(self, point: str, marker_dir: str):
        self.point = point
        self.marker_dir = marker_dir

    def start_bundle(self) -> None:
        self._first = True

    def process(self, doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if self._first:
            self._first = False
            fail_once(self.point, str(doc.get("id")), self.marker_dir)
        yield doc


class WriteShardFn(beam.DoFn):
    """``(shard_index, records)`` -> one Parquet file, written to a temp name and renamed."""

    ROWS_PER_BATCH = 2048

    def __init__(self, output: str, prefix: str, schema: pa.Schema, compression: str,
                 text_chars: int = 0, fail_marker_dir: str | None = None):
        self.output = output
        self.prefix = prefix
        self.schema = schema
        self.compression = None if compression == "none" else compression
        self.text_chars = text_chars
        self.fail_marker_dir = fail_marker_dir

    def process(self, element: tuple[int, Iterable[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
        index, records = element
        # Deterministic content: the same set of records always gives the same file.
        rows = sorted(records, key=lambda r: (str(r.get("id")), r.get("url") or "",
                                              r.get("rejected_by") or "", r.get("text") or ""))
        if self.text_chars > 0:
            rows = [{**r, "text": (r.get("text") or "")[: self.text_chars]} for r in rows]
        final = join(self.output, f"{self.prefix}-{index:05d}.parquet")
        tmp_dir = join(self.output, TMP_DIR)
        if not is_remote(tmp_dir):
            os.makedirs(tmp_dir, exist_ok=True)
        tmp = join(tmp_dir, f"{self.prefix}-{index:05d}.{uuid.uuid4().hex}.parquet")
        with FileSystems.create(tmp, mime_type="application/octet-stream",
                                compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            writer = pq.ParquetWriter(fh, self.schema, compression=self.compression)
            for start in range(0, len(rows), self.ROWS_PER_BATCH):
                writer.write_table(to_table(rows[start : start + self.ROWS_PER_BATCH], self.schema))
            writer.close()
        if self.fail_marker_dir:
            fail_once("write", f"{self.prefix}-{index}", self.fail_marker_dir)
        if FileSystems.exists(final):  # a retried bundle: replace with the identical file
            FileSystems.delete([final])
        FileSystems.rename([tmp], [final])
        size = FileSystems.match([final])[0].metadata_list[0].size_in_bytes
        yield {"kind": self.prefix, "path": final, "rows": len(rows), "bytes": size}


class WriteShards(beam.PTransform):
    """Records -> ``<output>/<prefix>-NNNNN.parquet``; returns one info dict per file.

    The number of shards is ``ceil(total_size / target)``: the total comes from a global
    combine used as a side input, so shard sizes follow the data, not the worker count.
    """

    def __init__(self, output: str, prefix: str, schema: pa.Schema, target_bytes: int,
                 compression: str = "zstd", text_chars: int = 0,
                 fail_marker_dir: str | None = None):
        super().__init__()
        self.output = output
        self.prefix = prefix
        self.schema = schema
        self.target_bytes = max(1, int(target_bytes))
        self.compression = compression
        self.text_chars = text_chars
        self.fail_marker_dir = fail_marker_dir

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        target = self.target_bytes
        total = records | "size" >> beam.Map(record_size) | "total size" >> beam.CombineGlobally(sum)
        num_shards = total | "shard count" >> beam.Map(lambda t: max(1, math.ceil(t / target)))
        return (
            records
            | "key by shard" >> beam.Map(
                lambda r, n: (shard_of(r.get("id"), n), r), n=beam.pvalue.AsSingleton(num_shards))
            | "group shards" >> beam.GroupByKey()
            | "write shard" >> beam.ParDo(WriteShardFn(
                self.output, self.prefix, self.schema, self.compression, self.text_chars,
                self.fail_marker_dir))
        )


def write_json(path: str, data: Any) -> None:
    """JSON through FileSystems, atomically on local disks (temp + rename)."""
    payload = json.dumps(data, indent=2, sort_keys=True, default=str).encode("utf-8")
    write_bytes(path, payload, mime_type="application/json")


def read_json(path: str) -> Any:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
        return json.loads(fh.read().decode("utf-8"))


def write_bytes(path: str, payload: bytes, mime_type: str = "application/octet-stream") -> None:
    if is_remote(path):
        with FileSystems.create(path, mime_type=mime_type) as fh:
            fh.write(payload)
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = atomic_path(path)  # the project's one temp-name convention (afm/io.py)
    with open(tmp, "wb") as fh:
        fh.write(payload)
    os.replace(tmp, path)
