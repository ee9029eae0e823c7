"""``afm distill targets``: a teacher's top-1 prediction for every token, written beside it.

Distilling on the fly runs the teacher's forward pass at every student step, on every
epoch; at AFM's scale (a 6.4B teacher, 6.3T tokens) that is most of the cost. Precomputed
targets cost one teacher pass over the data and one int32 per token: this module reads
token shards (``afm tokenize``'s output, or any ``id, source, tokens`` Parquet), runs the
teacher over every document and writes the same rows, in the same order and row groups,
with one more column ``teacher_top1`` (list<int32>, as long as ``tokens``):
``teacher_top1[i] = argmax_v p_teacher(v | tokens[: i + 1])``, the teacher's guess for
``tokens[i + 1]`` (for the last token: what follows the document, usually EOS). The output
is a normal token dataset (``tokens-NNNNN.parquet``, ``manifest.json``, ``_SUCCESS`` last,
via ``afm.outputs``), so ``afm train`` reads it like any other, and the distillation task
packs the column with the tokens (``data.aligned_columns``).

Context: each document is cut into windows of ``window`` tokens (default: the sequence
length the teacher was trained at, when the checkpoint says so, else its
``max_seq_len``); the teacher sees each window from its start, with attention kept inside
the window. Windows are packed several to a row (segment ids, positions restarting), so a
batch of short documents costs one forward pass.

One process: at scale, run one per host on disjoint input lists (``--data`` per host).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa

from afm.io import write_shard
from afm.model.inference.scoring import token_argmax
from afm.outputs import OutputDir
from afm.parquet import open_parquet, row_count
from afm.training.compress.teacher import Teacher
from afm.training.core.checkpoint import checkpoint_meta
from afm.training.data.shards import TOKEN_SCHEMA, DataError, expand_paths

COLUMN = "teacher_top1"


def target_schema(column: str = COLUMN) -> pa.Schema:
    return TOKEN_SCHEMA.append(pa.field(column, pa.list_(pa.int32())))


@dataclass(frozen=True)
class Window:
    doc: int  # index of the document in its row group
    start: int  # first token of the window in the document
    length: int


def windows(lengths: list[int], window: int) -> list[Window]:
    """Every document cut into consecutive windows of at most ``window`` tokens."""
    out = []
    for doc, n in enumerate(lengths):
        for start in range(0, n, window):
            out.append(Window(doc, start, min(window, n - start)))
    return out


def pack_rows(items: list[Window], width: int) -> list[list[tuple[Window, int]]]:
    """Windows in order into rows of ``width`` slots: ``[(window, offset), ...]`` per row
    (a window goes to the current row while it fits, else starts the next)."""
    rows: list[list[tuple[Window, int]]] = []
    used = width
    for w in items:
        if used + w.length > width:
            rows.append([])
            used = 0
        rows[-1].append((w, used))
        used += w.length
    return rows


class TopOnePredictor:
    """The teacher compiled for ``[batch, window]`` packed rows -> top-1 ids."""

    def __init__(self, teacher_path: str, *, window: int | None = None, batch_size: int = 8, chunk: int = 1024):
        from jax.sharding import SingleDeviceSharding

        if window is None:
            try:
                meta, _ = checkpoint_meta(teacher_path)
                window = int(meta.get("seq_len") or 0) or None
            except FileNotFoundError:
                window = None
        probe = Teacher.open(teacher_path)
        self.window = int(window or probe.config.max_seq_len)
        if self.window < 1 or batch_size < 1:
            raise ValueError("window and batch size must be positive")
        self.teacher = Teacher.open(teacher_path, max_seq_len=max(probe.config.max_seq_len, self.window), remat="none")
        self.batch_size = batch_size
        device = SingleDeviceSharding(jax.devices()[0])
        like = {k: jax.ShapeDtypeStruct(s, jnp.float32, sharding=device) for k, s in self.teacher.parts.shapes.items()}
        self.params = self.teacher.restore(like)
        cfg = self.teacher.config
        parts = self.teacher.parts

        def top1(params, tokens, segments, positions):
            model = parts.build_model(params)
            hidden, _ = model.features(tokens, positions=positions, segment_ids=segments)
            return token_argmax(hidden, model.embed[...], logit_scale=cfg.logit_scale, chunk=chunk)

        self._top1 = jax.jit(top1)

    @property
    def vocab_size(self) -> int:
        return self.teacher.config.vocab_size

    def predict(self, docs: list[np.ndarray]) -> list[np.ndarray]:
        """Top-1 ids per token of every document (int32, same lengths)."""
        out = [np.full(len(d), -1, np.int32) for d in docs]
        rows = pack_rows(windows([len(d) for d in docs], self.window), self.window)
        b, w = self.batch_size, self.window
        for first in range(0, len(rows), b):
            group = rows[first:first + b]
            tokens = np.zeros((b, w), np.int32)
            segments = np.zeros((b, w), np.int32)
            positions = np.zeros((b, w), np.int32)
            for r, row in enumerate(group):
                for seg, (win, off) in enumerate(row, start=1):
                    tokens[r, off:off + win.length] = docs[win.doc][win.start:win.start + win.length]
                    segments[r, off:off + win.length] = seg
                    positions[r, off:off + win.length] = np.arange(win.length)
            top = np.asarray(self._top1(self.params, tokens, segments, positions))
            for r, row in enumerate(group):
                for win, off in row:
                    out[win.doc][win.start:win.start + win.length] = top[r, off:off + win.length]
        return out


def _row_groups(path: str) -> Iterator[pa.Table]:
    pf = open_parquet(path)
    missing = [c for c in ("id", "source", "tokens") if c not in pf.schema_arrow.names]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing}; token shards need id, source, tokens")
    for rg in range(pf.metadata.num_row_groups):
        yield pf.read_row_group(rg, columns=["id", "source", "tokens"])


def compute_targets(
    teacher: str,
    data: list[str],
    out: str,
    *,
    window: int | None = None,
    batch_size: int = 8,
    column: str = COLUMN,
    overwrite: bool = False,
    progress: Any = None,
) -> dict[str, Any]:
    """Write ``data``'s token shards plus the teacher's top-1 column into ``out``; returns
    the manifest. ``progress(documents_done, documents_total)`` is called per row group."""

    files = expand_paths(list(data))
    total_docs = sum(row_count(f) for f in files)
    output = OutputDir.prepare(out, overwrite=overwrite)  # refuse a used directory before any work
    t0 = time.perf_counter()
    try:
        predictor = TopOnePredictor(teacher, window=window, batch_size=batch_size)
        schema = target_schema(column)
        docs = tokens = 0
        shards = []
        def with_targets(path: str) -> Iterator[pa.Table]:
            """The shard's row groups, each with the teacher's column: one row group each."""
            nonlocal docs, tokens
            for table in _row_groups(path):
                rows = [np.asarray(t, np.int32) for t in table.column("tokens").to_pylist()]
                for r in rows:
                    if r.size and (r.max() >= predictor.vocab_size or r.min() < 0):
                        raise DataError(f"{path}: token id outside the teacher's vocabulary "
                                        f"[0, {predictor.vocab_size})")
                top = predictor.predict(rows)
                array = pa.array([t.tolist() for t in top], pa.list_(pa.int32()))
                yield pa.Table.from_arrays([*table.columns, array], schema=schema)
                docs += table.num_rows
                tokens += sum(r.size for r in rows)
                if progress is not None:
                    progress(docs, total_docs)

        for i, path in enumerate(files):
            name = f"tokens-{i:05d}.parquet"
            write_shard(output.staged(name), with_targets(path), schema)
            shards.append({"input": path, "output": name})
        manifest = {
            "command": "afm distill targets", "teacher": teacher, "teacher_model": predictor.teacher.config.name,
            "column": column, "window": predictor.window, "documents": docs, "tokens": tokens,
            "shards": shards, "seconds": round(time.perf_counter() - t0, 2),
        }
        output.promote(manifest)
    except BaseException:
        output.abort()
        raise
    return manifest


__all__ = ["COLUMN", "TopOnePredictor", "compute_targets", "pack_rows", "target_schema", "windows"]
