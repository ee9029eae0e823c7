"""Grain input pipeline over ``afm tokenize`` shards: mixture, packing, checkpointable.

Token shards are Parquet files with one document per row: ``id`` (string), ``source``
(string: web, code, math, licensed, synthetic, ...) and ``tokens`` (list<int32>).

Pipeline (all Grain, so its iterator state is a small dict saved with every checkpoint
and a resumed run sees exactly the batches it would have seen)::

    ParquetTokenRows (random access over all shards, per-row-group cache)
      -> one MapDataset per source: this host's slice -> shuffle -> repeat (reshuffled
         every epoch)
      -> MapDataset.mix(sources, stage weights)   (deterministic interleave)
      -> to_iter_dataset -> doc + EOS
      -> ConcatThenSplitIterDataset to seq_len + 1 (no padding, documents may split)
      -> inputs/targets/segment_ids/positions/loss_mask -> batch (per-host batch)

Boundaries: ``attention="document"`` gives the model segment ids and per-document
positions so attention never crosses a document; ``attention="causal"`` lets it (the
EOS token is the only separator). ``mask_cross_document_loss`` removes the loss on
predicting the first token of a document from the previous one's EOS.
"""

from __future__ import annotations

import glob
import json
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import grain
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TOKEN_COLUMNS = ("id", "source", "tokens")
TOKEN_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("tokens", pa.list_(pa.int32()))])


@dataclass
class DataConfig:
    """Where the tokens come from and how they become batches."""

    paths: list[str] = field(default_factory=list)  # files, directories or globs
    weights: dict[str, float] = field(default_factory=dict)  # per-source mixture weights
    seq_len: int = 4096
    global_batch_size: int = 4096  # sequences per step, over all hosts
    eos_id: int = 2  # SentencePiece's default </s>
    attention: str = "document"  # document | causal
    mask_cross_document_loss: bool = True
    shuffle: bool = True
    seed: int = 0
    read_cache_row_groups: int = 8
    prefetch: int = 2  # batches prepared ahead in a background thread (0: off)


class DataError(ValueError):
    """Token shards are missing, malformed or do not match the config."""


def expand_paths(patterns: list[str]) -> list[str]:
    """Parquet files named by paths, directories (recursive) and globs; sorted, unique."""
    files: list[str] = []
    for pattern in patterns:
        if os.path.isdir(pattern):
            for root, _dirs, names in os.walk(pattern):
                files += [os.path.join(root, n) for n in names if n.endswith(".parquet")]
        elif any(c in pattern for c in "*?["):
            files += [f for f in glob.glob(pattern, recursive=True) if f.endswith(".parquet")]
        elif os.path.isfile(pattern):
            files.append(pattern)
        else:
            raise DataError(f"token shard not found: {pattern}")
    files = sorted(set(files))
    if not files:
        raise DataError(f"no .parquet token shards in {patterns}")
    return files


