"""Token shards: the data config, writing shards, and the per-host index of what is in them.

Token shards are Parquet files with one document per row: ``id`` (string), ``source``
(string: web, code, math, licensed, synthetic, ...) and ``tokens`` (list<int32>), as
``afm tokenize`` writes them (zstd, 1024 documents per row group).

What a host keeps in memory is :class:`ShardIndex`: per source, the list of *chunks*
``(file, row group, rows of that source)``, built from the Parquet footers. A row group's
``source`` statistics tell when it holds a single source; only mixed row groups have
their (dictionary-encoded) ``source`` column read, once, to count rows per source.
Nothing per document is kept: the streaming loader (``afm.training.data.loader``) decodes
one row group at a time when it needs it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from afm import fs
from afm.config import check_choice, check_number
from afm.errors import UserError
from afm.io import DatasetError, resolve_token_shards, write_shard
from afm.parquet import ParquetReader, RowGroupMeta, open_parquet

TOKEN_COLUMNS = ("id", "source", "tokens")
TOKEN_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("tokens", pa.list_(pa.int32()))])


@dataclass
class DataConfig:
    """Where the tokens come from and how they become batches.

    ``lanes`` is the number of independent packing streams the global batch is cut into
    (0: chosen at the first start, then fixed by the checkpoint). A run can resume on any
    number of hosts that divides it. ``max_segments_per_row`` caps the documents packed
    into one row (the rest of the row is padding) so cuDNN's packed attention layout has a
    static size; 0 = no cap.

    ``packing``: ``stream`` (pre-training: documents closed with EOS, concatenated and cut
    into rows; a document may continue in the next row) or ``conversation`` (SFT: each
    document, a whole conversation, in one row or, when it does not fit, starting the next
    one; one longer than a row is truncated and counted). ``loss_mask_column``: a 0/1
    per-token column of the shards that says which targets are scored (SFT: the
    assistant's tokens, ``afm sft prepare``'s ``loss_mask``); empty: every real target.
    """

    paths: list[str] = field(default_factory=list)  # files, directories or globs (gs:// too)
    weights: dict[str, float] = field(default_factory=dict)  # per-source mixture weights
    seq_len: int = 4096
    global_batch_size: int = 4096  # sequences per step, over all hosts
    eos_id: int = 2  # SentencePiece's default </s>
    pad_id: int = 0
    attention: str = "document"  # document | causal
    packing: str = "stream"  # stream | conversation
    loss_mask_column: str = ""  # e.g. "loss_mask" (SFT shards)
    mask_cross_document_loss: bool = True
    shuffle: bool = True
    seed: int = 0
    lanes: int = 0
    max_segments_per_row: int = 64
    prefetch: int = 2  # batches prepared ahead in a background thread (0: off)
    open_files: int = 64  # Parquet file handles kept open per host
    index_cache: str = ""  # a JSON copy of the shard index (the trainer sets workdir/data-index.json)
    # Per-token integer columns packed beside `tokens` (same length per row, -1 = none),
    # handed out aligned with `inputs` under their own names: e.g. a teacher's top-1
    # predictions written by `afm distill targets`.
    aligned_columns: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_number("data.seq_len", self.seq_len, low=2, integer=True)
        check_number("data.global_batch_size", self.global_batch_size, low=1, integer=True)
        for name in ("eos_id", "pad_id", "lanes", "max_segments_per_row"):
            check_number(f"data.{name}", getattr(self, name), low=0, integer=True)
        check_number("data.seed", self.seed, low=0, high=2**32 - 1, integer=True)
        check_choice("data.attention", self.attention, ("document", "causal"))
        check_choice("data.packing", self.packing, ("stream", "conversation"))
        for source, weight in self.weights.items():
            check_number(f"data.weights.{source}", weight, low=0)


class DataError(UserError):
    """Token shards are missing, malformed or do not match the config."""


def expand_paths(patterns: list[str]) -> list[str]:
    """Token shards named by paths, directories and globs (:func:`afm.io.resolve_token_shards`:
    an ``afm tokenize`` directory only when finished, only its ``tokens-*`` shards)."""

    try:
        return resolve_token_shards(patterns)
    except DatasetError as exc:
        raise DataError(str(exc)) from None


def write_token_shard(rows: list[dict[str, Any]], path: str | os.PathLike[str], row_group_size: int = 1024) -> str:
    """Write ``{"id", "source", "tokens"}`` rows as a token shard (:func:`afm.io.write_shard`)."""

    path = os.fspath(path)
    table = pa.Table.from_pylist(
        [{"id": str(r["id"]), "source": str(r["source"]), "tokens": [int(t) for t in r["tokens"]]} for r in rows],
        schema=TOKEN_SCHEMA,
    )
    write_shard(path, table, TOKEN_SCHEMA, row_group_size=row_group_size)
    return path


def mixture_weights(present: dict[str, int], weights: dict[str, float]) -> dict[str, float]:
    """Normalised weights of the sources present in the shards.

    A source the stage gives no weight is left out (with weights configured), a weight
    for a source that is absent is dropped; with no weights configured (or none for the
    present sources) the natural proportions by document count are used.
    """
    chosen = {s: float(weights[s]) for s in present if weights.get(s, 0.0) > 0}
    if not chosen:
        chosen = {s: float(n) for s, n in present.items() if n > 0}
    total = sum(chosen.values())
    if total <= 0:
        raise DataError("the token shards contain no documents")
    return {s: w / total for s, w in sorted(chosen.items())}


@dataclass(frozen=True)
class Chunk:
    """The rows of one source inside one row group: the unit the loader decodes."""

    file: int
    row_group: int
    rows: int
    mixed: bool  # the row group also holds other sources (filter by the source column)


class ParquetFiles:
    """An LRU of opened Parquet files (:func:`afm.parquet.open_parquet`: footers parsed once,
    files on any store)."""

    def __init__(self, files: list[str], capacity: int = 64):
        self.files = files
        self.capacity = max(1, capacity)
        self._open: OrderedDict[int, ParquetReader] = OrderedDict()

    def get(self, i: int) -> ParquetReader:
        if i in self._open:
            self._open.move_to_end(i)
            return self._open[i]
        path = self.files[i]
        try:
            handle = open_parquet(path)
        except Exception as exc:  # noqa: BLE001 - re-raised with the path
            raise DataError(f"{path}: not a readable Parquet file ({exc})") from exc
        self._open[i] = handle
        if len(self._open) > self.capacity:
            self._open.popitem(last=False)
        return handle


def _single_source(meta: RowGroupMeta, column: int) -> str | None:
    """The row group's only source when its statistics say min == max, else None."""
    stats = meta.column(column).statistics
    if stats is None or not stats.has_min_max or stats.min != stats.max:
        return None
    value = stats.min
    return value.decode() if isinstance(value, bytes) else str(value)


