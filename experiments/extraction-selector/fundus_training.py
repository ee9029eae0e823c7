"""Issue 57: does a fifth source of news pages (Fundus's parser test pages) help the block model on the others?

    python experiments/extraction-selector/fundus_training.py FOUR_CACHE FUNDUS_CACHE

A controlled comparison with the trees alone at one setting fixed in advance (the shipped file's
threshold 0.5 and page rule: fill >= 0.3, headline dropped, reader comments of 50 words): for each old source held out, the trees
fitted on the other three, then on the other three and Fundus (every source weighing the same in total,
as ``block_train.training_pages`` weighs them); Google-Trends (in FOUR_CACHE, never trained on) scored
by the trees of the four, then of the four and Fundus. The nets are left out (a fit costs 3-8 CPU
minutes; 33 more fits for a nested run with three seeds): a change the trees do not show is not worth those."""

from __future__ import annotations

import sys
from pathlib import Path

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_model import PageRule
from afm.filters.extraction.gold import extraction_scores

THRESHOLD = 0.5
RULE = PageRule(fill_below=0.3, drop_headline=True, comment_words=50)
OLD = ("scrapinghub", "trafilatura", "utomo", "wcxb")


def f1_on(records: list[bt.PageRecord], forest: bt.Forest, idx: list[int]) -> float:
    probs = bt.probabilities(forest, records, idx)
    return extraction_scores(list(bt.page_rows(records, probs, THRESHOLD, RULE).values()))["f1"]


def main(four: Path, fundus: Path) -> None:
    records = bt.load_records(four) + bt.load_records(fundus)
    by = bt.sources_of(records)
    traf = {s: extraction_scores(list(bt.baseline_rows(records, "trafilatura", ix).values()))["f1"]
            for s, ix in by.items()}
    print(f"trees alone, threshold {THRESHOLD}, {RULE}; F1 minus trafilatura's on the held-out source")
    print("held out        without Fundus  with Fundus  change")
    for held in (*OLD, "googletrends"):
        base = [s for s in OLD if s != held]
        row = []
        for sources in (base, [*base, "fundus"]):
            idx = [i for s in sources for i in by[s]]
            forest = bt.fit_forest(records, idx, bt.STAGE1)
            row.append(f1_on(records, forest, by[held]) - traf[held])
        print(f"{held:14s}  {row[0]:+.4f}         {row[1]:+.4f}      {row[1] - row[0]:+.4f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
