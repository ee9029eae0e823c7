"""First look (issue 57): does one more training source help the others held out?

    python experiments/extraction-selector/fifth_source_first_look.py CACHE NEW_SOURCE HELD...

For each HELD source: the trees and the sequence net fitted on the other sources without
NEW_SOURCE, then with it (fits kept in CACHE as ``afm extraction blocks cv`` keeps them), and
the held-out F1 margin over trafilatura at the shipped page rule, trees at 0.5 / 0.6 / 0.7 and
trees + net at 0.5 / 0.6. One fit per fold, fixed settings: a first look, not the nested
protocol (``afm extraction blocks cv`` decides)."""

from __future__ import annotations

import sys
from pathlib import Path

from figures_rule import SHIPPED_RULE as RULE

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_sequence import mixed
from afm.filters.extraction.gold import extraction_scores


def f1(rows) -> float:
    return extraction_scores(list(rows))["f1"]


def main(cache: Path, new: str, helds: list[str]) -> None:
    records = bt.load_records(cache)
    by = bt.sources_of(records)
    fits = bt.Fits(records, None, cache)
    for held in helds:
        test = by[held]
        tr = f1(bt.baseline_rows(records, "trafilatura", test).values())
        print(f"== held out {held} ({len(test)} pages): trafilatura {tr:.4f}")
        base = set(by) - {held, new}
        for label, train in ((f"without {new}", base), (f"with {new}", base | {new})):
            trees = bt.probabilities(fits.get(train), records, test)
            net = fits.sequence(train)
            mix = {i: mixed(trees[i], net.probability(records[i].x)) for i in test}
            cells = [f"{name}@{t} {f1(bt.page_rows(records, probs, t, RULE).values()) - tr:+.4f}"
                     for name, probs, ts in (("trees", trees, (0.5, 0.6, 0.7)), ("mix", mix, (0.5, 0.6)))
                     for t in ts]
            print(f"  {label}: " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
