"""Issue 57: five-source training with Google-Trends at half weight, first look.

    python experiments/extraction-selector/gt_half_weight.py CACHE fit A+B+C+D ...   # one process per core
    python experiments/extraction-selector/gt_half_weight.py CACHE report FULL
    python experiments/extraction-selector/gt_half_weight.py CACHE nested OUT

The five-source model (Google-Trends as a fifth training source) lifts WCXB from -0.0033 to
+0.0113 over trafilatura, but loses on ScrapingHub: its news pages keep recirculation teasers
that the model fitted without Google-Trends drops. One midpoint is tried, written down before
any figure (``gt-half-weight-first-look.txt`` quotes the rule): Google-Trends' pages weigh half
a source (their block weights sum to 0.5, every other source's to 1), every other setting as
shipped. CACHE is a folder holding the five-source run's block tables and baselines (links
do), where the fits are kept; FULL is the five-source run's folder (its fits at full weight).
``fit``: trees and three nets on each named group of sources (the four-source groups serve
the outer folds, the three-source ones the nested run's inner folds; groups without
Google-Trends are the full-weight run's, linked). ``report``: each held-out source's margin
over trafilatura at the setting the five-source nested run chose for that fold
(``main_container.FOLDS["five"]``), at full and at half weight, and the pool over the four old
sources. ``nested``: ``five_sources_net_only.py``'s nested run with the half-weight fits, into
OUT."""

from __future__ import annotations

import sys
from pathlib import Path

from five_sources_net_only import nested_table
from main_container import FOLDS, fold_probabilities, page_row

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.gold import extraction_scores
from afm.filters.extraction.train import source_of

HALF = "googletrends"
WEIGHT = 0.5
_full_weight_pages = bt.training_pages


def half_weight_pages(records: list[bt.PageRecord], idx: list[int]) -> list[bt.Page]:
    """:func:`block_train.training_pages`, with Google-Trends' block weights halved."""
    pages = _full_weight_pages(records, idx)
    return [(x, y, w * WEIGHT if source_of(records[i].set) == HALF else w)
            for i, (x, y, w) in zip(idx, pages)]


def fit(cache: Path, groups: list[str]) -> None:
    bt.training_pages = half_weight_pages  # fit_forest and Fits.sequence read it from the module
    try:
        records = bt.load_records(cache)
        fits = bt.Fits(records, print, cache)
        for group in groups:
            fits.get(group.split("+"))
            fits.sequence(group.split("+"))
            print("fitted on", group, flush=True)
    finally:
        bt.training_pages = _full_weight_pages


def nested(cache: Path, out: Path) -> None:
    """The nested run, every fit it needs at half weight (fitted here when not in CACHE)."""
    bt.training_pages = half_weight_pages
    try:
        records = bt.load_records(cache)
        out.mkdir(parents=True, exist_ok=True)
        nested_table(records, bt.Fits(records, print, cache), out)
    finally:
        bt.training_pages = _full_weight_pages


def report(cache: Path, full: Path) -> None:
    records = bt.load_records(cache)
    by = bt.sources_of(records)
    runs = {"full weight": bt.Fits(records, None, full), "half weight": bt.Fits(records, None, cache)}
    pooled: dict[str, list] = {run: [] for run in runs}
    for held, (threshold, page_rule) in FOLDS["five"].items():
        traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", by[held]).values()))
        group = "+".join(sorted(set(by) - {held}))
        half = runs["half weight"]
        if not all((cache / f).exists() for f in (f"fit-{group}-{half.key}.json",
                                                  *(f"seq-{group}-{k}.json" for k in half.net_keys))):
            print(f"{held:13s} not fitted at half weight", flush=True)  # never fitted here
            continue
        margins = []
        for run, fits in runs.items():
            probs = fold_probabilities(records, fits, held)
            rows = [page_row(records[i], p, threshold, page_rule, None) for i, p in probs.items()]
            if held != HALF:
                pooled[run] += rows
            s = extraction_scores(rows)
            margins.append(f"{run} {s['f1'] - traf['f1']:+.4f} (P {s['precision']:.4f} R {s['recall']:.4f})")
        print(f"{held:13s} trafilatura {traf['f1']:.4f} |", " | ".join(margins), flush=True)
    old_pages = sum(len(ix) for s, ix in by.items() if s != HALF)
    if all(len(rows) == old_pages for rows in pooled.values()):  # a pool of some folds would not compare
        print("pooled old four", {run: round(extraction_scores(rows)["f1"], 4) for run, rows in pooled.items()})


if __name__ == "__main__":
    mode = {"fit": lambda c, rest: fit(c, rest), "report": lambda c, rest: report(c, Path(rest[0])),
            "nested": lambda c, rest: nested(c, Path(rest[0]))}
    mode[sys.argv[2]](Path(sys.argv[1]), sys.argv[3:])
