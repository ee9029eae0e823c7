"""Beam I/O of every document pipeline: read input files, write Parquet shards.

Reading wraps the one input boundary (:mod:`afm.readers` decodes, :mod:`afm.pipelines.beam.coerce`
validates): each input file is one element (WARC.gz is not splittable), spread over
workers by a Reshuffle, and every record met becomes exactly one item:

* ``page``: an HTTP response for the extract stage;
* ``doc``: a document with every field of the schema's type;
* ``bad``: a ``read`` reject naming the file, its offset/line/row and the reason
  (undecodable record, corrupt gzip member, truncated tail, wrong types, ...);
* ``skip``: a record that is by design not a document (WARC request/metadata records),
  counted apart.

Pages and documents carry ``_origin`` = (file number, position, place) so that policies
needing input order (which of two records with one id is kept) are deterministic on any
runner; the writers drop it with every other key outside the schema.

Writing is deterministic and atomic: a document goes to shard ``hash(id) % N`` where N
comes from the total size and the target shard size; a shard is sorted by id, written to
a temporary name and renamed into the run's staging directory (see
:mod:`afm.outputs`) only when complete. A retried bundle rewrites the identical file, so
retries never duplicate rows nor expose a partial shard.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.metrics import Metrics

from afm import fs
from afm.filters.code import iter_parquet_files, iter_repo_files
from afm.io import directories_are_inputs, write_shard
from afm.io import resolve_inputs as resolve_files
from afm.parquet import row_count, schema_of
from afm.pipelines.beam.coerce import classify, with_text_from
from afm.pipelines.beam.cputime import StageClock, timed_iter
from afm.pipelines.beam.ids import ORIGIN
from afm.pipelines.beam.packing import pack, unpack
from afm.pipelines.beam.progress import ProgressFile
from afm.pipelines.beam.spill import RestoreFn, SpillReader, StowFn
from afm.readers import SUPPORTED_SUFFIXES, Failure, Record, Skipped, Where, file_format, read_file
from afm.schema import document_id, make_document, make_reject, to_table

PAGE, DOC, BAD, SKIP = "page", "doc", "bad", "skip"
READ_NAMESPACE = "afm.read"
is_remote = fs.is_remote
join = fs.join


# ----------------------------------------------------------------------------- inputs


def input_kind(path: str) -> str:
    """``warc`` | ``parquet`` | ``jsonl`` | ``dir`` (a directory of code repositories)."""
    fmt = file_format(path)
    if fmt is not None:
        return fmt
    if not is_remote(path) and os.path.isdir(path):
        return "dir"
    raise ValueError(
        f"{path}: unsupported input (expected .warc[.gz], .parquet, .jsonl[.gz], "
        "or for --source code a directory of repositories)"
    )


def resolve_inputs(patterns: list[str], source: str) -> tuple[list[str], list[str]]:
    """``(inputs, skipped)`` for the curate family of commands: the files named by paths,
    directories and globs (rules in :mod:`afm.io`: a dataset directory only with its
    ``_SUCCESS`` marker and only its ``documents-*``; a crawl directory's WARCs), and the
    files found but not read, each with why. For ``--source code`` a local directory is
    one input (a tree of repositories). A rejects file named explicitly may be
    re-curated."""
    remote = [p for p in patterns if is_remote(p)]
    if not all(fs.reachable(p) for p in remote):
        # No filesystem plugin here for this scheme (e.g. gs:// without Beam's GCP
        # extra): keep the patterns; only a dry run gets this far with them (the option
        # check refuses to submit without the extra).
        local = [p for p in patterns if not is_remote(p)]
        found = resolve_files(local, allow_rejects=True).files if local else []
        return sorted(found + remote), []
    resolved = resolve_files(patterns, allow_rejects=True,
                             directories_as_inputs=directories_are_inputs(source))
    if not resolved.files:
        raise FileNotFoundError(no_inputs_message(patterns, resolved.skipped))
    return resolved.files, [f"{path} ({why})" for path, why in resolved.skipped]


def no_inputs_message(patterns: list[str], skipped: list[tuple[str, str]]) -> str:
    """Why nothing can be read, what was found instead, and what would be read."""
    from collections import Counter


    kinds = Counter(_suffix(path) for path, _ in skipped)
    found = (f"; found {sum(kinds.values())} other file(s): "
             + ", ".join(f"{k} ({n})" for k, n in kinds.most_common(6))) if kinds else ""
    hint = (" (HTML pages: crawl them with `afm crawl` or pack them as WARC; text: JSONL "
            'lines {"id", "text"})') if any(k in (".html", ".htm", ".html.gz") for k in kinds) else ""
    return (f"no supported input files in {list(patterns)}{found}. afm reads "
            f"{', '.join(SUPPORTED_SUFFIXES)} files, directories and globs of them{hint}")


def _suffix(path: str) -> str:
    name = path.rsplit("/", 1)[-1].lower()
    parts = name.split(".")
    if len(parts) < 2:
        return "(no suffix)"
    return "." + ".".join(parts[-2:]) if parts[-1] == "gz" and len(parts) > 2 else "." + parts[-1]


def read_reject(where: Where, source: str, reason: str, details: dict[str, Any],
                url: str | None = None, text: str = "", doc_id: str | None = None
                ) -> dict[str, Any]:
    """The ``read`` reject of a record that did not become a document or page."""
    place = f"{where.file}:{where.offset}:{where.line}:{where.row}"
    skeleton = make_document(text, url=url if isinstance(url, str) else None, source=source,
                             id=doc_id or document_id(None, place))  # the same place, the same id
    return make_reject(skeleton, "read", reason, **{**where.details(), **details})


def classify_record(rec: Any, source: str, where: Where | None = None,
                    text_fields: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    """One decoded Parquet/JSONL record -> ``(PAGE|DOC|BAD, payload)`` (see
    :func:`afm.pipelines.beam.coerce.classify` for the rules)."""
    where = where or Where("<memory>")
    if text_fields:
        rec = with_text_from(rec, text_fields)
    outcome = classify(rec, source)
    for note in outcome.notes:
        Metrics.counter(READ_NAMESPACE, f"note.{note}").inc()
    if outcome.kind == "bad":
        given = rec.get("id") if isinstance(rec, dict) else None
        return BAD, read_reject(where, source, outcome.reason, outcome.details,
                                url=outcome.value.get("url"),
                                text=outcome.value.get("text") or "",
                                doc_id=given if isinstance(given, str) and given else None)
    return (PAGE if outcome.kind == "page" else DOC), outcome.value


def read_file_items(path: str, source: str, allow_pages: bool = True, file_no: int = 0,
                    text_fields: tuple[str, ...] = (), progress: Any = None
                    ) -> Iterator[tuple[str, Any]]:
    """Every record of one input file as ``(kind, payload)`` (see the module docstring).
    Never raises for bad input: every failure is a ``read`` reject. ``progress``: a
    :class:`~afm.pipelines.beam.progress.ProgressFile` told each record met (``read``) and
    the byte offset reached."""
    for kind, payload, where in _read_file_items(path, source, allow_pages, file_no, text_fields):
        if progress is not None:
            if where is not None and where.offset:
                progress.bytes_current = max(progress.bytes_current, int(where.offset))
            if kind != SKIP:
                progress.add("read")
        yield kind, payload
    if progress is not None:  # the whole file is read
        progress.bytes_current = 0
        progress.bytes_done += _size_or_zero(path)
        progress.publish()


def _size_or_zero(path: str) -> int:
    try:
        return fs.size(path) if not os.path.isdir(path) else 0
    except OSError:
        return 0


def _read_file_items(path: str, source: str, allow_pages: bool, file_no: int,
                     text_fields: tuple[str, ...]) -> Iterator[tuple[str, Any, Where | None]]:
    kind = input_kind(path)
    if kind == "dir":
        items: Iterable[Any] = _code_dir_items(path)
    elif kind == "parquet" and source == "code" and not is_remote(path) and _is_code_parquet(path):
        items = _code_parquet_items(path)
    else:
        items = read_file(path)
    for item in items:
        if isinstance(item, Skipped):
            Metrics.counter(READ_NAMESPACE, f"skipped.{item.what}").inc()
            yield SKIP, {"file": path, "what": item.what}, item.where
            continue
        if isinstance(item, Failure):
            if item.lost is None:
                Metrics.counter(READ_NAMESPACE, "unknown_loss").inc()
            yield BAD, read_reject(item.where, source, item.reason, {
                "error": item.error[:500],
                "records_lost": item.lost if item.lost is not None else "unknown",
                **item.extra}, url=item.url), item.where
            continue
        for note in item.notes:
            Metrics.counter(READ_NAMESPACE, f"note.{note}").inc()
        if item.kind == "page":
            out_kind, payload = PAGE, item.value
        else:
            out_kind, payload = classify_record(item.value, source, item.where, text_fields)
        if out_kind == PAGE and not allow_pages:
            yield BAD, read_reject(item.where, source, "page_needs_extract",
                                   {"detail": f"source {source} has no extract stage"},
                                   url=payload.get("url")), item.where
            continue
        if out_kind != BAD:
            payload[ORIGIN] = (file_no, item.where.sort_key(), item.where.describe())
        yield out_kind, payload, item.where


def _is_code_parquet(path: str) -> bool:
    """A Parquet of code files (columns path, content, repo)."""
    try:
        return {"path", "content", "repo"} <= set(schema_of(path).names)
    except Exception:  # noqa: BLE001 - unreadable: the generic reader reports it
        return False


def _code_parquet_items(path: str) -> Iterator[Any]:
    """A Parquet of code files through ``afm.filters.code.iter_parquet_files`` (which
    finds each repository's licence in the same file); rows that are not code files are
    counted as skipped, and rows lost to a read error as failures, so the file's row count
    (from its footer) is always accounted."""

    declared = row_count(path)
    stats: dict[str, int] = {}
    done = 0
    try:
        for done, rec in enumerate(iter_parquet_files(path, stats=stats), 1):  # noqa: B007
            yield Record(dict(rec), Where(path, row=done - 1))
    except Exception as exc:  # noqa: BLE001 - recorded below, never lost
        error = f"{type(exc).__name__}: {exc}"
    else:
        error = ""
    skipped = stats.get("skipped_not_code", 0)
    for _ in range(skipped):
        yield Skipped(Where(path, row=None), "not a code file")
    for i in range(done + skipped, declared):
        yield Failure(Where(path, row=i), "unreadable_row_group", error or "row not read")


def _code_dir_items(path: str) -> Iterator[Any]:
    """A directory of cloned repositories, through ``afm.filters.code.iter_repo_files``;
    files it passes over are counted (not code: skipped; too large or unreadable:
    failures)."""

    stats: dict[str, int] = {}
    for n, rec in enumerate(iter_repo_files(path, stats=stats)):
        yield Record(dict(rec), Where(path, row=n))
    for _ in range(stats.get("skipped_not_code", 0)):
        yield Skipped(Where(path), "not a code file")
    for why in ("too_large", "unreadable"):
        for _ in range(stats.get(f"skipped_{why}", 0)):
            yield Failure(Where(path), f"code_file_{why}", f"a repository file was {why}")


def should_reshuffle(setting: str, files: int, below_files: int, workers: int | None = None) -> bool:
    """Whether to spread the records read over workers: ``always``, ``never``, or
    ``auto`` = when there are fewer than ``below_files`` input files (too few to keep a
    cluster busy one file per worker; above that the shuffle of every raw record, the
    largest bytes of the run, buys nothing) and more than one worker (``workers``: the
    local runner's worker processes; None where the runner decides, as a cluster's does).
    One worker has nowhere to spread to, and the spread would only write every page's
    HTML to a spill file and read it back (on 700 real pages most of a one-worker curate
    run's spill files: 31.1 MB with the spread, 4.1 without)."""
    if setting not in ("auto", "always", "never"):
        raise ValueError(f"reshuffle: expected auto, always or never, got {setting!r}")
    if setting == "auto":
        return files < below_files and (workers is None or workers > 1)
    return setting == "always"


class _ReadFileFn(beam.DoFn):
    """``(file number, path)`` -> every record of the file (:func:`read_file_items`)."""

    def __init__(self, source: str, allow_pages: bool, text_fields: tuple[str, ...],
                 progress_dir: str | None):
        self.source, self.allow_pages, self.text_fields = source, allow_pages, text_fields
        self.progress_dir = progress_dir

    def setup(self) -> None:
        self.progress = ProgressFile(self.progress_dir, "read") if self.progress_dir else None
        self.clock = StageClock("read")

    def process(self, numbered: tuple[int, str]) -> Iterator[tuple[str, Any]]:
        file_no, path = numbered
        yield from timed_iter(read_file_items(path, self.source, self.allow_pages, file_no,
                                              self.text_fields, self.progress), self.clock)

    def finish_bundle(self) -> None:
        self.clock.flush()


class ReadInputs(beam.PTransform):
    """File paths -> every record met, split into ``pages`` / ``docs`` / ``rejected``
    (together: the documents in) and ``skipped`` (records that are not documents by
    design). No PCollection of all records is made: the local runner would hold a whole
    copy of the input only to count it, so callers count the parts.

    Files are spread over workers; a file is read by one worker (a WARC.gz cannot be
    split). With ``reshuffle`` the crawl pages read are then spread too (packed, so the
    shuffle carries compressed bytes), so that extraction, the expensive step, runs on
    every worker even when the input is one large WARC. Documents need no such step: the
    duplicate-id policy right after reading already shuffles them by id. Common Crawl's
    tens of thousands of files keep every worker busy without it; see
    :func:`should_reshuffle`."""

    def __init__(self, files: list[str], source: str, allow_pages: bool = True,
                 text_fields: tuple[str, ...] = (), reshuffle: bool = False,
                 progress_dir: str | None = None, spill_dir: str | None = None):
        super().__init__()
        self.spill_dir = spill_dir  # pages cross the spread with their bodies on disk
        self.files = list(files)
        self.source = source
        self.allow_pages = allow_pages
        self.text_fields = tuple(text_fields)
        self.reshuffle = reshuffle
        self.progress_dir = progress_dir  # local runners: publish what was read (progress.py)

    def expand(self, pbegin: Any) -> dict[str, beam.PCollection]:
        # Applied to the pipeline: the files known when it was built. Applied to a
        # PCollection of ``(file number, path)``: files listed while the job runs (``afm
        # curate --urls`` lists its fetch's WARC files once the fetch is done).
        files = (pbegin | "files" >> beam.Create(list(enumerate(self.files)))
                 if isinstance(pbegin, beam.pvalue.PBegin) else pbegin)
        items = (
            files
            | "spread files" >> beam.Reshuffle()
            | "read records" >> beam.ParDo(_ReadFileFn(self.source, self.allow_pages, self.text_fields,
                                                       self.progress_dir))
        )
        split = items | "split by kind" >> beam.Partition(
            lambda item, _n: {PAGE: 0, DOC: 1, BAD: 2, SKIP: 3}[item[0]], 4
        )
        unwrap = lambda item: item[1]  # noqa: E731
        pages = split[0] | "pages" >> beam.Map(unwrap)
        if self.reshuffle and self.spill_dir:  # afm.pipelines.beam.spill

            pages = (pages | "stow pages" >> beam.ParDo(StowFn(self.spill_dir, ("body",)))
                     | "pack pages" >> beam.Map(pack)
                     | "spread pages" >> beam.Reshuffle()
                     | "unpack pages" >> beam.Map(unpack)
                     | "restore pages" >> beam.ParDo(RestoreFn()))
        elif self.reshuffle:
            pages = (pages | "pack pages" >> beam.Map(pack)
                     | "spread pages" >> beam.Reshuffle()
                     | "unpack pages" >> beam.Map(unpack))
        return {
            "pages": pages,
            "docs": split[1] | "docs" >> beam.Map(unwrap),
            "rejected": split[2] | "bad records" >> beam.Map(unwrap),
            "skipped": split[3] | "not documents" >> beam.Map(unwrap),
        }


# ----------------------------------------------------------------------------- outputs


def shard_of(doc_id: str, num_shards: int) -> int:
    """Stable shard index of a document (same id -> same shard on every run and runner): the
    one rule of every pipeline that shards by id (curate's documents and rejects, tokenize's
    token shards)."""
    h = hashlib.blake2b(str(doc_id).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(h, "big") % max(1, num_shards)


def fail_once(point: str, key: str, marker_dir: str) -> None:
    """Fault injection: raise the first time ``(point, key)`` is seen (marker file)."""
    name = hashlib.sha1(f"{point}\0{key}".encode()).hexdigest()[:24]
    marker = join(marker_dir, f"{point}-{name}")
    if fs.exists(marker):
        return
    fs.write_bytes(marker, key.encode("utf-8", "surrogatepass"))  # its directory made as needed
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
    """``(shard_index, records)`` -> one sorted Parquet file (:func:`afm.io.write_shard`)."""

    ROWS_PER_BATCH = 2048

    def __init__(self, output: str, prefix: str, schema: pa.Schema, compression: str,
                 fail_marker_dir: str | None = None):
        self.output = output
        self.prefix = prefix
        self.schema = schema
        self.compression = None if compression == "none" else compression
        self.fail_marker_dir = fail_marker_dir

    def setup(self) -> None:
        self.clock = StageClock("write")

    def process(self, element: tuple[int, Iterable[tuple[str, bytes]]]
                ) -> Iterator[dict[str, Any]]:
        index, packed = element
        # Sorted packed, unpacked one row group at a time: a shard costs its compressed
        # size in memory, not its Python objects (texts stowed in spill files are read
        # back one row group at a time too).
        rows = sorted(packed)
        final = join(self.output, f"{self.prefix}-{index:05d}.parquet")
        reader = SpillReader()
        tables = (to_table(_in_order(rows[start:end], reader), self.schema)
                  for start, end in _row_groups(rows, self.ROWS_PER_BATCH))
        fault = None
        if self.fail_marker_dir:
            marker_dir, key = self.fail_marker_dir, f"{self.prefix}-{index}"
            fault = lambda: fail_once("write", key, marker_dir)  # noqa: E731
        try:
            size = self.clock.call(lambda: write_shard(final, tables, self.schema, compression=self.compression,
                                                       before_publish=fault))
        finally:
            reader.close()
        self.clock.flush()
        yield {"kind": self.prefix, "path": final, "rows": len(rows), "bytes": size}


def _row_groups(rows: list[tuple[str, bytes]], size: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of about ``size`` rows each, never cutting a run of one id."""
    start = 0
    while start < len(rows):
        end = min(start + size, len(rows))
        while end < len(rows) and rows[end][0] == rows[end - 1][0]:
            end += 1
        yield start, end
        start = end


def _in_order(rows: list[tuple[str, bytes]], reader: Any) -> list[dict[str, Any]]:
    """Packed rows (sorted) -> records, texts restored. Deterministic content: sorted by
    id, then, among records of one id (duplicate-id rejects), by the packed record with
    its text (a deterministic function of the record; a stowed record's bytes name a
    spill file), so the same set of records always gives the same file."""

    records = [reader.restore(unpack(blob)) for _id, blob in rows]
    out: list[dict[str, Any]] = []
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i][0] != rows[start][0]:
            run = records[start:i]
            out.extend(run if len(run) == 1 else sorted(run, key=pack))
            start = i
    return out


class WriteShards(beam.PTransform):
    """Packed records (:func:`afm.pipelines.beam.packing.pack_record`) ->
    ``<output>/<prefix>-NNNNN.parquet``; returns one info dict per file.

    The number of shards is ``ceil(total_size / target)``: the total comes from a global
    combine used as a side input, so shard sizes follow the data, not the worker count.
    Records arrive packed, so what waits for that side input (and the shuffle after it)
    is compressed bytes, not Python dicts.
    """

    def __init__(self, output: str, prefix: str, schema: pa.Schema, target_bytes: int,
                 compression: str = "zstd", fail_marker_dir: str | None = None):
        super().__init__()
        self.output = output
        self.prefix = prefix
        self.schema = schema
        self.target_bytes = max(1, int(target_bytes))
        self.compression = compression
        self.fail_marker_dir = fail_marker_dir

    def expand(self, packed: beam.PCollection) -> beam.PCollection:
        target = self.target_bytes
        total = (packed | "size" >> beam.Map(lambda p: p[1])
                 | "total size" >> beam.CombineGlobally(sum))
        num_shards = total | "shard count" >> beam.Map(lambda t: max(1, math.ceil(t / target)))
        return (
            packed
            | "key by shard" >> beam.Map(
                lambda p, n: (shard_of(p[0], n), (p[0], p[3])),
                n=beam.pvalue.AsSingleton(num_shards))
            | "group shards" >> beam.GroupByKey()
            | "write shard" >> beam.ParDo(WriteShardFn(
                self.output, self.prefix, self.schema, self.compression, self.fail_marker_dir))
        )


def write_json(path: str, data: Any) -> None:
    """JSON through the path abstraction, atomically on local disks (temp + rename)."""
    fs.write_bytes(path, json.dumps(data, indent=2, sort_keys=True, default=str).encode("utf-8"))


def read_json(path: str) -> Any:
    return json.loads(fs.read_bytes(path).decode("utf-8"))