def write_token_shard(rows: list[dict[str, Any]], path: str | os.PathLike[str], row_group_size: int = 1024) -> str:
    """Write ``{"id", "source", "tokens"}`` rows as a token shard (temp file + rename)."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.tmp-{os.getpid()}")
    table = pa.Table.from_pylist(
        [{"id": str(r["id"]), "source": str(r["source"]), "tokens": [int(t) for t in r["tokens"]]} for r in rows],
        schema=TOKEN_SCHEMA,
    )
    pq.write_table(table, tmp, row_group_size=row_group_size)
    os.replace(tmp, path)
    return path


class ParquetTokenRows:
    """Random access to the ``tokens`` of every row of a set of Parquet shards.

    Only the Parquet footers and the small ``source`` column are read up front; token
    lists are read one row group at a time on demand and kept in a small LRU cache, so
    a shuffled read costs one row-group decode per miss and the memory stays bounded.
    """

    def __init__(self, files: list[str], cache_row_groups: int = 8):
        self.files = list(files)
        self.cache_size = max(1, cache_row_groups)
        starts: list[int] = []  # global row id where each (file, row group) starts
        self._groups: list[tuple[int, int]] = []
        sources: list[np.ndarray] = []
        total = 0
        for fi, path in enumerate(self.files):
            try:
                pf = pq.ParquetFile(path)
            except Exception as exc:  # noqa: BLE001 - re-raised with the path
                raise DataError(f"{path}: not a readable Parquet file ({exc})") from exc
            names = set(pf.schema_arrow.names)
            missing = [c for c in ("source", "tokens") if c not in names]
            if missing:
                raise DataError(f"{path}: missing column(s) {missing}; token shards need {TOKEN_COLUMNS}")
            for rg in range(pf.metadata.num_row_groups):
                starts.append(total)
                self._groups.append((fi, rg))
                total += pf.metadata.row_group(rg).num_rows
            col = pf.read(columns=["source"]).column("source").to_numpy(zero_copy_only=False)
            sources.append(col.astype(str))
        self._starts = np.asarray(starts, dtype=np.int64)
        self.num_rows = total
        self.sources = np.concatenate(sources) if sources else np.zeros([0], dtype=str)
        self._cache: OrderedDict[int, list[np.ndarray]] = OrderedDict()

    def __len__(self) -> int:
        return self.num_rows

    def rows_of_source(self, source: str) -> np.ndarray:
        return np.flatnonzero(self.sources == source)

    def _row_group(self, g: int) -> list[np.ndarray]:
        if g in self._cache:
            self._cache.move_to_end(g)
            return self._cache[g]
        fi, rg = self._groups[g]
        table = pq.ParquetFile(self.files[fi]).read_row_group(rg, columns=["tokens"])
        col = table.column("tokens").combine_chunks()
        offsets = col.offsets.to_numpy()
        values = col.values.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
        rows = [values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
        self._cache[g] = rows
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return rows

    def __getitem__(self, row: int) -> np.ndarray:
        row = int(row)
        if not 0 <= row < self.num_rows:
            raise IndexError(row)
        g = int(np.searchsorted(self._starts, row, side="right") - 1)
        return self._row_group(g)[row - int(self._starts[g])]


class _SourceView:
    """A random-access data source over a subset of rows (one mixture component)."""

    def __init__(self, rows: ParquetTokenRows, row_ids: np.ndarray):
        self.rows = rows
        self.row_ids = row_ids

    def __len__(self) -> int:
        return len(self.row_ids)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.rows[int(self.row_ids[i])]


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


class _DocToExample:
    """Document tokens -> ``{"tokens": tokens + EOS}`` with the ids checked."""

    def __init__(self, eos_id: int, vocab_size: int | None):
        self.eos_id = eos_id
        self.vocab_size = vocab_size

    def __call__(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        tokens = np.asarray(tokens, dtype=np.int32)
        if self.vocab_size is not None and tokens.size and (
            tokens.max() >= self.vocab_size or tokens.min() < 0
        ):
            raise DataError(
                f"token id out of range [0, {self.vocab_size}): the shards were made with "
                "a different tokenizer than the model's vocabulary"
            )
        if tokens.size == 0 or tokens[-1] != self.eos_id:
            tokens = np.concatenate([tokens, np.asarray([self.eos_id], np.int32)])
        return {"tokens": tokens}


class _ShiftAndMask:
    """A packed row of ``seq_len + 1`` tokens -> model inputs, targets and loss mask."""

    def __init__(self, document_attention: bool, mask_cross_document_loss: bool):
        self.document_attention = document_attention
        self.mask_cross = mask_cross_document_loss

    def __call__(self, row: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        tokens = row["tokens"]
        seg = row["tokens_segment_ids"].astype(np.int32)
        pos = row["tokens_positions"].astype(np.int32)
        inputs, targets = tokens[:-1], tokens[1:]
        in_seg, tgt_seg = seg[:-1], seg[1:]
        mask = tgt_seg > 0  # padding never scores
        if self.mask_cross:
            mask &= in_seg == tgt_seg
        out = {
            "inputs": inputs.astype(np.int32),
            "targets": targets.astype(np.int32),
            "loss_mask": mask.astype(np.float32),
        }
        if self.document_attention:
            out["segment_ids"] = in_seg
            out["positions"] = pos[:-1]
        else:
            out["segment_ids"] = (in_seg > 0).astype(np.int32)  # only padding is masked
            out["positions"] = np.arange(len(inputs), dtype=np.int32)
        return out


@dataclass
class Pipeline:
    """What the trainer gets: the batch iterator plus what it was built from."""

    iterator: Any  # grain DatasetIterator with get_state / set_state
    weights: dict[str, float]
    documents: dict[str, int]
    files: list[str]
    per_host_batch: int

    def __iter__(self) -> Pipeline:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        return next(self.iterator)

    def get_state(self) -> dict[str, Any]:
        return self.iterator.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.iterator.set_state(state)

    def state_json(self) -> str:
        return json.dumps(_jsonable(self.get_state()), sort_keys=True)

    def load_state_json(self, text: str) -> None:
        self.set_state(json.loads(text))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, bytes):
        raise TypeError("grain iterator state holds bytes; cannot store it as JSON")
    return obj


def make_pipeline(
    cfg: DataConfig,
    *,
    vocab_size: int | None = None,
    process_index: int = 0,
    process_count: int = 1,
) -> Pipeline:
    """The batch iterator for this host (``process_index`` of ``process_count``)."""
    if cfg.attention not in ("document", "causal"):
        raise DataError(f"data.attention must be 'document' or 'causal', got {cfg.attention!r}")
    if cfg.global_batch_size % process_count:
        raise DataError(
            f"global batch {cfg.global_batch_size} does not split over {process_count} hosts"
        )
    per_host = cfg.global_batch_size // process_count
    files = expand_paths(cfg.paths)
    rows = ParquetTokenRows(files, cfg.read_cache_row_groups)
    present = {str(s): int(n) for s, n in zip(*np.unique(rows.sources, return_counts=True))}
    weights = mixture_weights(present, cfg.weights)
    components = []
    for i, source in enumerate(weights):
        ids = rows.rows_of_source(source)[process_index::process_count]
        if len(ids) == 0:
            raise DataError(f"source {source!r} has no documents for host {process_index}")
        ds = grain.MapDataset.source(_SourceView(rows, ids))
        if cfg.shuffle:
            ds = ds.shuffle(seed=cfg.seed + 1000 * i)
        components.append(ds.repeat(None))
    mixed = grain.MapDataset.mix(components, [weights[s] for s in weights])
    ds = mixed.map(_DocToExample(cfg.eos_id, vocab_size)).to_iter_dataset()
    packed = grain.experimental.ConcatThenSplitIterDataset(
        ds, length_struct={"tokens": cfg.seq_len + 1}
    )
    shaped = packed.map(_ShiftAndMask(cfg.attention == "document", cfg.mask_cross_document_loss))
    batched = shaped.batch(per_host, drop_remainder=True)
    if cfg.prefetch > 0:
        # A thread assembles the next batches while the device runs the step; the
        # iterator state still points at the next batch the *trainer* will receive.
        batched = grain.experimental.ThreadPrefetchIterDataset(batched, prefetch_buffer_size=cfg.prefetch)
    return Pipeline(
        iterator=iter(batched),
        weights=weights,
        documents=present,
        files=files,
        per_host_batch=per_host,
    )
