"""Issue 57: how sure each held-out margin over trafilatura is, by a paired bootstrap over pages.

    python experiments/extraction-selector/margin_intervals.py FOUR_CACHE FIVE_CACHE

Each outer fold of the two three-net nested runs (four sources, five sources), scored at the
setting that run chose for it (``main_container.FOLDS``): the held-out set's F1 (the harmonic
mean of page-averaged precision and recall), trafilatura's on the same pages, their difference,
and a 95% interval for it from 2,000 resamples of the set's pages (the same pages for both
extractors in each resample). An interval that holds 0 says the set does not tell the two
apart; the bar is stated on the point figure all the same."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from main_container import FOLDS, fold_probabilities, page_row

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.gold import _precision, _recall, extraction_scores

RESAMPLES = 2000


def _f1_columns(rows: list[tuple[float, float, float]]) -> np.ndarray:
    """Per page: precision and recall (NaN where undefined, as ``extraction_scores`` skips them)."""
    out = np.full((len(rows), 2), np.nan)
    for k, (tp, fp, fn) in enumerate(rows):
        if tp + fp > 0:
            out[k, 0] = _precision(tp, fp, fn)
        if tp + fn > 0:
            out[k, 1] = _recall(tp, fp, fn)
    return out


def _f1(pr: np.ndarray) -> np.ndarray:
    """F1 of the page-averaged precision and recall, per resample (``pr``: resamples x pages x 2)."""
    p, r = np.nanmean(pr[..., 0], axis=-1), np.nanmean(pr[..., 1], axis=-1)
    return np.where(p + r > 0, 2 * p * r / np.maximum(p + r, 1e-12), 0.0)


def main(caches: dict[str, Path]) -> None:
    rng = np.random.default_rng(0)
    for run, cache in caches.items():
        records = bt.load_records(cache)
        fits = bt.Fits(records, None, cache)
        for held, (threshold, page_rule) in FOLDS[run].items():
            probs = fold_probabilities(records, fits, held)
            ours = [page_row(records[i], p, threshold, page_rule, None) for i, p in probs.items()]
            traf = bt.baseline_rows(records, "trafilatura", list(probs))
            theirs = [traf[i] for i in probs]
            a, b = _f1_columns(ours), _f1_columns(theirs)
            point = extraction_scores(ours)["f1"] - extraction_scores(theirs)["f1"]
            pick = rng.integers(0, len(ours), size=(RESAMPLES, len(ours)))
            diff = _f1(a[pick]) - _f1(b[pick])
            lo, hi = np.percentile(diff, [2.5, 97.5])
            print(f"{run:4s} {held:13s} pages {len(ours):4d}  margin {point:+.4f}  95% interval "
                  f"[{lo:+.4f}, {hi:+.4f}]  share of resamples below 0: {(diff < 0).mean():.2f}", flush=True)


if __name__ == "__main__":
    main({"four": Path(sys.argv[1]), "five": Path(sys.argv[2])})
