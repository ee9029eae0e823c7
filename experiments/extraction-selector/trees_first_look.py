"""The trees-alone first look at new block columns, one protocol for every feature family tried
(``cta_features.py``, ``prose_parent.py``): the shipped file's threshold 0.5 and page rule (fill >= 0.3,
headline dropped, reader comments of 50 words, no fallback), the same records with and without the
columns (nothing else differs); each training source held out from trees fitted on the other three, the
unseen sets scored by trees of all four. Printed: F1 minus trafilatura's (defaults, no comments)."""

from __future__ import annotations

import numpy as np

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_model import PageRule
from afm.filters.extraction.gold import extraction_scores

THRESHOLD = 0.5
RULE = PageRule(fill_below=0.3, drop_headline=True, comment_words=50)
OLD = ("scrapinghub", "trafilatura", "utomo", "wcxb")
UNSEEN = ("googletrends",)  # Fundus is kept for one reading of a file a nested run makes


def compare(records: list[bt.PageRecord], augmented: dict[int, np.ndarray]) -> None:
    """Print each held-out set's margin over trafilatura without and with the columns
    (``augmented``: every record's rows with them)."""
    by = bt.sources_of(records)
    traf = {s: extraction_scores(list(bt.baseline_rows(records, "trafilatura", ix).values()))["f1"]
            for s, ix in by.items()}
    print(f"trees alone, threshold {THRESHOLD}, {bt.describe_rule(RULE)}; F1 minus trafilatura's on the held-out set")
    print("held out        without   with      change   (trafilatura's F1)")
    for held in (*OLD, *UNSEEN):
        idx = [i for s in OLD if s != held for i in by[s]]
        row = []
        for xs in (None, augmented):
            forest = bt.fit_forest(records, idx, bt.STAGE1, xs)
            probs = bt.probabilities(forest, records, by[held], xs)
            f1 = extraction_scores(list(bt.page_rows(records, probs, THRESHOLD, RULE).values()))["f1"]
            row.append(f1 - traf[held])
        print(f"{held:14s}  {row[0]:+.4f}   {row[1]:+.4f}   {row[1] - row[0]:+.4f}   ({traf[held]:.4f})", flush=True)
