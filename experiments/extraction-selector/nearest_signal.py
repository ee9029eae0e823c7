"""Issue 57: does the nearest-signal feature (``block_features.nearest_signals``) help the block model?

    python experiments/extraction-selector/nearest_signal.py CACHE [CACHE ...]

A controlled comparison with the trees alone at one setting fixed in advance (the shipped file's
threshold 0.5 and page rule: fill >= 0.3, headline dropped, reader comments of 50 words), on the same
records with and without the new columns (``NEAREST_NAMES``, dropped by name; nothing else differs): each
old source held out from trees fitted on the other three; Fundus and Google-Trends (never trained on)
scored by trees of all four. Printed: F1 minus trafilatura's (defaults, no comments) on the held-out set."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_features import NAMES, NEAREST_NAMES
from afm.filters.extraction.block_model import PageRule
from afm.filters.extraction.gold import extraction_scores

THRESHOLD = 0.5
RULE = PageRule(fill_below=0.3, drop_headline=True, comment_words=50)
OLD = ("scrapinghub", "trafilatura", "utomo", "wcxb")
UNSEEN = ("fundus", "googletrends")


def f1_on(records: list[bt.PageRecord], forest: bt.Forest, idx: list[int], xs: dict | None) -> float:
    probs = bt.probabilities(forest, records, idx, xs)
    return extraction_scores(list(bt.page_rows(records, probs, THRESHOLD, RULE).values()))["f1"]


def records_without(caches: list[Path]) -> tuple[list[bt.PageRecord], dict[str, list[int]], dict[int, np.ndarray]]:
    """The caches' records, their indices by source, and each page's rows without the
    nearest-signal columns (found by name in ``NAMES``, so a reordered feature list still drops the right ones)."""
    records = [r for c in caches for r in bt.load_records(c)]
    nearest = set(NEAREST_NAMES)
    keep = [i for i, name in enumerate(NAMES) if name not in nearest]
    return records, bt.sources_of(records), {i: r.x[:, keep] for i, r in enumerate(records)}


def main(caches: list[Path]) -> None:
    records, by, without = records_without(caches)
    traf = {s: extraction_scores(list(bt.baseline_rows(records, "trafilatura", ix).values()))["f1"]
            for s, ix in by.items()}
    print(f"trees alone, threshold {THRESHOLD}, {RULE}; F1 minus trafilatura's on the held-out set")
    print("held out        without   with      change   (trafilatura's F1)")
    for held in (*OLD, *UNSEEN):
        sources = [s for s in OLD if s != held]
        idx = [i for s in sources for i in by[s]]
        row = []
        for xs in (without, None):
            forest = bt.fit_forest(records, idx, bt.STAGE1, xs)
            row.append(f1_on(records, forest, by[held], xs) - traf[held])
        print(f"{held:14s}  {row[0]:+.4f}   {row[1]:+.4f}   {row[1] - row[0]:+.4f}   ({traf[held]:.4f})", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main([Path(a) for a in sys.argv[1:]])
