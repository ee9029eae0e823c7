"""How fast curate reads WARC files (``afm bench warc_read``).

* ``warc_read``: pages/CPU-s of curate's reader (:func:`afm.pipelines.beam.io.read_file_items`:
  gzip members inflated, records framed, HTTP messages parsed) over the gold sets' real pages
  as WARC (the files ``afm bench curate --suite real-pages`` reads), with ISA-L's inflate (the
  reader's choice where ``isal`` is installed) against Python's zlib, rounds interleaved in one
  process; and the reader's gzip layer alone (no WARC framing), both ways, on the same bytes.
"""

from __future__ import annotations

import io
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison
from afm.app.bench.filters.filters import held_gold_pages
from afm.app.bench.pipelines.curate import build_real_corpus

ROUNDS = 3


def _pages_read(files: list[Path]) -> int:
    from afm.pipelines.beam.io import PAGE, read_file_items

    return sum(kind == PAGE for f in files for kind, _ in read_file_items(str(f), "web"))


def _inflate_all(data: bytes, inflater: Any) -> int:
    """Decompressed bytes of every gzip member of ``data``, through the reader's own gzip
    layer (:func:`afm.readers.byte_stream.iter_events`) with ``inflater``: no WARC framing."""
    from afm.readers import byte_stream

    original = byte_stream._inflater
    byte_stream._inflater = inflater
    try:
        return sum(len(e) for e in byte_stream.iter_events(io.BytesIO(data), gzip=True) if isinstance(e, bytes))
    finally:
        byte_stream._inflater = original


def _cpu(run: Callable[[], int]) -> tuple[float, int]:
    start = time.process_time()
    n = run()
    return time.process_time() - start, n


def bench_warc_read(opts: BenchOptions) -> list[Comparison]:
    """Curate's WARC reader with ISA-L's inflate and with zlib, side by side on real pages."""
    from afm.console import console
    from afm.readers import byte_stream

    try:
        from isal import isal_zlib
    except ImportError as exc:
        raise RuntimeError("isal is not installed (a curate dependency): pip install 'afm[curate]'") from exc
    pages = held_gold_pages(opts, limit=60 if opts.quick else None)
    small, big = build_real_corpus(pages, opts.workdir / "curate")
    files = sorted(big.glob("*.warc.gz"))
    data = [f.read_bytes() for f in files]
    console.print(f"real pages: {len(pages):,} in {len(files)} WARC files ({sum(map(len, data)) / 1e6:.1f} MB "
                  f"compressed) in {big}; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    inflaters = {"ISA-L": isal_zlib, "zlib": zlib}
    cpu: dict[str, list[float]] = {name: [] for name in inflaters}
    inflate_cpu: dict[str, list[float]] = {name: [] for name in inflaters}
    read = 0
    original = byte_stream._inflater
    try:
        _pages_read(files[:1])  # imports and first-call costs, outside the rounds
        for _ in range(1 if opts.quick else ROUNDS):
            for name, inflater in inflaters.items():
                byte_stream._inflater = inflater
                seconds, read = _cpu(lambda: _pages_read(files))
                cpu[name].append(seconds)
                seconds, _ = _cpu(lambda inflater=inflater: sum(_inflate_all(d, inflater) for d in data))
                inflate_cpu[name].append(seconds)
    finally:
        byte_stream._inflater = original
    best = {name: min(v) for name, v in cpu.items()}  # the least disturbed round of each
    inflate = {name: min(v) for name, v in inflate_cpu.items()}
    return [
        Comparison("curate's WARC reader, ISA-L inflate vs zlib", read / best["ISA-L"], read / best["zlib"],
                   "zlib", "pages/CPU-s"),
        Comparison("the inflate alone, ISA-L vs zlib", 1000 * inflate["ISA-L"] / read,
                   1000 * inflate["zlib"] / read, "zlib", "CPU ms a page"),
        Comparison("pages read", float(read)),
        Comparison("load average (1 min) at end", os.getloadavg()[0]),
    ]


BENCHMARKS = {"warc_read": bench_warc_read}
