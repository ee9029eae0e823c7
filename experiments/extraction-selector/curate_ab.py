"""Issue 57: whole ``afm curate`` with ``method=blocks`` and several block model files, next to
trafilatura alone, on the real-page WARC files ``afm bench curate --suite real-pages`` wrote.

    python experiments/extraction-selector/curate_ab.py BENCH_CURATE_DIR MODEL.json [MODEL.json ...]

BENCH_CURATE_DIR is the bench's work folder (``work/bench/curate``: its ``real-*/first`` and
``real-*/all`` WARCs and its ``decontam-index``). Each run is the bench's own child-process
measurement (``measure``); steady state is the difference between the all-files and the
first-file runs, as in the bench. The bench times the shipped file once among five runs; this
puts model files side by side in one sitting, where the machine's drift between runs (one
bench run's curate took 108 CPU s, the same run minutes later 89) falls on all alike."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from afm.app.bench.pipelines.curate import measure


def main(work: Path, models: list[str]) -> None:
    corpus = next(p for p in sorted(work.glob("real-*")) if p.is_dir())
    index = str(work / "decontam-index")
    kinds: list[tuple[str, str, dict[str, Any]]] = [("trafilatura alone", "trafilatura", {})]
    kinds += [(Path(m).name, "afm-all", {"decontam_index": index, "config": {
        "extract": {"params": {"method": "blocks", "block_model_path": m}}}}) for m in models]
    runs: dict[str, list[Any]] = {}
    for label in ("first", "all"):
        for i, (name, kind, extra) in enumerate(kinds):
            m = measure(kind, corpus / label, work / "out" / f"ab-{i}-{label}", extra)
            runs.setdefault(name, []).append(m)
            print(f"{name}, {label}: {m.pages} pages, {m.kept} kept, {m.cpu_s:.1f} CPU s; "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
    rate = {n: (big.pages - small.pages) / (big.cpu_s - small.cpu_s) for n, (small, big) in runs.items()}
    for name, value in rate.items():
        print(f"{name}: {value:.2f} pages/CPU-s at steady state, {1e3 / value:.2f} ms a page, "
              f"{value / rate['trafilatura alone']:.2f}x trafilatura alone")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
