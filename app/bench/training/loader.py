"""``afm bench loader``: tokens/s of the streaming loader from cold Parquet shards.

Writes token shards shaped like ``afm tokenize`` output (zstd, 1024 documents per row
group, mixed sources sorted by a hash, log-normal document lengths around 500 tokens),
then times, each from a fresh object (no decoded row group cached; the files are in the
OS page cache after writing), packing to 4096-token rows with a 3-source mixture:

* **afm**: ``afm.training.data.loader`` (what ``afm train`` uses), one host of one;
* **baseline**: the loader this project had before, and what a Grain user writes first:
  random access to every document (``grain.MapDataset`` over a Parquet row source with an
  LRU of decoded row groups), ``shuffle``, ``MapDataset.mix``, ``ConcatThenSplitIterDataset``.
  Shuffled random access decodes a whole row group for most documents it fetches.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from afm.app.bench.common import BenchOptions, Comparison
from afm.io import read_shard
from afm.parquet import open_parquet

SOURCES = ("web", "code", "math")
WEIGHTS = {"web": 0.6, "code": 0.3, "math": 0.1}


def write_bench_shards(out: Path, *, shards: int, docs_per_shard: int, seed: int = 0) -> tuple[list[str], int]:
    """Token shards like ``afm tokenize`` writes; returns (paths, total tokens)."""
    import pyarrow as pa

    from afm.io import write_shard
    from afm.training.data.shards import TOKEN_SCHEMA

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths, total = [], 0
    for s in range(shards):
        lengths = np.clip(rng.lognormal(5.8, 1.0, docs_per_shard).astype(np.int64), 1, 32_000)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        values = rng.integers(3, 49_152, int(offsets[-1]), dtype=np.int32)
        table = pa.table(
            {
                "id": pa.array([f"{s}-{i:08d}" for i in range(docs_per_shard)]),
                "source": pa.array([SOURCES[i] for i in rng.integers(0, 3, docs_per_shard)]),
                "tokens": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)),
            },
            schema=TOKEN_SCHEMA,
        )
        path = out / f"shard-{s:03d}.parquet"
        write_shard(path, table, TOKEN_SCHEMA, row_group_size=1024)
        paths.append(str(path))
        total += int(offsets[-1])
    return paths, total


class _RandomAccessRows:
    """The previous loader's source: any document by index, row groups decoded on a miss."""

    def __init__(self, files: list[str], rows: np.ndarray, cache: int = 8):
        self.files = [open_parquet(f) for f in files]
        starts, groups, total = [], [], 0
        for fi, pf in enumerate(self.files):
            for rg in range(pf.metadata.num_row_groups):
                starts.append(total)
                groups.append((fi, rg))
                total += pf.metadata.row_group(rg).num_rows
        self.starts, self.groups, self.rows = np.asarray(starts), groups, rows
        self.cache: OrderedDict[int, Any] = OrderedDict()
        self.size = cache

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        row = int(self.rows[i])
        g = int(np.searchsorted(self.starts, row, side="right") - 1)
        if g not in self.cache:
            fi, rg = self.groups[g]
            col = self.files[fi].read_row_group(rg, columns=["tokens"]).column(0).combine_chunks()
            self.cache[g] = (col.offsets.to_numpy(), col.values.to_numpy())
            if len(self.cache) > self.size:
                self.cache.popitem(last=False)
        offsets, values = self.cache[g]
        j = row - int(self.starts[g])
        return {"tokens": np.append(values[offsets[j] : offsets[j + 1]], 2).astype(np.int32)}


def _grain_baseline(files: list[str], seq_len: int, batch: int) -> Any:
    import grain

    sources = np.concatenate([read_shard(f, columns=["source"]).column(0).to_numpy(zero_copy_only=False) for f in files])
    parts = []
    for i, s in enumerate(SOURCES):
        ds = grain.MapDataset.source(_RandomAccessRows(files, np.flatnonzero(sources == s)))
        parts.append(ds.shuffle(seed=i).repeat(None))
    mixed = grain.MapDataset.mix(parts, [WEIGHTS[s] for s in SOURCES]).to_iter_dataset()
    packed = grain.experimental.ConcatThenSplitIterDataset(mixed, length_struct={"tokens": seq_len + 1})
    return iter(packed.batch(batch, drop_remainder=True))


def _afm_loader(files: list[str], seq_len: int, batch: int) -> Any:
    from afm.training.data.loader import make_loader
    from afm.training.data.shards import DataConfig

    cfg = DataConfig(paths=files, seq_len=seq_len, global_batch_size=batch, weights=WEIGHTS, prefetch=0)
    return make_loader(cfg, vocab_size=49_152)


def _rate(make: Any, seconds: float) -> float:
    """Tokens/s of a fresh iterator, construction (index, footers) included."""
    start = time.perf_counter()
    it = make()
    tokens = 0
    while time.perf_counter() - start < seconds:
        tokens += int(np.asarray(next(it)["inputs" if hasattr(it, "lanes") else "tokens"]).size)
    return tokens / (time.perf_counter() - start)


def bench_loader(opts: BenchOptions) -> list[Comparison]:
    shards, docs, seconds = (2, 4096, 3.0) if opts.quick else (8, 8192, 10.0)
    files, total = write_bench_shards(Path(opts.workdir) / "loader-shards", shards=shards, docs_per_shard=docs)
    seq_len, batch = 4096, 8
    ours = _rate(lambda: _afm_loader(files, seq_len, batch), seconds)
    base = _rate(lambda: _grain_baseline(files, seq_len, batch), seconds)
    label = f"4096-token rows, 3 sources, {total / 1e6:.0f}M tokens"
    return [
        Comparison(f"tok/s per process ({label})", ours, base, "previous (Grain random access)", "tok/s", ">= 500k"),
    ]


BENCHMARKS = {"loader": bench_loader}
