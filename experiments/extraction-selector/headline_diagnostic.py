"""Diagnostic: ScrapingHub held out (fits on the other three, 90 columns): trees alone vs trees+nets,
at the shipped setting and at the setting the fold chose."""
import sys
from pathlib import Path

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_model import PageRule
from afm.filters.extraction.block_sequence import mixed
from afm.filters.extraction.gold import extraction_scores
from afm.filters.extraction.train import source_of

cache = Path(sys.argv[1])
four = ("scrapinghub", "trafilatura", "utomo", "wcxb")
records = [r for r in bt.load_records(cache) if source_of(r.set) in four]
fits = bt.Fits(records, print, cache, 3)
by = bt.sources_of(records)
for held in four:
    test = by[held]
    train = set(four) - {held}
    trees = bt.probabilities(fits.get(train), records, test)
    nets = fits.sequence(train)
    mix = {i: mixed(trees[i], nets.probability(records[i].x)) for i in test}
    traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", test).values()))["f1"]
    shipped = PageRule(fill_below=0.3, drop_headline=True, comment_words=50, fallback_to="resiliparse")
    chosen = PageRule(fill_below=0.3, comment_words=50, fallback_to="resiliparse")
    for name, probs in (("trees", trees), ("trees+nets", mix)):
        for rname, rule in (("shipped rule", shipped), ("fill+comments", chosen)):
            for t in (0.4, 0.5):
                f1 = extraction_scores(list(bt.page_rows(records, probs, t, rule).values()))["f1"]
                print(f"{held:12s} {name:11s} {rname:14s} t={t}: {f1:.4f} margin {f1 - traf:+.4f}", flush=True)
