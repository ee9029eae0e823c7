"""What a curate run cost: CPU per stage and per document, the rest, and peak memory.

Every run's manifest gets a ``costs`` section (and ``report.html`` a table) so that the
expensive stage is named by measurement on the user's own data, not guessed:

* per stage, the CPU seconds its own code used (:mod:`afm.pipelines.beam.cputime`) and
  milliseconds per document that entered it;
* the CPU of every process of the run (this one and the local runner's workers, from
  ``getrusage``), so that what no stage accounts for (Beam's runner, shuffles, packing,
  worker start-up) is shown as ``other``;
* peak resident memory of the launching process, of the largest worker process, and of
  all of them together (sampled, :class:`TreeMemory`).

On a cluster runner only the stage figures are known (the workers are elsewhere); the
process figures then describe the launcher alone and say so.
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass
from typing import Any

from afm.pipelines.beam.cputime import stage_cpu


@dataclass(frozen=True)
class Usage:
    """``getrusage`` of this process and its finished children at one moment."""

    self_cpu: float
    children_cpu: float
    self_peak_kb: int
    children_peak_kb: int

    @classmethod
    def now(cls) -> Usage:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, me.ru_maxrss, kids.ru_maxrss)


class TreeMemory:
    """Peak resident memory of this process and all its descendants together (the local
    runner's workers included), sampled every ``every_s`` seconds on a thread (psutil):
    what the machine must have, which no single process's peak says."""

    def __init__(self, every_s: float = 0.5):
        import threading

        self.every_s = every_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="afm-memory", daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def sample(self) -> int:
        import psutil

        me = psutil.Process()
        total = 0
        for proc in [me, *me.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        self.peak_bytes = max(self.peak_bytes, total)
        return total

    def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - memory sampling is informational
                return
            if self._stop.wait(self.every_s):
                return


def _mb(kb: int) -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS
    return round(kb / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def run_costs(metrics: dict[str, Any], funnel: list[dict[str, Any]], before: Usage, after: Usage,
              elapsed: float, local: bool, tree_peak_bytes: int = 0) -> dict[str, Any]:
    """The manifest's ``costs`` section (see the module docstring)."""
    cpu = stage_cpu(metrics)
    docs_in = {f["stage"]: int(f["in"]) for f in funnel}
    written = sum(int(f["dropped"]) for f in funnel) + (int(funnel[-1]["kept"]) if funnel else 0)
    stages = []
    for name in [f["stage"] for f in funnel] + ["write"]:
        if name not in cpu:
            continue
        n = written if name == "write" else docs_in.get(name, 0)
        stages.append({"stage": name, "cpu_s": round(cpu[name], 6), "documents": n,
                       "ms_per_document": round(1000 * cpu[name] / n, 4) if n else None})
    measured = sum(cpu.values())
    process = (after.self_cpu - before.self_cpu) + (after.children_cpu - before.children_cpu)
    total_in = docs_in.get("read", 0)
    out: dict[str, Any] = {
        "stages": stages,
        "stages_cpu_s": round(measured, 6),
        "stages_ms_per_document": round(1000 * measured / total_in, 4) if total_in else None,
        "elapsed_s": round(elapsed, 3),
        "peak_memory_mb": {"launcher": _mb(after.self_peak_kb)},
    }
    if local:
        out["process_cpu_s"] = round(process, 3)
        out["other_cpu_s"] = round(max(0.0, process - measured), 3)  # runner, shuffles, start-up
        out["process_ms_per_document"] = round(1000 * process / total_in, 4) if total_in else None
        if after.children_peak_kb:
            out["peak_memory_mb"]["largest_worker"] = _mb(after.children_peak_kb)
        if tree_peak_bytes:
            out["peak_memory_mb"]["all_processes"] = round(tree_peak_bytes / 2**20, 1)
    else:
        out["note"] = "cluster runner: stage CPU from the workers' counters; memory of the launcher only"
    return out


__all__ = ["TreeMemory", "Usage", "run_costs"]
