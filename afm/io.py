"""Which files a command reads, and simple whole-file reads and writes of documents.

:func:`resolve_inputs` is the one place that turns ``--input`` paths, directories and
globs into files, with the rules that keep rejected or half-written data out of
training:

* A *dataset directory* (the output of an afm command: it holds ``_SUCCESS``,
  ``manifest.json``, a staging directory or ``documents-*`` / ``rejects-*`` /
  ``tokens-*`` files) is read only when its ``_SUCCESS`` marker is there, and then only
  its ``documents-*`` shards: never ``rejects-*``, token shards or bookkeeping.
* A rejects file named explicitly is refused (``allow_rejects`` lets ``afm curate``
  re-curate one on purpose); found through a directory or glob it is skipped.
* Parquet files found in ordinary directories are skipped when their schema says they
  hold rejects (``afm.record = reject``), whatever their name.
* A crawl directory (WARC files beside the crawler's ``index/``) is read for its WARCs;
  the crawler's index and state files are bookkeeping, and its ``robotstxt/`` snapshots
  are control files (the curate stage ``optout`` reads them).

Every file found but not read is returned with the reason, for the run's manifest.
Record-level reading lives in :mod:`afm.readers`; this module's :func:`read_records`
is its strict form for small tools (the first bad record is an error).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from afm import fs
from afm.errors import UserError
from afm.outputs import STAGING_PREFIX, IncompleteOutput, check_complete, is_dataset_dir
from afm.parquet import encode_tables, open_parquet, schema_of
from afm.readers import WARC_SUFFIXES, Failure, Record, file_format, read_file
from afm.schema import DOCUMENT_SCHEMA, to_table

DOCUMENT_PREFIX = "documents-"
REJECT_PREFIX = "rejects-"


# Per resolve_inputs call: whether a directory is a dataset directory (checked once).
_DATASET_CACHE: dict[str, bool] = {}


class DatasetError(UserError):
    """Token shards that are missing, unfinished or not token shards."""


class InputRefused(FileNotFoundError):
    """An input that must not be read as documents (e.g. a rejects file). A
    :class:`FileNotFoundError` so every command reports it as cleanly as a missing file."""


@dataclass
class ResolvedInputs:
    files: list[str]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why not read)


def write_shard(
    path: str | os.PathLike[str],
    tables: pa.Table | Iterable[pa.Table],
    schema: pa.Schema,
    *,
    compression: str | None = "zstd",
    row_group_size: int | None = None,
    before_publish: Callable[[], None] | None = None,
) -> int:
    """The one Parquet shard writer: ``tables`` (one table, or an iterable written as it
    comes) as the file ``path`` on any filesystem (:mod:`afm.fs`), with ``schema``.

    The bytes go to a hidden, uniquely named sibling and are renamed into place only when
    the file is complete, so a reader never sees half a shard and a retried Beam bundle
    (which writes the identical file) replaces the first attempt's. ``before_publish`` runs
    between the two (fault injection in tests). Returns the file's size in bytes.
    """
    path = str(path)
    tmp = fs.join(fs.dirname(path), f".{fs.basename(path)}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        with fs.open_write(tmp) as fh:
            encode_tables(fh, tables, schema, compression=compression, row_group_size=row_group_size)
        if before_publish is not None:
            before_publish()
        if fs.is_remote(path) and fs.isfile(path):  # object stores: rename does not replace
            fs.delete([path])
        fs.rename(tmp, path)
    except BaseException:
        fs.delete([tmp])
        raise
    return fs.size(path)


class ShardSequence:
    """Rows -> numbered shards ``<prefix>-00000.parquet``, ``-00001``... in ``directory``,
    ``rows_per_shard`` rows each, every one through :func:`write_shard`; records are
    coerced to ``schema`` (:func:`afm.schema.to_table`). :meth:`close` writes the rest."""

    def __init__(self, directory: str | os.PathLike[str], prefix: str, schema: pa.Schema, *,
                 rows_per_shard: int, row_group_size: int | None = None, compression: str | None = "zstd"):
        self.directory, self.prefix, self.schema = str(directory), prefix, schema
        self.rows_per_shard, self.row_group_size, self.compression = rows_per_shard, row_group_size, compression
        self.buffer: list[dict[str, Any]] = []
        self.files: list[str] = []
        self.count = 0

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        self.count += 1
        if len(self.buffer) >= self.rows_per_shard:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        path = fs.join(self.directory, f"{self.prefix}-{len(self.files):05d}.parquet")
        write_shard(path, to_table(self.buffer, self.schema), self.schema, compression=self.compression,
                    row_group_size=self.row_group_size)
        self.files.append(path)
        self.buffer = []

    close = flush


def read_shard(path: str | os.PathLike[str], columns: list[str] | None = None) -> pa.Table:
    """The one Parquet shard reader: the file (or the ``columns`` of it) as a table, from
    any filesystem (:func:`afm.parquet.open_parquet`)."""
    return open_parquet(path).read(columns=columns)


def write_parquet(
    records: list[dict[str, Any]],
    path: str | os.PathLike[str],
    schema: pa.Schema = DOCUMENT_SCHEMA,
    compression: str = "zstd",
) -> Path:
    """Records (documents or rejects) as one Parquet shard with ``schema`` (:func:`write_shard`)."""
    write_shard(path, to_table(records, schema), schema, compression=compression)
    return Path(path)


class UnreadableInput(UserError):
    """A file (or a record in it) that cannot be decoded: damaged, truncated, not the format."""


def read_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The records of one Parquet / JSONL(.gz) file as they are stored, strictly: the
    first record that cannot be decoded raises :class:`UnreadableInput` (a ``ValueError``)
    naming file and line.
    Pipelines use :func:`afm.readers.read_file`, which records such failures instead."""
    p = str(path)
    fmt = file_format(p)
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"{p}: unsupported file type (expected .parquet, .jsonl or .jsonl.gz)")
    for item in read_file(p):
        if isinstance(item, Failure):
            place = item.where.line or item.where.row or item.where.offset
            where = p if place is None else f"{p}:{place}"
            raise UnreadableInput(f"{where}: {item.reason} ({item.error})")
        if isinstance(item, Record):
            yield item.value


