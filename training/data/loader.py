"""The one streaming loader: mixture, packing, exact and elastic resume, for pre-training
(documents streamed into rows) and for SFT (whole conversations per row).

The global batch of every step is cut into ``L`` *lanes* (``data.lanes``); each lane is
an independent packing stream that fills ``global_batch / L`` rows per step. A host owns
a contiguous block of lanes, so the global row order is the same for any number of hosts
that divides ``L``. A lane is fully described by a few integers::

    lane id, documents drawn, source and token offset of the document being packed,
    and per source: chunks opened, next row in the open chunk

which makes the iterator state of a whole run an ``int64 [L, 4 + 2 S]`` array. Every
checkpoint stores it (all hosts' lanes, gathered); a run resumed on a different number of
hosts hands each host its lanes, and the remaining sample sequence is exactly the one the
old hosts would have produced (MaxText's elastic Grain iterator has no Parquet, packing or
mixing; this one has all three).

Per lane and source, the source's chunks (``ShardIndex``: rows of one source in one row
group) form an endless sequence, reshuffled every epoch; lane ``l`` opens chunk positions
``l, l + L, l + 2L, ...`` of it, so every chunk is decoded once per epoch by exactly one
lane, which reads its documents in a seeded random order. Which source a lane's next
document comes from is a seeded draw with the stage's mixture weights (weights are over
documents). Documents are packed with EOS into rows of ``seq_len + 1`` tokens (concat and
split: no padding, a document may continue in the lane's next row); ``max_segments_per_row``
caps the documents in a row (the rest is padding, loss-masked). Positions restart at 0 at
every document and at every row start.

With ``data.packing: conversation`` (SFT, ``afm sft prepare``'s shards) a document is a
whole conversation and is never split across rows: its later assistant turns are trained
with the whole prior conversation as their prompt (report §4.2). Rows are filled greedily in
draw order; a conversation that does not fit closes the row (the rest is padding) and starts
the next one ("pending" in the lane's state: its source, token offset 0). One longer than a
row is truncated to the row and counted (:attr:`PackedLoader.truncated`; ``afm sft prepare
--max-tokens`` drops them up front). No EOS is added (a conversation ends with the chat
template's end token), and ``data.loss_mask_column`` (``loss_mask``: 1 on the assistant's
tokens) decides which targets are scored: a target is scored when it is an assistant token
of the same conversation as its input. Held-out conversations are read by
:class:`HeldOutConversations`: every one once, in file order.

Shuffle quality: documents are shuffled within a row group and row groups across the
epoch; each step's rows come from ``L x sources`` open row groups. ``afm tokenize`` sorts
shards by a hash of the document id, so a row group is already a random sample.

Memory per host: one decoded row group per (lane, source) it owns. Throughput: decoding
is pyarrow's; packing is a few numpy slices per document (``afm bench loader``).
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from afm.training.data.shards import (
    Chunk,
    DataConfig,
    DataError,
    ShardIndex,
    expand_paths,
    mixture_weights,
)

STATE_VERSION = 1
_FIXED = ("lane", "docs", "cur_source", "tok_off")
_CUT = "_truncated"  # rides with a produced batch to the consumer, which counts it
_DRAW_BLOCK = 1024  # mixture draws generated per RNG call


@dataclass
class LoaderState:
    """The iterator position: a spec of what it was built from, and lanes' integers.

    ``arrays``: data an input generated itself and cannot re-read (online RL's rollout
    batch of the current iteration), the same on every host; checkpointed beside the
    lanes so a run stopped mid-iteration resumes on the very same batch."""

    spec: dict[str, Any]
    lanes: np.ndarray  # int64 [lanes held, 4 + 2 * n_sources], column 0 = lane id
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @staticmethod
    def merge(states: list[LoaderState]) -> LoaderState:
        """One state from every host's (e.g. after an all-gather), rows sorted by lane."""
        lanes = np.concatenate([s.lanes for s in states])
        return LoaderState(states[0].spec, lanes[np.argsort(lanes[:, 0], kind="stable")], states[0].arrays)


def default_lanes(global_batch: int, process_count: int) -> int:
    """The largest divisor of the global batch that is a multiple of the host count and at
    most ``max(64, 8 x hosts)``: enough streams for a well-mixed batch, few enough open
    row groups per host, and room to resume on fewer hosts (any divisor of the lanes)."""
    cap = max(64, 8 * process_count)
    best = 0
    for lanes in range(process_count, min(global_batch, cap) + 1, process_count):
        if global_batch % lanes == 0:
            best = lanes
    if best == 0:
        raise DataError(f"global batch {global_batch} does not split over {process_count} hosts")
    return best


