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
from main_container import FOLDS

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_model import PageRule, render
from afm.filters.extraction.gold import counts, extraction_scores

ARTICLE_THRESHOLDS = (None, 0.6, 0.7)


def page_row(record: bt.PageRecord, p: np.ndarray, threshold: float, rule: PageRule,
             article: float | None) -> tuple[float, float, float]:
    if article is not None and record.table.genre == "article":
        threshold = article
    keep = rule.adjust(record.table, p, p >= threshold)
    if rule.fallback_words is not None and record.tokens[keep].sum() < rule.fallback_words:
        return counts(record.page, record.texts.get("trafilatura", ""))
    return counts(record.page, render(record.table, keep))


def main(caches: dict[str, Path]) -> None:
    for run, cache in caches.items():
        records = bt.load_records(cache)
        fits = bt.Fits(records, None, cache)
        by = bt.sources_of(records)
        pooled: dict[float | None, list] = {a: [] for a in ARTICLE_THRESHOLDS}
        worst: dict[float | None, float] = dict.fromkeys(ARTICLE_THRESHOLDS, 1.0)
        for held, (threshold, rule) in FOLDS[run].items():
            sources = set(by) - {held}
            forest, nets = fits.get(sources), fits.sequence(sources)
            first = bt.probabilities(forest, records, by[held])
            probs = {i: bt.mixed(first[i], nets.probability(records[i].x)) for i in by[held]}
            traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", by[held]).values()))["f1"]
            articles = sum(records[i].table.genre == "article" for i in by[held])
            margins = []
            for article in ARTICLE_THRESHOLDS:
                rows = [page_row(records[i], p, threshold, rule, article) for i, p in probs.items()]
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
