"""Benchmark helpers: every benchmark prints ours next to a baseline from the same run.

Modules in the areas' ``bench`` folders (``afm.<area>.bench.*``) export ``BENCHMARKS: dict[str, Callable[[BenchOptions],
list[Comparison]]]``; ``afm bench`` runs them and prints one table per benchmark.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class BenchOptions:
    quick: bool = False  # smaller inputs, for smoke runs
    shared_dir: Path | None = None  # ../shared when present (real benchmark data)
    workdir: Path = Path("work/bench")
    model_config: str | None = None  # benchmarks of a model size (train): which one
    seq_len: int | None = None  # ... and at which sequence length
    tasks: tuple[str, ...] = ()  # train: the training tasks whose memory plans to print
    suite: str | None = None  # a benchmark's named set of runs (train: gpu; curate: real-pages)
    # Extraction gold sets beyond ../shared's ScrapingHub pages: a folder with wcxb/,
    # trafilatura/ and utomo/ (as `afm extraction table` takes them; each optional).
    gold_dir: Path | None = None
    # extraction, curate: block model files measured beside the shipped one on the same
    # pages (a candidate model before it ships).
    block_models: tuple[Path, ...] = ()
    # curate --suite real-pages: rounds of every run, one after another (median and range)
    repeat: int = 1


@dataclass
class Comparison:
    """One measured figure: ours vs a baseline measured in the same run."""

    metric: str
    ours: float
    baseline: float | None = None
    baseline_name: str = ""
    unit: str = ""
    goal: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return self.ours / self.baseline  # type: ignore[operator]


def peak_rss_mb() -> float:
    """Peak resident memory of this process (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


BenchFn = Callable[[BenchOptions], list[Comparison]]
