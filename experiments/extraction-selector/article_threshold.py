"""Issue 57: a threshold of its own for pages that declare themselves articles, first look.

    python experiments/extraction-selector/article_threshold.py FOUR_CACHE FIVE_CACHE

News pages (ScrapingHub) are scored best at a keep threshold of 0.6-0.7, where a page's
related-story teasers (probability 0.5-0.6) fall away, while listing, product and
documentation pages (WCXB, Google-Trends) want 0.4-0.5. The markup says which page is
which (``BlockTable.genre``: ``og:type`` article, a schema.org ``*Article``). Here a page
declared an article keeps its blocks at ``article_threshold``, every other page at the
fold's threshold, with each baseline run's outer-fold settings as chosen (``FOLDS`` of
``main_container.py``): a go/no-go for a nested run, not a choice. Result:
``article-threshold-first-look.txt``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from main_container import FOLDS, fold_probabilities

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_model import PageRule
from afm.filters.extraction.gold import extraction_scores

ARTICLE_THRESHOLDS = (None, 0.6, 0.7)


def page_rows(records: list[bt.PageRecord], probs: dict[int, np.ndarray], threshold: float,
              rule: PageRule, article: float | None) -> list[tuple[float, float, float]]:
    """Each page's counts (``block_train.page_rows``), a declared article's at ``article``."""
    articles = {i: p for i, p in probs.items() if article is not None and records[i].table.genre == "article"}
    rows = bt.page_rows(records, {i: p for i, p in probs.items() if i not in articles}, threshold, rule)
    rows.update(bt.page_rows(records, articles, article or threshold, rule))
    return [rows[i] for i in probs]


def main(caches: dict[str, Path]) -> None:
    for run, cache in caches.items():
        records = bt.load_records(cache)
        fits = bt.Fits(records, None, cache)
        by = bt.sources_of(records)
        pooled: dict[float | None, list] = {a: [] for a in ARTICLE_THRESHOLDS}
        worst: dict[float | None, float] = dict.fromkeys(ARTICLE_THRESHOLDS, 1.0)
        for held, (threshold, rule) in FOLDS[run].items():
            probs = fold_probabilities(records, fits, held)
            traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", by[held]).values()))["f1"]
            articles = sum(records[i].table.genre == "article" for i in by[held])
            margins = []
            for article in ARTICLE_THRESHOLDS:
                rows = page_rows(records, probs, threshold, rule, article)
                if held != "googletrends":
                    pooled[article] += rows
                margin = extraction_scores(rows)["f1"] - traf
                worst[article] = min(worst[article], margin)
                margins.append(f"{article}: {margin:+.4f}")
            print(f"{run} {held} (threshold {threshold}, {articles}/{len(by[held])} declared articles) "
                  + " | ".join(margins), flush=True)
        print(run, "worst margin", {a: round(w, 4) for a, w in worst.items()},
              "pooled old four", {a: round(extraction_scores(v)["f1"], 4) for a, v in pooled.items()})


if __name__ == "__main__":
    main({"four": Path(sys.argv[1]), "five": Path(sys.argv[2])})
