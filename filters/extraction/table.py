"""Run every candidate extractor on gold pages once and keep their outputs.

Training, cross-validation and the benchmarks all start from this table (one row per
page: each candidate's text and CPU time), so the expensive part, the extractors, runs
once per page however many models are fitted. Rows are cached as gzip JSONL.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from afm.console import track
from afm.filters.extraction.candidates import CANDIDATES, Page, run_candidate
from afm.filters.extraction.decode import decode_html, page_words
from afm.filters.extraction.gold import GoldPage


def decode(body: bytes) -> str:
    """The page's text as the extraction stage decodes it (no HTTP headers)."""

    try:
        return decode_html(body, {})[0]
    except (UnicodeError, LookupError):
        return body.decode("utf-8", "replace")


def candidate_row(page: GoldPage, names: Iterable[str] = tuple(CANDIDATES)) -> dict[str, Any]:
    """One page's row: every candidate's text and CPU seconds, and the page's gold."""

    start = time.process_time()
    parsed = Page(decode(page.body), page.url)
    _ = parsed.tree
    texts, cpu = {}, {"parse": time.process_time() - start}
    for name in names:
        start = time.process_time()
        texts[name] = run_candidate(name, parsed)
        cpu[name] = time.process_time() - start
    return {"set": page.set, "id": page.id, "url": page.url, "html_bytes": len(page.body),
            "page_words": page_words(parsed.html),
            "truth": page.truth, "with": page.with_, "without": page.without,
            "texts": texts, "cpu": cpu}


def build_rows(pages: list[GoldPage], workers: int = 1) -> Iterator[dict[str, Any]]:
    """Rows of ``pages`` in order, on ``workers`` processes, with a progress bar."""

    if workers <= 1:
        yield from track(map(candidate_row, pages), "candidate extractors", len(pages), "pages")
        return
    with ProcessPoolExecutor(workers) as pool:
        rows = pool.map(candidate_row, pages, chunksize=4)
        yield from track(rows, "candidate extractors", len(pages), "pages")


def save_rows(rows: Iterable[dict[str, Any]], path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def load_rows(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]
