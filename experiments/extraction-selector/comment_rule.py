"""First look (issue 57): reader comments dropped by a hard rule on declared articles.

    python experiments/extraction-selector/comment_rule.py CACHE GOLD

The news sets lose most on reader comments kept under a short post; trafilatura drops
comment containers outright (``include_comments=False``), which would cost WCXB's forum
pages their replies. Here the rule is gated by the page's declared genre
(``genre_features.genre``): on a page declared an article and not a forum or Q&A page,
blocks under a comment-class ancestor are dropped when the kept blocks outside comment
containers hold at least W words. Scored on the cache's fits (the shipped features), held
out by source on the four training sources and Google-Trends held out from all four, one
fit per fold: a first look. GOLD and CACHE as ``genre_features.py`` reads them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from figures_rule import SHIPPED_RULE as RULE
from genre_features import f1, folds, genre

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_features import NAMES
from afm.filters.extraction.block_sequence import mixed
from afm.filters.extraction.gold import load_sets
from afm.shared_data import find_shared_dir

WORDS = (None, 0, 20, 50, 100)  # None: without the rule
THRESHOLDS = (0.5, 0.6)


def declared(records: list[bt.PageRecord], gold: Path) -> dict[int, bool]:
    """Per record: declared an article and not a forum or Q&A page."""
    shared = find_shared_dir()
    paths = {name: gold / name for name in ("wcxb", "trafilatura", "utomo", "googletrends")}
    pages = load_sets(scrapinghub=shared / "eval" if shared else None,
                      **{k: v for k, v in paths.items() if v.is_dir()})
    flags = {(p.set, p.id): genre(p.body) for p in pages}
    return {i: bool(flags[r.set, r.id][0] and not flags[r.set, r.id][1]) for i, r in enumerate(records)}


def without_comments(r: bt.PageRecord, p: np.ndarray, threshold: float, words: int) -> np.ndarray:
    """``p`` with the comment-class blocks at 0 when the kept text outside them holds
    ``words`` words or more."""
    comment = r.x[:, NAMES.index("ctx_comment_class")] > 0
    if not comment.any():
        return p
    outside = r.tokens[(p >= threshold) & ~comment].sum()
    return np.where(comment, 0.0, p) if outside >= words else p


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cache, gold = Path(sys.argv[1]), Path(sys.argv[2])
    records = bt.load_records(cache)
    article = declared(records, gold)
    fits = bt.Fits(records, None, cache)
    for held, (train, test) in folds(records).items():
        tr = f1(bt.baseline_rows(records, "trafilatura", test).values())
        trees = bt.probabilities(fits.get(train), records, test)
        net = fits.sequence(train)
        mix = {i: mixed(trees[i], net.probability(records[i].x)) for i in test}
        hit = sum(article[i] and bool((records[i].x[:, NAMES.index("ctx_comment_class")] > 0).any())
                  for i in test)
        print(f"== {held} ({len(test)} pages, {hit} declared articles with comment-class blocks): "
              f"trafilatura {tr:.4f}", flush=True)
        for t in THRESHOLDS:
            cells = []
            for w in WORDS:
                probs = mix if w is None else {
                    i: without_comments(records[i], mix[i], t, w) if article[i] else mix[i] for i in test}
                cells.append(f"{'none' if w is None else f'W={w}'} "
                             f"{f1(bt.page_rows(records, probs, t, RULE).values()) - tr:+.4f}")
            print(f"  mix@{t}: " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