class _SourceStream:
    """One source's chunks as an endless sequence of epochs, each in a seeded order."""

    def __init__(self, chunks: list[Chunk], source_i: int, seed: int, shuffle: bool):
        self.chunks = chunks
        self.source_i = source_i
        self.seed = seed
        self.shuffle = shuffle
        self._epoch = -1
        self._order = np.arange(len(chunks))

    def at(self, position: int) -> Chunk:
        epoch, k = divmod(position, len(self.chunks))
        if self.shuffle and epoch != self._epoch:
            rng = np.random.default_rng([self.seed, 3, self.source_i, epoch])
            self._order, self._epoch = rng.permutation(len(self.chunks)), epoch
        return self.chunks[int(self._order[k])]


@dataclass
class _OpenChunk:
    k: int  # the lane's k-th chunk of its source
    offsets: np.ndarray
    values: np.ndarray
    order: np.ndarray  # reading order of the chunk's rows
    aligned: tuple[np.ndarray, ...] = ()  # data.aligned_columns' values, CSR like `values`

    def doc(self, i: int) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """The ``i``-th document in reading order and its aligned columns."""
        r = int(self.order[i])
        lo, hi = self.offsets[r], self.offsets[r + 1]
        return self.values[lo:hi], tuple(a[lo:hi] for a in self.aligned)


