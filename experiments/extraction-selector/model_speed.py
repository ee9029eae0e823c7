"""Issue 57: pages per CPU-second of the block extractor with several model files, next to
trafilatura's defaults, on the same real pages in one process.

    python experiments/extraction-selector/model_speed.py GOLD MODEL.json [MODEL.json ...]

GOLD holds the gold sets as ``afm bench extraction --gold`` reads them (``wcxb/``,
``trafilatura/``, ``utomo/``, ``googletrends/``; ScrapingHub's pages from ``../shared/eval``).
Each extractor runs on every chunk of 50 pages in turn, so a change of the machine's load
falls on all alike; the first pages warm each up (imports, models) outside the timing. The
bench measures the shipped file only; this compares files before one is shipped."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import trafilatura

from afm.filters.extract import ExtractConfig, Extractor
from afm.filters.extraction.gold import LOADERS, load_sets

SHARED_EVAL = Path(__file__).resolve().parents[3] / "shared" / "eval"


def blocks_with(model: str) -> Callable[[bytes, str | None], object]:
    extractor = Extractor(ExtractConfig(method="blocks", early_language=[], block_model_path=model))
    return lambda body, url: extractor({"url": url, "status": 200, "headers": {}, "body": body})


def main(gold: Path, models: list[str]) -> None:
    paths = {name: gold / name for name in LOADERS if name != "scrapinghub" and (gold / name).is_dir()}
    pages = load_sets(scrapinghub=SHARED_EVAL if SHARED_EVAL.is_dir() else None, **paths)
    fns = {Path(m).name: blocks_with(m) for m in models}
    fns["trafilatura default"] = lambda body, url: trafilatura.extract(body, url=url)
    for fn in fns.values():
        for page in pages[:3]:
            fn(page.body, page.url)
    cpu = dict.fromkeys(fns, 0.0)
    load = os.getloadavg()[0]
    for at in range(0, len(pages), 50):
        for name, fn in fns.items():
            start = time.process_time()
            for page in pages[at: at + 50]:
                fn(page.body, page.url)
            cpu[name] += time.process_time() - start
    print(f"{len(pages)} pages; load {load:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    for name, seconds in cpu.items():
        print(f"{name}: {len(pages) / seconds:.1f} pages/CPU-s, {seconds / len(pages) * 1e3:.2f} ms a page, "
              f"{cpu['trafilatura default'] / seconds:.2f}x trafilatura")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