def expand_inputs(patterns: Iterable[str]) -> list[str]:
    """The files named by ``patterns`` (sorted), whatever their format (callers that read
    plain text or other formats filter them), with the dataset-directory rules of
    :func:`resolve_inputs`."""
    return resolve_inputs(patterns, any_format=True).files


def resolve_inputs(patterns: Iterable[str], *, allow_rejects: bool = False,
                   directories_as_inputs: bool = False,
                   any_format: bool = False) -> ResolvedInputs:
    """Files to read for paths, directories and globs (see the module docstring).

    ``directories_as_inputs``: a directory is itself one input (a tree of code
    repositories for ``--source code``). Raises ``FileNotFoundError`` for a path that
    matches nothing, :class:`~afm.outputs.IncompleteOutput` for a dataset directory
    without ``_SUCCESS``, :class:`InputRefused` for a rejects file named explicitly and
    ``ValueError`` for an explicitly named file of no supported format (``any_format``:
    every file is returned, the caller decides what it reads).
    """
    found: dict[str, None] = {}
    skipped: list[tuple[str, str]] = []
    _DATASET_CACHE.clear()
    for pattern in patterns:
        pattern = str(pattern)
        if any(c in pattern for c in "*?["):
            matches = fs.glob(pattern)
            if not matches:
                raise FileNotFoundError(f"input not found: {pattern} (no file matches)")
            for path in matches:
                _consider(_absolute(path), False, allow_rejects, found, skipped, any_format)
        elif fs.isdir(pattern):
            if directories_as_inputs:
                found[_absolute(pattern)] = None
            else:
                _walk(_absolute(pattern), allow_rejects, found, skipped, any_format, top=True)
        elif fs.isfile(pattern):
            _consider(_absolute(pattern), True, allow_rejects, found, skipped, any_format)
        else:
            raise FileNotFoundError(f"input not found: {pattern}")
    return ResolvedInputs(sorted(found), sorted(set(skipped)))


def resolve_token_shards(patterns: Iterable[str]) -> list[str]:
    """Token shards named by paths, directories and globs; sorted, unique (local ones
    absolute). The token-shard twin of :func:`resolve_inputs`, for every reader of token
    shards (the training loader, perplexity, distillation targets).

    A directory written by ``afm tokenize`` is read under the data path's output policy
    (``afm.outputs``): only when its ``_SUCCESS`` marker says the run finished, and only its
    ``tokens-*`` shards, so a killed tokenize run is never trained or scored on. Any other
    directory is searched recursively, skipping staging folders of unfinished runs."""

    files: list[str] = []
    for pattern in map(str, patterns):
        dataset = _token_dataset(pattern)
        if dataset is not None:
            files += dataset
            continue
        found, missing = fs.expand([pattern], ".parquet")
        if missing:
            raise DatasetError(f"token shard not found: {missing[0]}")
        checked: dict[str, list[str] | None] = {}
        for f in found:
            if f"/{STAGING_PREFIX}" in f.replace(os.sep, "/"):
                continue
            parent = fs.dirname(f)
            if parent not in checked:  # a dataset folder met while searching: same policy
                checked[parent] = _token_dataset(parent)
            if checked[parent] is None or f in checked[parent]:
                files.append(f)
    if not files:
        raise DatasetError(f"no .parquet token shards in {list(map(str, patterns))}")
    return sorted(set(files))