class _Lane:
    """One packing stream; its state is a handful of integers (see the module docstring)."""

    def __init__(self, loader: PackedLoader, state: np.ndarray):
        self.loader = loader
        self.state = state.copy()
        self.id = int(state[0])
        self._open: dict[int, _OpenChunk] = {}
        self._draws: tuple[int, np.ndarray] = (-1, np.empty(0))
        self._doc: np.ndarray | None = None
        self._aligned: tuple[np.ndarray, ...] = ()
        cur = int(self.state[2])
        if cur >= 0:  # resume mid-document: reopen its chunk, find it again
            opened, row = self._counters(cur)
            self._doc, self._aligned = self._chunk(cur, opened - 1).doc(row - 1)

    def _counters(self, s: int) -> tuple[int, int]:
        return int(self.state[4 + 2 * s]), int(self.state[5 + 2 * s])

    def _chunk(self, s: int, k: int) -> _OpenChunk:
        """The lane's ``k``-th chunk of source ``s`` (cached while it is the open one)."""
        cached = self._open.get(s)
        if cached is not None and cached.k == k:
            return cached
        ld = self.loader
        position = self.id + ld.lanes * k
        chunk = ld.streams[s].at(position)
        aligned: tuple[np.ndarray, ...] = ()
        if ld.aligned_columns:
            offsets, values, extra = ld.index.read_aligned(chunk, ld.sources[s], ld.aligned_columns)
            aligned = tuple(extra[c] for c in ld.aligned_columns)
            for name, col in zip(ld.aligned_columns, aligned, strict=True):
                if col.size and ld.vocab_size is not None and (col.max() >= ld.vocab_size or col.min() < -1):
                    raise DataError(
                        f"column {name!r} of {ld.index.files[chunk.file]} holds ids outside [-1, "
                        f"{ld.vocab_size}): made with another vocabulary than the model's"
                    )
        else:
            offsets, values = ld.index.read(chunk, ld.sources[s])
        if values.size and ld.vocab_size is not None and (values.max() >= ld.vocab_size or values.min() < 0):
            raise DataError(
                f"token id out of range [0, {ld.vocab_size}) in {ld.index.files[chunk.file]}: the "
                "shards were made with a different tokenizer than the model's vocabulary"
            )
        n = len(offsets) - 1
        order = (
            np.random.default_rng([ld.cfg.seed, 5, s, position]).permutation(n)
            if ld.cfg.shuffle else np.arange(n)
        )
        opened = _OpenChunk(k, offsets, values, order, aligned)
        self._open[s] = opened
        return opened

    def _draw_source(self) -> int:
        n = int(self.state[1])
        block, weights = n // _DRAW_BLOCK, self.loader.cdf
        if self._draws[0] != block:
            rng = np.random.default_rng([self.loader.cfg.seed, 11, self.id, block])
            self._draws = (block, rng.random(_DRAW_BLOCK))
        u = self._draws[1][n % _DRAW_BLOCK]
        self.state[1] = n + 1
        return min(int(np.searchsorted(weights, u, side="right")), len(weights) - 1)

    def _next_doc(self) -> None:
        s = self._draw_source()
        opened, row = self._counters(s)
        if opened == 0 or row >= len(self._chunk(s, opened - 1).order):
            opened, row = opened + 1, 0
        self._doc, self._aligned = self._chunk(s, opened - 1).doc(row)
        self.state[4 + 2 * s], self.state[5 + 2 * s] = opened, row + 1
        self.state[2], self.state[3] = s, 0

    def fill(
        self, tokens: np.ndarray, segments: np.ndarray, positions: np.ndarray,
        aligned: tuple[np.ndarray, ...] = (),
    ) -> int:
        """Pack the next row (``seq_len + 1`` slots) into the given int32 arrays (and the
        aligned columns' rows, -1 where no document value exists: padding, appended EOS).
        Returns how many documents were cut short in it (conversation packing)."""
        if self.loader.cfg.packing == "conversation":
            return self._fill_conversations(tokens, segments, positions, aligned)
        self._fill_stream(tokens, segments, positions, aligned)
        return 0

    def _pad(self, at: int, tokens: np.ndarray, segments: np.ndarray, positions: np.ndarray,
             aligned: tuple[np.ndarray, ...]) -> None:
        tokens[at:], segments[at:], positions[at:] = self.loader.cfg.pad_id, 0, 0
        for out in aligned:
            out[at:] = -1

    def _fill_conversations(
        self, tokens: np.ndarray, segments: np.ndarray, positions: np.ndarray, aligned: tuple[np.ndarray, ...],
    ) -> int:
        """Whole documents, in draw order, until the next one does not fit (it stays
        pending and starts the next row) or the row holds ``max_segments_per_row``."""
        width, cap = tokens.shape[0], self.loader.max_segments
        at, seg, cut = 0, 0, 0
        while at < width:
            if cap and seg == cap:
                break
            if self._doc is None:
                self._next_doc()
            doc = self._doc
            assert doc is not None
            if doc.size > width - at and seg > 0:
                break  # stays pending: it starts the next row
            take = min(doc.size, width - at)
            cut += int(take < doc.size)
            tokens[at : at + take] = doc[:take]
            for out, values in zip(aligned, self._aligned, strict=True):
                out[at : at + take] = values[:take]
            seg += 1
            segments[at : at + take] = seg
            positions[at : at + take] = np.arange(take, dtype=np.int32)
            at += take
            self._doc, self._aligned, self.state[2], self.state[3] = None, (), -1, 0
        self._pad(at, tokens, segments, positions, aligned)
        return cut

    def _fill_stream(
        self, tokens: np.ndarray, segments: np.ndarray, positions: np.ndarray, aligned: tuple[np.ndarray, ...],
    ) -> None:
        """Documents closed with EOS, concatenated and cut at the row's end (the rest of a
        document continues in the lane's next row)."""
        ld = self.loader
        width = tokens.shape[0]
        eos, cap = ld.cfg.eos_id, ld.max_segments
        at, seg = 0, 0
        while at < width:
            if self._doc is None:
                if cap and seg == cap:
                    self._pad(at, tokens, segments, positions, aligned)
                    return
                self._next_doc()
            doc = self._doc
            assert doc is not None
            closes = doc.size == 0 or doc[-1] != eos
            length = doc.size + closes  # the document plus its EOS
            off = int(self.state[3])
            take = min(width - at, length - off)
            real = max(min(take, doc.size - off), 0)
            tokens[at : at + real] = doc[off : off + real]
            for out, values in zip(aligned, self._aligned, strict=True):
                out[at : at + real] = values[off : off + real]
                out[at + real : at + take] = -1
            if real < take:  # reached the appended EOS
                tokens[at + real] = eos
            seg += 1
            segments[at : at + take] = seg
            positions[at : at + take] = np.arange(take, dtype=np.int32)
            at += take
            off += take
            if off == length:
                self._doc, self._aligned, self.state[2], self.state[3] = None, (), -1, 0
            else:
                self.state[3] = off


