"""Issue 57: drop the kept blocks outside the page's main container, first look (not kept).

    python experiments/extraction-selector/main_container.py FOUR_CACHE FIVE_CACHE

The five-source run's worst ScrapingHub pages keep related-story teasers and "more from"
lists (each block confident enough alone). The rule tried: the main container is the
deepest block element holding at least two kept blocks and at least ``share`` of the kept
weight (``\\w+`` words times probability); kept blocks outside it are dropped, after the
fill rule and before the lead, headline and comment rules. Each baseline run's outer-fold
settings are kept as they were chosen (``FOLDS``) and the rule is added with the two
shares written down before any page was scored (0.55, 0.8): a go/no-go for a nested run,
not a choice. Prints each held-out source's margin over trafilatura and the pool of the
four old sources; the result is in ``main-container-first-look.txt``."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_model import PageRule, fill_gaps, render
from afm.filters.extraction.blocks import BlockTable, container_totals
from afm.filters.extraction.gold import counts, extraction_scores

SHARES = (None, 0.55, 0.8)
_WORDS = re.compile(r"\w+")  # the words the page rules count


def rule(fill: float | None, fallback: int | None, threshold: float) -> tuple[float, PageRule]:
    return threshold, PageRule(fill, None, fallback, True, 50)


# The outer folds' settings as the baseline runs chose them (blocks-cv-three-nets.tsv,
# blocks-cv-five-three-nets.tsv).
FOLDS = {
    "four": {"scrapinghub": rule(0.2, None, 0.6), "trafilatura": rule(0.2, 1, 0.4),
             "utomo": rule(0.3, 20, 0.6), "wcxb": rule(None, 50, 0.5)},
    "five": {"googletrends": rule(0.3, None, 0.5), "scrapinghub": rule(0.3, None, 0.5),
             "trafilatura": rule(0.3, 20, 0.5), "utomo": rule(0.3, 20, 0.6),
             "wcxb": rule(0.3, 20, 0.5)},
}


def fold_probabilities(records: list[bt.PageRecord], fits: bt.Fits, held: str,
                       width: int | None = None) -> dict[int, np.ndarray]:
    """Each block's probability on the pages of source ``held``, from the trees and the
    averaged nets fitted on every other source (the outer fold's model, cached in ``fits``;
    ``width``: read only the first columns of the features, for fits made without columns
    an experiment added)."""
    by = bt.sources_of(records)
    sources = set(by) - {held}
    xs = {i: records[i].x[:, :width] for i in by[held]}
    first = bt.probabilities(fits.get(sources), records, by[held], xs)
    nets = fits.sequence(sources)
    return {i: bt.mixed(first[i], nets.probability(xs[i])) for i in by[held]}


def keep_main_container(table: BlockTable, keep: np.ndarray, p: np.ndarray, share: float
                        ) -> np.ndarray:
    """``keep`` less the kept blocks outside the deepest block element holding at least
    two kept blocks and ``share`` of the kept weight (unchanged when none does)."""
    kept = np.flatnonzero(keep)
    if len(kept) < 2 or len(table.el_first) == 0:
        return keep
    weight = np.zeros(len(keep))
    weight[kept] = [len(_WORDS.findall(table.texts[i])) for i in kept.tolist()]
    weight *= p
    if weight.sum() <= 0:
        return keep
    both = container_totals(table, np.stack([weight, keep.astype(float)], axis=1))
    main = (both[:, 0] >= share * weight.sum()) & (both[:, 1] >= 2)
    if not main.any():
        return keep
    e = int(np.argmax(np.where(main, table.el_depth, -1)))
    inside = np.zeros(len(keep), dtype=bool)
    inside[table.el_first[e]:table.el_last[e]] = True
    return keep & inside


def page_row(record: bt.PageRecord, p: np.ndarray, threshold: float, page_rule: PageRule,
             share: float | None) -> tuple[float, float, float]:
    """The page's counts with the fill rule, then the main container, then the rest."""
    keep = p >= threshold
    if page_rule.fill_below is not None:
        keep = fill_gaps(keep, p, page_rule.fill_below)
    if share is not None:
        keep = keep_main_container(record.table, keep, p, share)
    keep = replace(page_rule, fill_below=None).adjust(record.table, p, keep)
    fallback = page_rule.fallback_words
    if fallback is not None and record.tokens[keep].sum() < fallback:
        return counts(record.page, record.texts.get("trafilatura", ""))
    return counts(record.page, render(record.table, keep))


def main(caches: dict[str, Path]) -> None:
    for run, cache in caches.items():
        records = bt.load_records(cache)
        fits = bt.Fits(records, None, cache)
        by = bt.sources_of(records)
        pooled: dict[float | None, list] = {s: [] for s in SHARES}
        for held, (threshold, page_rule) in FOLDS[run].items():
            probs = fold_probabilities(records, fits, held)
            traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", by[held]).values()))
            margins = []
            for share in SHARES:
                rows = [page_row(records[i], p, threshold, page_rule, share) for i, p in probs.items()]
                if held != "googletrends":
                    pooled[share] += rows
                margins.append(f"{share}: {extraction_scores(rows)['f1'] - traf['f1']:+.4f}")
            print(run, held, " | ".join(margins), flush=True)
        print(run, "pooled old four", {s: round(extraction_scores(v)["f1"], 4) for s, v in pooled.items()})


if __name__ == "__main__":
    main({"four": Path(sys.argv[1]), "five": Path(sys.argv[2])})