def _token_dataset(pattern: str) -> list[str] | None:
    """The shards of an afm dataset directory, or None when ``pattern`` is not one."""
    if fs.has_glob(pattern) or not fs.isdir(pattern):
        return None
    path = _absolute(pattern.rstrip("/"))
    names = fs.list_dir(path)
    if not is_dataset_dir(path, names):
        return None
    try:
        check_complete(path, names)
    except IncompleteOutput as exc:
        raise DatasetError(str(exc)) from None
    shards = sorted(n for n in names if n.startswith("tokens-") and n.endswith(".parquet"))
    if not shards:
        kinds = sorted({n.split("-", 1)[0] for n in names if n.endswith(".parquet")})
        raise DatasetError(f"{pattern} is an afm dataset without token shards (it holds "
                           f"{', '.join(kinds) or 'no shards'}); run `afm tokenize` on it first")
    return [fs.join(path, n) for n in shards]


def _absolute(path: str) -> str:
    return path if fs.is_remote(path) else os.path.abspath(path)


def _walk(directory: str, allow_rejects: bool, found: dict[str, None],
          skipped: list[tuple[str, str]], any_format: bool, top: bool = False) -> None:
    names = fs.list_dir(directory)
    if is_dataset_dir(directory, names):
        check_complete(directory, names)
        for name in names:
            full = fs.join(directory, name)
            if name.startswith(DOCUMENT_PREFIX) and file_format(name):
                found[full] = None
            elif not name.startswith(".") and name != "_SUCCESS":
                skipped.append((full, _not_documents_why(name)))
        return
    mine: dict[str, None] = {}
    mine_skipped: list[tuple[str, str]] = []
    for name in names:
        if name.startswith((".", "_")):
            continue  # hidden files, temp files, markers
        full = fs.join(directory, name)
        if fs.isdir(full):
            _walk(full, allow_rejects, mine, mine_skipped, any_format)
        else:
            _DATASET_CACHE[directory] = False
            _consider(full, False, allow_rejects, mine, mine_skipped, any_format)
    if top and "index" in names and "robotstxt" in names:
        # The crawler's robots.txt / tdmrep.json snapshots: not pages, read by the
        # curate stage `optout` (afm.consent.snapshots).
        snap_dir = fs.join(directory, "robotstxt")
        mine_skipped += [(f, "robots.txt / tdmrep.json snapshots (read by the optout stage)")
                         for f in mine if f.startswith(snap_dir + "/")]
        mine = {f: None for f in mine if not f.startswith(snap_dir + "/")}
    warcs = [f for f in mine if f.lower().endswith(WARC_SUFFIXES)]
    if top and warcs and "index" in names:
        # The crawler's output (WARCs + an index/ of Parquet + state files): its WARCs
        # are the pages; the index and frontier/outcome files are bookkeeping.
        mine_skipped += [(f, "crawl bookkeeping (the crawler's index and state files)")
                         for f in mine if f not in warcs]
        mine = dict.fromkeys(warcs)
    found.update(mine)
    skipped.extend(mine_skipped)


def _consider(path: str, explicit: bool, allow_rejects: bool, found: dict[str, None],
              skipped: list[tuple[str, str]], any_format: bool = False) -> None:
    name = fs.basename(path)
    fmt = file_format(path)
    if fmt is None and not any_format:
        if explicit:
            raise ValueError(f"{path}: unsupported input (expected .warc[.gz], .parquet or "
                             ".jsonl[.gz])")
        skipped.append((path, "not a supported input format"))
        return
    parent = fs.dirname(path)
    if parent not in _DATASET_CACHE:
        _DATASET_CACHE[parent] = is_dataset_dir(parent)
        if _DATASET_CACHE[parent]:
            check_complete(parent)
    if _DATASET_CACHE[parent]:
        if not name.startswith(DOCUMENT_PREFIX):
            if name.startswith(REJECT_PREFIX) and explicit and allow_rejects:
                found[path] = None
            elif explicit:
                raise InputRefused(f"{path}: {_not_documents_why(name)}; give the dataset "
                                   "directory or its documents-* files")
            else:
                skipped.append((path, _not_documents_why(name)))
            return
    elif fmt == "parquet" and not fs.is_remote(path) and _holds_rejects(path):
        if explicit and allow_rejects:
            found[path] = None
        elif explicit:
            raise InputRefused(f"{path} holds rejected documents (schema afm.record=reject); "
                               "rejects are never read as documents")
        else:
            skipped.append((path, "holds rejected documents (schema afm.record=reject)"))
        return
    found[path] = None


def _not_documents_why(name: str) -> str:
    if name.startswith(REJECT_PREFIX):
        return "rejected documents are never read as documents"
    return "not a documents-* shard of its dataset"


def _holds_rejects(path: str) -> bool:
    try:
        meta = schema_of(path).metadata or {}
    except Exception:  # noqa: BLE001 - an unreadable file is the reader's business
        return False
    return meta.get(b"afm.record") == b"reject"
