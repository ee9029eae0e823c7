"""Issue 57: a block model file scored on sets none of its choices has seen, next to the baselines.

    python experiments/extraction-selector/unseen_sets.py MODEL.json CACHE [CACHE ...] [--set NAME ...]

Per set of the caches' records (``--set``: only these sets): the F1 of the file's block model
(its threshold and page rule, the fallbacks as the extract stage runs them: ``block_train.page_rows``),
of trafilatura (defaults, no comments), the cascade and Resiliparse on the same pages, the block
model's margin over trafilatura with a 95% interval from 2,000 page resamples (the same pages for
both in each), and the share of pages the rule hands to a fallback. Written for Fundus's parser
test pages (``gold.load_fundus``) and Google-Trends-2017, neither read by the file's training or
choices (``README.md``, "Fundus's news pages: a set no choice has seen"). A file with the unsure-page
rule (``unsure_above``) needs the branch ``issue-57-unsure-fallback``, where the rule is defined."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from margin_intervals import RESAMPLES, _f1, _f1_columns

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_model import BlockModel
from afm.filters.extraction.gold import extraction_scores

# The extractors compared, by their texts in the cache's baselines files (Resiliparse's is there
# where ``resili_texts.py`` or the branch's ``table`` added it; missing: an empty text).
COMPARED = ("trafilatura", "cascade", "resiliparse")


def main(model_path: Path, caches: list[Path], sets: set[str]) -> None:
    model = BlockModel.load(model_path)
    rng = np.random.default_rng(0)
    print(f"model {model_path}: threshold {model.threshold}, rule {bt.describe_rule(model.rule)}, "
          f"trained on {', '.join(model.meta.get('sources', []))}")
    print("set            pages  blocks  trafil. cascade resili.  margin  95% interval        fallback")
    for cache in caches:
        records = bt.load_records(cache)
        by_set: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(records):
            if not sets or r.set in sets:
                by_set[r.set].append(i)
        for name, idx in sorted(by_set.items()):
            probs = {i: model.probability(records[i].table) for i in idx}
            rows = bt.page_rows(records, probs, model.threshold, model.rule)
            ours = [rows[i] for i in idx]
            base = {b: list(bt.baseline_rows(records, b, idx).values()) for b in COMPARED}
            f1 = {b: extraction_scores(v)["f1"] for b, v in base.items()}
            mine = extraction_scores(ours)["f1"]
            ours_pr, theirs_pr = _f1_columns(ours), _f1_columns(base["trafilatura"])
            pick = rng.integers(0, len(idx), size=(RESAMPLES, len(idx)))
            lo, hi = np.percentile(_f1(ours_pr[pick]) - _f1(theirs_pr[pick]), [2.5, 97.5])
            share = bt.fallback_share(records, probs, model.threshold, model.rule)
            print(f"{name:14s} {len(idx):5d}  {mine:.4f}  {f1['trafilatura']:.4f}  {f1['cascade']:.4f}  "
                  f"{f1['resiliparse']:.4f}  {mine - f1['trafilatura']:+.4f}  [{lo:+.4f}, {hi:+.4f}]  "
                  f"{share:.3f}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = {args[k + 1] for k, a in enumerate(args) if a == "--set"}
    paths = [Path(a) for k, a in enumerate(args) if a != "--set" and (k == 0 or args[k - 1] != "--set")]
    if len(paths) < 2:
        sys.exit(__doc__)
    main(paths[0], paths[1:], chosen)