class ShardIndex:
    """Per source, the chunks of every token shard: all a host keeps about the data.

    With ``cache`` (a JSON path, local or ``gs://``) a host whose shards match the cached
    list (names and byte sizes) loads the index instead of reading footers and source
    columns: at scale, start-up then costs one size request per shard, not one read per
    mixed row group. Any host that builds the index writes the cache (same content).
    """

    def __init__(self, files: list[str], open_files: int = 64, cache: str = ""):
        self.files = list(files)
        self.handles = ParquetFiles(self.files, open_files)
        self.chunks: dict[str, list[Chunk]] = {}
        key = [[f, fs.size(f)] for f in self.files] if cache else []
        if cache and self._load(cache, key):
            return
        digest = hashlib.sha256()
        for fi, path in enumerate(self.files):
            pf = self.handles.get(fi)
            names = pf.schema_arrow.names
            missing = [c for c in ("source", "tokens") if c not in names]
            if missing:
                raise DataError(f"{path}: missing column(s) {missing}; token shards need {TOKEN_COLUMNS}")
            source_col = names.index("source")
            digest.update(os.path.basename(path).encode())
            for rg in range(pf.metadata.num_row_groups):
                meta = pf.metadata.row_group(rg)
                digest.update(f"{rg}:{meta.num_rows};".encode())
                if meta.num_rows == 0:
                    continue
                only = _single_source(meta, source_col)
                if only is not None:
                    counts = {only: meta.num_rows}
                else:
                    column = pf.read_row_group(rg, columns=["source"]).column(0)
                    counts = dict(Counter(column.to_pylist()))
                for source, n in sorted(counts.items()):
                    self.chunks.setdefault(str(source), []).append(Chunk(fi, rg, int(n), len(counts) > 1))
        self.fingerprint = digest.hexdigest()[:16]
        if cache:
            chunks = {s: [[c.file, c.row_group, c.rows, int(c.mixed)] for c in cs] for s, cs in self.chunks.items()}
            fs.write_text_atomic(cache, json.dumps({"files": key, "fingerprint": self.fingerprint, "chunks": chunks}))

    def _load(self, cache: str, key: list[list[Any]]) -> bool:
        path = fs.as_path(cache)
        if not path.exists():
            return False
        try:
            data = json.loads(path.read_text())
        except ValueError:
            return False  # a damaged cache is rebuilt
        if data.get("files") != key:
            return False  # shards added, removed or rewritten since
        self.chunks = {s: [Chunk(f, rg, n, bool(m)) for f, rg, n, m in cs] for s, cs in data["chunks"].items()}
        self.fingerprint = data["fingerprint"]
        return True

    @property
    def documents(self) -> dict[str, int]:
        return {s: sum(c.rows for c in chunks) for s, chunks in sorted(self.chunks.items())}

    def read(self, chunk: Chunk, source: str) -> tuple[np.ndarray, np.ndarray]:
        """``(offsets, values)`` of the chunk's documents (CSR form: document ``i`` is
        ``values[offsets[i]:offsets[i + 1]]``), only the rows of ``source``."""
        offsets, values, _ = self.read_aligned(chunk, source, ())
        return offsets, values

    def read_aligned(
        self, chunk: Chunk, source: str, aligned: tuple[str, ...] | list[str]
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """:meth:`read` plus per-token ``aligned`` columns (list<int32>, one value per token,
        sharing the token offsets), checked to have the same length as ``tokens`` per row."""
        pf = self.handles.get(chunk.file)
        path = self.files[chunk.file]
        missing = [c for c in aligned if c not in pf.schema_arrow.names]
        if missing:
            raise DataError(
                f"{path} has no column {missing[0]!r} (data.aligned_columns); for a teacher's top-1 "
                "ids, make these shards with `afm distill targets`"
            )
        columns = ["tokens", *aligned] + (["source"] if chunk.mixed else [])
        table = pf.read_row_group(chunk.row_group, columns=columns)
        keep = None
        if chunk.mixed:
            keep = pa.array(np.flatnonzero(table.column("source").to_numpy(zero_copy_only=False) == source))

        def csr(name: str) -> tuple[np.ndarray, np.ndarray]:
            col = table.column(name).combine_chunks()
            if keep is not None:
                col = col.take(keep)
            offsets = col.offsets.to_numpy().astype(np.int64)
            values = col.flatten().to_numpy(zero_copy_only=False)  # respects any slicing
            return offsets - offsets[0], values.astype(np.int32, copy=False)

        offsets, values = csr("tokens")
        extras: dict[str, np.ndarray] = {}
        for name in aligned:
            col_offsets, col_values = csr(name)
            if not np.array_equal(col_offsets, offsets):
                raise DataError(f"{path}: column {name!r} is not aligned with tokens (row lengths differ)")
            extras[name] = col_values
        return offsets, values, extras
