"""How much of each evaluated task the corpus's decontamination index protects.

``afm decontam`` drops training documents that share an n-gram with an indexed benchmark
item. A score on a task means little if that task's items were never in the index: a
contaminated corpus would have passed unfiltered. This module scans each task's items
(every string field of the document lm-eval evaluates) against the same index with the
same normalisation and n-gram sizes (``afm.filters.ngram_index``), and counts an item as
*covered* when at least one of its n-grams is indexed, i.e. when a training document
quoting it would have been caught.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from typing import Any

from afm.filters.ngram_index import NgramIndex


def item_text(doc: Any) -> str:
    """Every string in a document (nested fields included), one per line."""
    parts: list[str] = []

    def visit(x: Any) -> None:
        if isinstance(x, str):
            parts.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                visit(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                visit(v)

    visit(doc)
    return "\n".join(parts)


def task_coverage(index_path: str | os.PathLike[str], docs_by_task: dict[str, Iterable[Any]],
                  batch: int = 512) -> dict[str, dict[str, Any]]:
    """Per task: items, covered items, fraction, and which indexed benchmarks matched."""

    index = NgramIndex(index_path)
    out: dict[str, dict[str, Any]] = {}
    for task, docs in docs_by_task.items():
        texts = [item_text(d) for d in docs]
        covered = 0
        matched: Counter[str] = Counter()
        for lo in range(0, len(texts), batch):
            for hits in index.scan(texts[lo:lo + batch]):
                if hits:
                    covered += 1
                    matched.update({h.benchmark for h in hits})
        out[task] = {"items": len(texts), "covered": covered,
                     "fraction": covered / len(texts) if texts else 0.0,
                     "matched_benchmarks": dict(matched.most_common())}
    return out
