"""First look at a fallback for the pages the block model is least sure of (issue 57), on the
cached block records and fits of ``afm extraction blocks table`` / ``cv``: each source held
out from the trees and the sequence net fitted on the other three, averaged (the shipped
model's kind), the shipped page rule, F1 minus trafilatura's on that source when the most
uncertain share ``q`` of all held-out pages is handed to trafilatura (its cached text).

The page rule shipped until 2026-12-05 sent only the pages with no kept word. Uncertainty, per page, from the
block probabilities ``p`` and the blocks' word counts ``w``:

* ``band``: the words within 0.15 of the threshold, over the kept words;
* ``band-all``: the same over all the page's words;
* ``p(1-p)``: the word-weighted mean of ``p * (1 - p)``;
* ``disagree``: the word-weighted mean gap between the trees' and the net's probabilities;
* ``oracle``: the pages where trafilatura's page F1 beats the blocks' most (the ceiling).

The share ``q`` is cut over the four sources' pages pooled, so this is not a nested choice:
it says how much such a fallback could give and where, before it is worth a place in
``block_train.choose``'s grid (and in the speed budget: a page handed over costs what
trafilatura costs on it).

    python experiments/extraction-selector/uncertain_fallback.py CACHE [THRESHOLD ...]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from figures_rule import FIGURES_RULE

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_sequence import mixed
from afm.filters.extraction.gold import extraction_scores, page_f1

SHARES = (0.02, 0.03, 0.05, 0.08)
BAND = 0.15


def held_out_probabilities(records: list[bt.PageRecord], fits: bt.Fits
                           ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Per page, the trees' and the sequence net's probabilities, each fitted without the
    page's source."""
    trees: dict[int, np.ndarray] = {}
    nets: dict[int, np.ndarray] = {}
    by = bt.sources_of(records)
    for held, test in by.items():
        others = set(by) - {held}
        trees.update(bt.probabilities(fits.get(others), records, test))
        net = fits.sequence(others)
        nets.update({i: net.probability(records[i].x) for i in test})
    return trees, nets


def uncertainty(kind: str, threshold: float, p: np.ndarray, words: np.ndarray,
                tree: np.ndarray, net: np.ndarray) -> float:
    """The page's uncertainty of ``kind`` (see the module's list); 1 for an empty page."""
    total = float(words.sum())
    if total == 0:
        return 1.0
    near = float(words[np.abs(p - threshold) < BAND].sum())
    if kind == "band":
        return near / max(float(words[p >= threshold].sum()), 1.0)
    if kind == "band-all":
        return near / total
    if kind == "p(1-p)":
        return float((words * p * (1 - p)).sum()) / total
    if kind == "disagree":
        return float((words * np.abs(tree - net)).sum()) / total
    raise ValueError(kind)


def report(records: list[bt.PageRecord], threshold: float, trees: dict[int, np.ndarray],
           nets: dict[int, np.ndarray]) -> None:
    by = bt.sources_of(records)
    probs = {i: mixed(trees[i], nets[i]) for i in trees}
    rows = bt.page_rows(records, probs, threshold, FIGURES_RULE)
    traf_rows = {i: row for ix in by.values() for i, row in bt.baseline_rows(records, "trafilatura", ix).items()}
    traf = {s: extraction_scores([traf_rows[i] for i in ix])["f1"] for s, ix in by.items()}
    pages = sorted(probs)

    def line(name: str, send: Callable[[int], bool]) -> str:
        cells = []
        for s, ix in by.items():
            f1 = extraction_scores([traf_rows[i] if send(i) else rows[i] for i in ix])["f1"]
            cells.append(f"{s} {f1 - traf[s]:+.4f} ({np.mean([send(i) for i in ix]):.2f})")
        return f"{name:22s} " + "  ".join(cells)

    print(f"threshold {threshold}: F1 minus trafilatura's (share of the source's pages sent)")
    print(line("no kept word only", lambda i: False), flush=True)
    kinds = ("band", "band-all", "p(1-p)", "disagree", "oracle")
    for kind in kinds:
        if kind == "oracle":
            score = {i: page_f1(traf_rows[i]) - page_f1(rows[i]) for i in pages}
        else:
            score = {i: uncertainty(kind, threshold, probs[i], records[i].tokens, trees[i], nets[i])
                     for i in pages}
        values = np.array([score[i] for i in pages])
        for q in SHARES:
            cut = float(np.quantile(values, 1 - q))
            print(line(f"{kind} q={q:.2f}", lambda i, cut=cut, score=score: score[i] > cut), flush=True)


def main() -> None:
    cache = Path(sys.argv[1])
    thresholds = [float(t) for t in sys.argv[2:]] or [0.5, 0.6]
    records = bt.load_records(cache)
    trees, nets = held_out_probabilities(records, bt.Fits(records, print, cache))
    for threshold in thresholds:
        report(records, threshold, trees, nets)


if __name__ == "__main__":
    main()
