"""CPU time per stage, measured where the stage's own code runs.

Which stage costs what decides where to optimise and how to size a cluster, and the time
a run takes says neither: it mixes start-up, waiting and every stage. Each stage's
DoFn therefore measures the thread CPU time (``time.thread_time_ns``: not wall time, so a
loaded machine does not inflate it) of its own work, the filter or extractor call, the
MinHash sketch, the n-gram scan, and nothing downstream (Beam runs fused downstream steps
inside ``yield``, so generators are timed only while they compute, :func:`timed_iter`).
A :class:`StageClock` adds its nanoseconds to the Beam counter ``afm.cpu/<stage>`` once per
bundle; the pipeline reads the counters when the run ends (every runner reports committed
or attempted counters) and the manifest divides them by the stage's documents.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

CPU_NAMESPACE = "afm.cpu"
T = TypeVar("T")


class StageClock:
    """Thread CPU nanoseconds of one stage in one DoFn instance, flushed per bundle."""

    def __init__(self, stage: str):
        self.stage = stage
        self.pending = 0
        self._counter: Any = None

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        start = time.thread_time_ns()
        try:
            return fn(*args)
        finally:
            self.pending += time.thread_time_ns() - start

    def add(self, nanoseconds: int) -> None:
        self.pending += nanoseconds

    def flush(self) -> None:
        """Add what was measured to the Beam counter (call from ``finish_bundle``)."""
        if not self.pending:
            return
        if self._counter is None:
            from apache_beam.metrics import Metrics

            self._counter = Metrics.counter(CPU_NAMESPACE, self.stage)
        self._counter.inc(self.pending)
        self.pending = 0

    def __getstate__(self) -> dict[str, Any]:  # pickled with its DoFn: no counter object
        return {"stage": self.stage, "pending": 0, "_counter": None}


def timed_iter(items: Iterable[T], clock: StageClock) -> Iterator[T]:
    """``items``, with only the time spent producing each one added to ``clock``."""
    it = iter(items)
    while True:
        start = time.thread_time_ns()
        try:
            item = next(it)
        except StopIteration:
            clock.add(time.thread_time_ns() - start)
            return
        clock.add(time.thread_time_ns() - start)
        yield item


def stage_cpu(metrics: dict[str, Any]) -> dict[str, float]:
    """Seconds of CPU per stage from a run's metrics (``afm.cpu/<stage>`` counters, in ns)."""
    prefix = f"{CPU_NAMESPACE}/"
    return {k[len(prefix):]: v / 1e9 for k, v in metrics.items() if k.startswith(prefix) and v}


__all__ = ["CPU_NAMESPACE", "StageClock", "stage_cpu", "timed_iter"]
