"""SFT batches: whole conversations packed into rows, loss only on assistant tokens.

Input: chat datasets prepared by ``afm sft prepare`` (``afm.synth.sft_data``): Parquet
shards ``tokens-*.parquet`` with one conversation per row, ``id``, ``source`` (the dataset
name), ``tokens`` (the chat template's ids, ``afm.model.chat``) and ``loss_mask`` (1 on the
assistant replies and their ``<|end|>``). The mixture is over the ``source`` names with
``data.weights``, drawn per conversation, exactly as the pre-training loader draws
documents (so "mixture of named datasets with weights" is ``data.weights``).

What differs from pre-training packing (``afm.training.data.loader``), and why:

* A conversation is never split across rows: its later assistant turns are trained with
  the whole prior conversation as their prompt (report §4.2). Rows are filled greedily in
  draw order; a conversation that does not fit closes the row (the rest is padding) and
  starts the next one. One longer than a row is truncated to the row (counted in
  :attr:`SftLoader.truncated`; ``afm sft prepare --max-tokens`` drops them up front).
* Each conversation is its own segment (segment ids, positions restarting at 0), so
  attention never crosses conversations, and the loss mask is the conversation's
  ``loss_mask`` shifted to the targets: a target is scored when it is an assistant token
  of the same conversation as its input.

Streaming, lanes, the mixture draws and the exact / elastic resume state are the
pre-training loader's: the state of a lane is ``lane, draws, pending source, 0`` plus
``opened chunks, next row`` per source, where "pending" names a conversation already
drawn that did not fit the previous row.

Held-out data (:class:`SftEvalInput`) is read in file order, every conversation once,
then padding rows (no loss), so the held-out loss is over the whole set whatever the
number of evaluation batches, and identical at every evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from afm.training.data.loader import LoaderState, _SourceStream, default_lanes
from afm.training.data.shards import (
    Chunk,
    DataConfig,
    DataError,
    ShardIndex,
    expand_paths,
    mixture_weights,
)

STATE_VERSION = 1
SFT_COLUMNS = ("id", "source", "tokens", "loss_mask")
_DRAW_BLOCK = 1024


class SftShardIndex(ShardIndex):
    """The shard index of SFT shards: also reads each conversation's ``loss_mask``."""

    def __init__(self, files: list[str], open_files: int = 64, cache: str = ""):
        super().__init__(files, open_files, cache)
        for fi, path in enumerate(self.files):
            if "loss_mask" not in self.handles.get(fi).schema_arrow.names:
                raise DataError(
                    f"{path} has no loss_mask column: not an SFT dataset (make one with "
                    "`afm sft prepare`)"
                )

    def read_masked(self, chunk: Chunk, source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(offsets, tokens, mask)`` of the chunk's conversations of ``source`` (CSR)."""
        pf = self.handles.get(chunk.file)
        columns = ["tokens", "loss_mask"] + (["source"] if chunk.mixed else [])
        table = pf.read_row_group(chunk.row_group, columns=columns)
        tokens = table.column("tokens").combine_chunks()
        mask = table.column("loss_mask").combine_chunks()
        if chunk.mixed:
            keep = pa.array(np.flatnonzero(table.column("source").to_numpy(zero_copy_only=False) == source))
            tokens, mask = tokens.take(keep), mask.take(keep)
        offsets = tokens.offsets.to_numpy().astype(np.int64)
        values = tokens.flatten().to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
        flags = mask.flatten().to_numpy(zero_copy_only=False).astype(np.int8, copy=False)
        if flags.size != values.size:
            raise DataError(f"{self.files[chunk.file]}: loss_mask and tokens differ in length")
        return offsets - offsets[0], values, flags


@dataclass
class _Open:
    k: int
    offsets: np.ndarray
    tokens: np.ndarray
    mask: np.ndarray
    order: np.ndarray

    def get(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        r = int(self.order[i])
        a, b = self.offsets[r], self.offsets[r + 1]
        return self.tokens[a:b], self.mask[a:b]


class _Row:
    """One row being filled: ``width`` = seq_len + 1 slots."""

    def __init__(self, width: int, pad_id: int):
        self.tokens = np.full(width, pad_id, np.int32)
        self.mask = np.zeros(width, np.int8)
        self.segments = np.zeros(width, np.int32)
        self.positions = np.zeros(width, np.int32)
        self.used = 0
        self.count = 0

    def room(self) -> int:
        return self.tokens.size - self.used

    def add(self, tokens: np.ndarray, mask: np.ndarray) -> None:
        n = min(tokens.size, self.room())
        at = self.used
        self.count += 1
        self.tokens[at : at + n] = tokens[:n]
        self.mask[at : at + n] = mask[:n]
        self.segments[at : at + n] = self.count
        self.positions[at : at + n] = np.arange(n, dtype=np.int32)
        self.used += n


def shape_rows(rows: list[_Row], seq_len: int) -> dict[str, np.ndarray]:
    """Rows of ``seq_len + 1`` slots -> the task's batch fields. A target is scored when it
    is an assistant token of the same conversation as the input before it."""
    tokens = np.stack([r.tokens for r in rows])
    mask = np.stack([r.mask for r in rows])
    seg = np.stack([r.segments for r in rows])
    pos = np.stack([r.positions for r in rows])
    in_seg, tgt_seg = seg[:, :-1], seg[:, 1:]
    loss = (mask[:, 1:] > 0) & (tgt_seg > 0) & (in_seg == tgt_seg)
    return {
        "inputs": np.ascontiguousarray(tokens[:, :-1]),
        "targets": np.ascontiguousarray(tokens[:, 1:]),
        "loss_mask": loss.astype(np.float32),
        "segment_ids": np.ascontiguousarray(in_seg),
        "positions": np.ascontiguousarray(pos[:, :-1]),
    }


class _Lane:
    """One packing stream of conversations (state: see the module docstring)."""

    def __init__(self, loader: SftLoader, state: np.ndarray):
        self.loader = loader
        self.state = state.copy()
        self.id = int(state[0])
        self._open: dict[int, _Open] = {}
        self._draws: tuple[int, np.ndarray] = (-1, np.empty(0))

    def _chunk(self, s: int, k: int) -> _Open:
        cached = self._open.get(s)
        if cached is not None and cached.k == k:
            return cached
        ld = self.loader
        position = self.id + ld.lanes * k
        chunk = ld.streams[s].at(position)
        offsets, tokens, mask = ld.index.read_masked(chunk, ld.sources[s])
        if tokens.size and ld.vocab_size is not None and (tokens.max() >= ld.vocab_size or tokens.min() < 0):
            raise DataError(
                f"token id out of range [0, {ld.vocab_size}) in {ld.index.files[chunk.file]}: the "
                "SFT data was prepared with a different tokenizer than the model's vocabulary"
            )
        n = len(offsets) - 1
        order = (np.random.default_rng([ld.cfg.seed, 5, s, position]).permutation(n)
                 if ld.cfg.shuffle else np.arange(n))
        self._open[s] = opened = _Open(k, offsets, tokens, mask, order)
        return opened

    def _counters(self, s: int) -> tuple[int, int]:
        return int(self.state[4 + 2 * s]), int(self.state[5 + 2 * s])

    def _draw(self) -> int:
        n = int(self.state[1])
        block = n // _DRAW_BLOCK
        if self._draws[0] != block:
            rng = np.random.default_rng([self.loader.cfg.seed, 11, self.id, block])
            self._draws = (block, rng.random(_DRAW_BLOCK))
        self.state[1] = n + 1
        u = self._draws[1][n % _DRAW_BLOCK]
        return min(int(np.searchsorted(self.loader.cdf, u, side="right")), len(self.loader.cdf) - 1)

    def _pending(self) -> tuple[np.ndarray, np.ndarray]:
        s = int(self.state[2])
        opened, row = self._counters(s)
        return self._chunk(s, opened - 1).get(row - 1)

    def _next(self) -> tuple[np.ndarray, np.ndarray]:
        s = self._draw()
        opened, row = self._counters(s)
        if opened == 0 or row >= len(self._chunk(s, opened - 1).order):
            opened, row = opened + 1, 0
        self.state[4 + 2 * s], self.state[5 + 2 * s] = opened, row + 1
        self.state[2] = s
        return self._chunk(s, opened - 1).get(row)

    def fill(self, row: _Row) -> None:
        ld = self.loader
        while True:
            if ld.max_segments and row.count == ld.max_segments:
                return
            conv = self._pending() if self.state[2] >= 0 else self._next()
            tokens, mask = conv
            if tokens.size > row.room() and row.count > 0:
                return  # stays pending: it starts the next row
            if tokens.size > row.room():
                ld.truncated += 1
            row.add(tokens, mask)
            self.state[2] = -1
            if row.room() == 0:
                return


class SftLoader:
    """This host's SFT batches (``inputs, targets, loss_mask, segment_ids, positions``)."""

    def __init__(
        self,
        cfg: DataConfig,
        *,
        vocab_size: int | None = None,
        process_index: int = 0,
        process_count: int = 1,
        state: LoaderState | None = None,
    ):
        if not cfg.paths:
            raise DataError("no training data given (set data.paths or pass --data)")
        if cfg.global_batch_size % process_count:
            raise DataError(f"global batch {cfg.global_batch_size} does not split over {process_count} hosts")
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.index = SftShardIndex(expand_paths(cfg.paths), cfg.open_files, cfg.index_cache)
        self.weights = mixture_weights(self.index.documents, cfg.weights)
        self.sources = list(self.weights)
        self.cdf = np.cumsum([self.weights[s] for s in self.sources])
        self.streams = [_SourceStream(self.index.chunks[s], i, cfg.seed, cfg.shuffle)
                        for i, s in enumerate(self.sources)]
        self.max_segments = cfg.max_segments_per_row
        self.truncated = 0
        self.lanes = int(state.spec["lanes"]) if state is not None else (
            cfg.lanes or default_lanes(cfg.global_batch_size, process_count))
        if cfg.global_batch_size % self.lanes or self.lanes % process_count:
            raise DataError(f"data.lanes={self.lanes} must divide the global batch "
                            f"({cfg.global_batch_size}) and be a multiple of the hosts ({process_count})")
        self.rows_per_lane = cfg.global_batch_size // self.lanes
        per_host = self.lanes // process_count
        mine = range(process_index * per_host, (process_index + 1) * per_host)
        self.spec = {
            "version": STATE_VERSION, "kind": "sft", "lanes": self.lanes, "seq_len": cfg.seq_len,
            "seed": cfg.seed, "sources": self.sources, "fingerprint": self.index.fingerprint,
            "max_segments": self.max_segments,
        }
        width = 4 + 2 * len(self.sources)
        if state is None:
            rows = []
            for lane in mine:
                row = np.zeros(width, np.int64)
                row[0], row[2] = lane, -1
                rows.append(row)
        else:
            rows = self._resume(state, mine)
        self._lanes = [_Lane(self, r) for r in rows]

    def _resume(self, state: LoaderState, mine: range) -> list[np.ndarray]:
        old = state.spec
        for key in ("version", "kind", "seq_len", "seed", "sources", "max_segments"):
            if old.get(key) != self.spec[key]:
                raise DataError(f"data state does not match this run: {key} was {old.get(key)!r}, "
                                f"now {self.spec[key]!r} (resume with the checkpoint's data settings)")
        if old.get("fingerprint") != self.spec["fingerprint"]:
            raise DataError("the SFT shards differ from the ones this checkpoint was reading; "
                            "resuming would not continue the same sample sequence")
        by_lane = {int(r[0]): r for r in state.lanes}
        missing = [lane for lane in mine if lane not in by_lane]
        if missing:
            raise DataError(f"data state lacks lanes {missing[:5]} (an incomplete checkpoint?)")
        return [by_lane[lane].astype(np.int64) for lane in mine]

    def __iter__(self) -> SftLoader:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        rows = []
        for lane in self._lanes:
            for _ in range(self.rows_per_lane):
                row = _Row(self.cfg.seq_len + 1, self.cfg.pad_id)
                lane.fill(row)
                rows.append(row)
        return shape_rows(rows, self.cfg.seq_len)

    def state(self) -> LoaderState:
        return LoaderState(dict(self.spec), np.stack([lane.state for lane in self._lanes]))

    def describe(self) -> dict[str, Any]:
        return {"lanes": self.lanes, "mixture": dict(self.weights)}

    def close(self) -> None:
        """Nothing runs in the background."""


class SftEvalInput:
    """Held-out conversations in file order, each once, then padding rows (no loss).

    All hosts build the same global row list (held-out sets are small) and take their
    slice of every global batch."""

    def __init__(self, cfg: DataConfig, paths: list[str], *, vocab_size: int | None,
                 process_index: int = 0, process_count: int = 1):
        self.cfg = cfg
        index = SftShardIndex(expand_paths(paths), cfg.open_files)
        rows: list[_Row] = []
        row = _Row(cfg.seq_len + 1, cfg.pad_id)
        self.conversations = 0
        for source, chunks in sorted(index.chunks.items()):
            for chunk in chunks:
                offsets, tokens, mask = index.read_masked(chunk, source)
                if tokens.size and vocab_size is not None and tokens.max() >= vocab_size:
                    raise DataError(f"held-out token id out of range [0, {vocab_size})")
                for i in range(len(offsets) - 1):
                    t, m = tokens[offsets[i]:offsets[i + 1]], mask[offsets[i]:offsets[i + 1]]
                    full = cfg.max_segments_per_row and row.count == cfg.max_segments_per_row
                    if row.count and (t.size > row.room() or full):
                        rows.append(row)
                        row = _Row(cfg.seq_len + 1, cfg.pad_id)
                    row.add(t, m)
                    self.conversations += 1
        if row.count:
            rows.append(row)
        self.rows = rows
        self.per_host = cfg.global_batch_size // process_count
        self.offset = process_index * self.per_host
        self.step = 0

    def __next__(self) -> dict[str, np.ndarray]:
        g = self.cfg.global_batch_size
        start = self.step * g + self.offset
        self.step += 1
        batch = [self.rows[i] if i < len(self.rows) else _Row(self.cfg.seq_len + 1, self.cfg.pad_id)
                 for i in range(start, start + self.per_host)]
        return shape_rows(batch, self.cfg.seq_len)

    def batches_needed(self) -> int:
        """Global batches that cover every held-out conversation."""
        return -(-len(self.rows) // self.cfg.global_batch_size)

    def state(self) -> Any:
        return None

    def describe(self) -> dict[str, Any]:
        return {"conversations": self.conversations}

    def close(self) -> None:
        """Nothing to release."""


__all__ = ["SFT_COLUMNS", "SftEvalInput", "SftLoader", "SftShardIndex", "shape_rows"]