class PackedLoader:
    """This host's batches: ``inputs, targets, loss_mask, segment_ids, positions``
    (``[rows, seq_len]``), from its lanes; see the module docstring."""

    def __init__(
        self,
        cfg: DataConfig,
        *,
        vocab_size: int | None = None,
        process_index: int = 0,
        process_count: int = 1,
        state: LoaderState | None = None,
        index: ShardIndex | None = None,
    ):
        if cfg.attention not in ("document", "causal"):
            raise DataError(f"data.attention must be 'document' or 'causal', got {cfg.attention!r}")
        if cfg.packing not in ("stream", "conversation"):
            raise DataError(f"data.packing must be 'stream' or 'conversation', got {cfg.packing!r}")
        if cfg.packing == "conversation" and cfg.attention != "document":
            raise DataError("data.packing: conversation needs data.attention: document (one segment each)")
        if not cfg.paths and index is None:
            raise DataError("no training data given (set data.paths or pass --data)")
        if cfg.global_batch_size % process_count:
            raise DataError(f"global batch {cfg.global_batch_size} does not split over {process_count} hosts")
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.index = index or ShardIndex(expand_paths(cfg.paths), cfg.open_files, cfg.index_cache)
        self.files = self.index.files
        self.documents = self.index.documents
        self.weights = mixture_weights(self.documents, cfg.weights)
        self.sources = list(self.weights)
        self.cdf = np.cumsum([self.weights[s] for s in self.sources])
        self.streams = [
            _SourceStream(self.index.chunks[s], i, cfg.seed, cfg.shuffle) for i, s in enumerate(self.sources)
        ]
        self.max_segments = cfg.max_segments_per_row if cfg.attention == "document" else 0
        clash = set(cfg.aligned_columns) & {"inputs", "targets", "loss_mask", "segment_ids", "positions"}
        if clash:
            raise DataError(f"data.aligned_columns may not reuse batch field names: {sorted(clash)}")
        # the loss-mask column travels like an aligned column and is consumed by the shaping
        self.aligned_columns = tuple(cfg.aligned_columns) + ((cfg.loss_mask_column,) if cfg.loss_mask_column else ())
        if cfg.loss_mask_column:
            _require_column(self.index, cfg.loss_mask_column)
        self.truncated = 0  # documents cut at a row's end (conversation packing)
        self.lanes = int(state.spec["lanes"]) if state is not None else (
            cfg.lanes or default_lanes(cfg.global_batch_size, process_count)
        )
        self._check_shape(process_count)
        self.rows_per_lane = cfg.global_batch_size // self.lanes
        self.per_host_batch = cfg.global_batch_size // process_count
        per_host = self.lanes // process_count
        mine = range(process_index * per_host, (process_index + 1) * per_host)
        self.spec = {
            "version": STATE_VERSION, "lanes": self.lanes, "seq_len": cfg.seq_len, "seed": cfg.seed,
            "sources": self.sources, "fingerprint": self.index.fingerprint,
            "max_segments": self.max_segments, "eos_id": cfg.eos_id, "packing": cfg.packing,
        }
        rows = self._initial_rows(mine) if state is None else self._resume_rows(state, mine)
        self._lanes = [_Lane(self, row) for row in rows]
        self._queue: queue.Queue | None = None
        self._state = self._snapshot()

    # -- construction -------------------------------------------------------------------
    def _check_shape(self, process_count: int) -> None:
        g, lanes = self.cfg.global_batch_size, self.lanes
        if g % lanes or lanes % process_count:
            raise DataError(
                f"data.lanes={lanes} must divide the global batch ({g}) and be a multiple of the "
                f"number of hosts ({process_count}); a resumed run keeps its checkpoint's lanes"
            )

    def _width(self) -> int:
        return len(_FIXED) + 2 * len(self.sources)

    def _initial_rows(self, mine: range) -> list[np.ndarray]:
        rows = []
        for lane in mine:
            row = np.zeros(self._width(), np.int64)
            row[0], row[2] = lane, -1
            rows.append(row)
        return rows

    def _resume_rows(self, state: LoaderState, mine: range) -> list[np.ndarray]:
        old = state.spec
        for key in ("version", "seq_len", "seed", "sources", "max_segments", "eos_id", "packing"):
            if old.get(key, "stream" if key == "packing" else None) != self.spec[key]:
                raise DataError(
                    f"data state does not match this run: {key} was {old.get(key)!r}, now "
                    f"{self.spec[key]!r} (resume with the checkpoint's data settings)"
                )
        if old.get("fingerprint") != self.spec["fingerprint"]:
            raise DataError(
                "the token shards differ from the ones this checkpoint was reading (file names or "
                "row groups changed); resuming would not continue the same sample sequence"
            )
        by_lane = {int(r[0]): r for r in state.lanes}
        missing = [lane for lane in mine if lane not in by_lane]
        if missing:
            raise DataError(f"data state lacks lanes {missing[:5]} (an incomplete checkpoint?)")
        return [by_lane[lane].astype(np.int64) for lane in mine]

    # -- iteration ------------------------------------------------------------------------
    def _produce(self) -> dict[str, np.ndarray]:
        width = self.cfg.seq_len + 1
        n = len(self._lanes) * self.rows_per_lane
        tokens = np.empty((n, width), np.int32)
        segments = np.empty((n, width), np.int32)
        positions = np.empty((n, width), np.int32)
        aligned = tuple(np.empty((n, width), np.int32) for _ in self.aligned_columns)
        r, cut = 0, 0
        for lane in self._lanes:
            for _ in range(self.rows_per_lane):
                cut += lane.fill(tokens[r], segments[r], positions[r], tuple(a[r] for a in aligned))
                r += 1
        columns = dict(zip(self.aligned_columns, aligned, strict=True))
        scored = columns.pop(self.cfg.loss_mask_column) if self.cfg.loss_mask_column else None
        batch = shape_rows(tokens, segments, positions, self.cfg, scored)
        for name, values in columns.items():
            batch[name] = np.ascontiguousarray(values[:, :-1])  # aligned with `inputs`
        batch[_CUT] = np.asarray(cut)
        return batch

    def _snapshot(self) -> LoaderState:
        return LoaderState(dict(self.spec), np.stack([lane.state for lane in self._lanes]))

    def _worker(self, q: queue.Queue, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                item = (self._produce(), self._snapshot())
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer thread
            q.put((exc, None))

    def close(self) -> None:
        """Stop the prefetch thread (the loader cannot be iterated afterwards)."""
        if self._queue is not None:
            self._stop.set()
            self._thread.join(timeout=10)
            self._queue = None

    def __iter__(self) -> PackedLoader:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        if self.cfg.prefetch <= 0:
            batch = self._produce()
            self._state = self._snapshot()
            self.truncated += int(batch.pop(_CUT))
            return batch
        if self._queue is None:
            self._queue, self._stop = queue.Queue(maxsize=self.cfg.prefetch), threading.Event()
            self._thread = threading.Thread(target=self._worker, args=(self._queue, self._stop), daemon=True)
            self._thread.start()
        batch, state = self._queue.get()
        if isinstance(batch, BaseException):
            raise batch
        self._state = state
        self.truncated += int(batch.pop(_CUT))
        return batch

    def state(self) -> LoaderState:
        """Where this host is: the state after the last batch handed out."""
        return LoaderState(dict(self._state.spec), self._state.lanes.copy())

    def describe(self) -> dict[str, Any]:
        return {"lanes": self.lanes, "mixture": dict(self.weights)}

    def padding_fraction(self, batch: dict[str, np.ndarray]) -> float:
        return float(1.0 - np.mean(batch["segment_ids"] > 0))


def shape_rows(tokens: np.ndarray, seg: np.ndarray, pos: np.ndarray, cfg: DataConfig,
               scored: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Rows of ``seq_len + 1`` slots -> the batch fields. A target is scored when it is
    real (not padding), of the same document as its input (``mask_cross_document_loss``)
    and, with a loss-mask column (``scored``, aligned with the slots), marked in it."""
    in_seg, tgt_seg = seg[:, :-1], seg[:, 1:]
    mask = tgt_seg > 0  # padding never scores
    if cfg.mask_cross_document_loss or scored is not None:
        mask &= in_seg == tgt_seg
    if scored is not None:
        mask &= scored[:, 1:] > 0
    out = {"inputs": tokens[:, :-1], "targets": tokens[:, 1:], "loss_mask": mask.astype(np.float32)}
    if cfg.attention == "document":
        out["segment_ids"], out["positions"] = in_seg, pos[:, :-1]
    else:
        out["segment_ids"] = (in_seg > 0).astype(np.int32)
        out["positions"] = np.broadcast_to(np.arange(cfg.seq_len, dtype=np.int32), in_seg.shape).copy()
    return {k: np.ascontiguousarray(v) for k, v in out.items()}


def _require_column(index: ShardIndex, column: str) -> None:
    for fi, path in enumerate(index.files):
        if column not in index.handles.get(fi).schema_arrow.names:
            raise DataError(f"{path} has no {column} column: not an SFT dataset (make one with `afm sft prepare`)")


def conversation_config(cfg: DataConfig) -> DataConfig:
    """``cfg`` for chat datasets (``afm sft prepare``'s shards): whole conversations per row,
    the loss on their ``loss_mask`` (the assistant's tokens)."""
    return dataclasses.replace(cfg, packing="conversation", loss_mask_column="loss_mask", attention="document")


class HeldOutConversations:
    """Held-out documents (conversations) in file order, each once, whole, then padding rows
    (no loss), so a held-out loss covers the whole set whatever the number of evaluation
    batches, identically at every evaluation. All hosts build the same global row list
    (held-out sets are small) and take their slice of every global batch."""

    def __init__(self, cfg: DataConfig, paths: list[str], *, vocab_size: int | None,
                 process_index: int = 0, process_count: int = 1):
        self.cfg = cfg
        index = ShardIndex(expand_paths(list(paths)), cfg.open_files)
        column = cfg.loss_mask_column
        if column:
            _require_column(index, column)
        width, cap = cfg.seq_len + 1, cfg.max_segments_per_row
        rows: list[list[tuple[np.ndarray, np.ndarray]]] = [[]]
        used, self.conversations = 0, 0
        for source, chunks in sorted(index.chunks.items()):
            for chunk in chunks:
                offsets, tokens, extra = index.read_aligned(chunk, source, (column,) if column else ())
                if tokens.size and vocab_size is not None and tokens.max() >= vocab_size:
                    raise DataError(f"held-out token id out of range [0, {vocab_size})")
                mask = extra[column] if column else np.ones_like(tokens)
                for i in range(len(offsets) - 1):
                    doc = tokens[offsets[i]:offsets[i + 1]], mask[offsets[i]:offsets[i + 1]]
                    full = cap and len(rows[-1]) == cap
                    if rows[-1] and (doc[0].size > width - used or full):
                        rows.append([])
                        used = 0
                    rows[-1].append((doc[0][: width - used], doc[1][: width - used]))
                    used += min(doc[0].size, width - used)
                    self.conversations += 1
        self.rows = [r for r in rows if r]
        self.per_host = cfg.global_batch_size // process_count
        self.offset = process_index * self.per_host
        self.step = 0

    def _batch(self, rows: list[list[tuple[np.ndarray, np.ndarray]]]) -> dict[str, np.ndarray]:
        n, width = len(rows), self.cfg.seq_len + 1
        tokens = np.full((n, width), self.cfg.pad_id, np.int32)
        seg, pos, mask = (np.zeros((n, width), np.int32) for _ in range(3))
        for r, docs in enumerate(rows):
            at = 0
            for s, (t, m) in enumerate(docs, 1):
                tokens[r, at:at + t.size], mask[r, at:at + t.size] = t, m
                seg[r, at:at + t.size], pos[r, at:at + t.size] = s, np.arange(t.size)
                at += t.size
        return shape_rows(tokens, seg, pos, self.cfg, mask)

    def __next__(self) -> dict[str, np.ndarray]:
        start = self.step * self.cfg.global_batch_size + self.offset
        self.step += 1
        return self._batch([self.rows[i] if i < len(self.rows) else [] for i in range(start, start + self.per_host)])

    def batches_needed(self) -> int:
        """Global batches that cover every held-out conversation."""
        return -(-len(self.rows) // self.cfg.global_batch_size)

    def state(self) -> Any:
        return None

    def describe(self) -> dict[str, Any]:
        return {"conversations": self.conversations}

    def close(self) -> None:
        """Nothing to release."""


def make_loader(
    cfg: DataConfig,
    *,
    vocab_size: int | None = None,
    process_index: int = 0,
    process_count: int = 1,
    state: LoaderState | None = None,
) -> PackedLoader:
    """The batch iterator for this host (``process_index`` of ``process_count``)."""
    return PackedLoader(
        cfg, vocab_size=vocab_size, process_index=process_index, process_count=process_count, state=state
    )


__all__ = ["HeldOutConversations", "LoaderState", "PackedLoader", "conversation_config", "default_lanes",
           "make_loader", "shape_rows"]
