"""Issue 57: the four-source held-out margins with a second set of seeds' nets (3-5), and
with all six averaged, at the outer folds' settings the first set chose.

    python experiments/extraction-selector/seeds_second_set.py CACHE [five]

CACHE holds the four sources' records and the sequence nets of seeds 0-5 fitted on each
three-source set (``block_train.Fits(..., nets=6)`` fits the missing ones). With ``five``:
CACHE holds the five sources' (Google-Trends too), each fold is scored at the setting the
five-source three-net nested run chose (``blocks-cv-five-three-nets.tsv``), and the pool is
over the four old sources. Each held-out
source is scored with the trees plus the mean of seeds 0-2's nets (``blocks-cv-three-nets.tsv``'s
figures), of seeds 3-5's, and of all six, at the setting the nested run chose for that fold
with seeds 0-2 (which favours seeds 0-2 slightly). Result: ``seeds-second-set.txt``."""

from __future__ import annotations

import sys
from pathlib import Path

from main_container import FOLDS  # each outer fold's chosen threshold and page rule

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_sequence import SequenceNets
from afm.filters.extraction.gold import extraction_scores

SEEDS = {"seeds 0-2": range(0, 3), "seeds 3-5": range(3, 6), "seeds 0-5": range(0, 6)}


def main(cache: Path, five: bool = False) -> None:
    records = bt.load_records(cache)
    folds = FOLDS["five" if five else "four"]
    fits = bt.Fits(records, print, cache, nets=6)
    by = bt.sources_of(records)
    pooled: dict[str, list] = {name: [] for name in SEEDS}
    for held, (threshold, rule) in folds.items():
        sources = frozenset(set(by) - {held})
        fits.sequence(sources)  # every seed's net on these sources, fitted if missing
        first = bt.probabilities(fits.get(sources), records, by[held])
        traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", by[held]).values()))["f1"]
        line = []
        for name, seeds in SEEDS.items():
            nets = SequenceNets([fits.nets[k][sources] for k in seeds])
            probs = {i: bt.mixed(first[i], nets.probability(records[i].x)) for i in by[held]}
            rows = bt.page_rows(records, probs, threshold, rule)
            if held != "googletrends":  # the pool is over the four old sources
                pooled[name] += rows.values()
            line.append(f"{name} {extraction_scores(list(rows.values()))['f1'] - traf:+.4f}")
        print(f"{held} (trafilatura {traf:.4f}): " + ", ".join(line), flush=True)
    print("pooled:", ", ".join(f"{name} {extraction_scores(rows)['f1']:.4f}" for name, rows in pooled.items()))


if __name__ == "__main__":
    main(Path(sys.argv[1]), five=sys.argv[2:] == ["five"])
