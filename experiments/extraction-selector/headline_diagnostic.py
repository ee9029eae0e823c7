"""Issue 57: is a held-out source's loss the model's or its fold's page-rule choice?

    python experiments/extraction-selector/headline_diagnostic.py CACHE

Each of the four training sources held out, scored by the trees (and the trees averaged with
the three sequence nets) fitted on the other three, from the cache's fits (``afm extraction
blocks cv`` made them), at two thresholds and two page rules: the shipped file's (fill >= 0.3,
the headline dropped, the comments rule) and the same without the headline rule (what the
prose-parent run's ScrapingHub fold chose). A diagnostic after that run, not a choice: its
figures judge nothing on the sources it prints (``README.md``, "Page rules without the lead
rule"); output in ``headline-diagnostic.txt``."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from trees_first_look import OLD as SOURCES
from trees_first_look import RULE

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_sequence import mixed
from afm.filters.extraction.gold import extraction_scores
from afm.filters.extraction.train import source_of

RULES = {"shipped rule": RULE, "fill+comments": replace(RULE, drop_headline=False)}  # the first looks' rule
THRESHOLDS = (0.4, 0.5)


def main(cache: Path) -> None:
    records = [r for r in bt.load_records(cache) if source_of(r.set) in SOURCES]
    fits = bt.Fits(records, print, cache, 3)
    by = bt.sources_of(records)
    for held in SOURCES:
        test, train = by[held], set(SOURCES) - {held}
        trees = bt.probabilities(fits.get(train), records, test)
        nets = fits.sequence(train)
        mix = {i: mixed(trees[i], nets.probability(records[i].x)) for i in test}
        traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", test).values()))["f1"]
        for name, probs in (("trees", trees), ("trees+nets", mix)):
            for rule_name, rule in RULES.items():
                for t in THRESHOLDS:
                    f1 = extraction_scores(list(bt.page_rows(records, probs, t, rule).values()))["f1"]
                    print(f"{held:12s} {name:11s} {rule_name:14s} t={t}: {f1:.4f} margin {f1 - traf:+.4f}",
                          flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
