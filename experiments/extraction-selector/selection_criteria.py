"""Is the block extractor's held-out gap the model or the choice of its settings? (issue 57)

``collect CACHE OUT.pkl``: for each outer fold of the nested leave-one-source-out, every
setting's inner margins (``block_train.choose``, variants ``one`` and ``mix``, the page-rule
grid) and every setting's held-out rows with the fold's own fits (the cache's fits are
reused; made anew, ten trees and ten nets: over two hours on the 2-core box, the held-out
WCXB fold, 480 settings scored on its 1,497 pages, the longest).

``report OUT.pkl``: the held-out F1 each selection criterion leads to (the shipped one: the
best worst inner margin; the mean inner margin; both restricted to trees + net), and the
ceiling: the settings whose *held-out* worst margin is best, i.e. what no choice made on
the inner sources can beat with these fits.
"""

from __future__ import annotations

import pickle
import sys
import time
from pathlib import Path

import numpy as np

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_sequence import mixed
from afm.filters.extraction.gold import extraction_scores

VARIANTS = ("one", "mix")
# The page-rule grid its recorded table was measured with (before the comment axis).
RULES = [r for r in bt.page_rules(("trafilatura",)) if r.comment_words is None]  # the rules of its day


def collect(cache: Path, out: str) -> None:
    records = bt.load_records(cache)
    fits = bt.Fits(records, print, cache)
    by_all = bt.sources_of(records)
    result = {}
    for held, test in by_all.items():
        start = time.time()
        idx = [i for s, ix in by_all.items() if s != held for i in ix]
        variant, t, rule, _, margins = bt.choose(records, idx, fits, bt.Choice(tuple(VARIANTS), rules=tuple(RULES)))
        train = set(by_all) - {held}
        trees = bt.probabilities(fits.get(train), records, test)
        net = fits.sequence(train)
        options = {"one": trees,
                   "mix": {i: mixed(trees[i], net.probability(records[i].x)) for i in test}}
        held_rows = {}
        for v, probs in options.items():
            memo: dict = {}
            for th in bt.THRESHOLDS:
                for r in RULES:
                    rows = bt.page_rows(records, probs, th, r, memo)
                    held_rows[bt.setting_name(v, th, r)] = ([rows[i] for i in test],
                                                bt.fallback_share(records, probs, th, r))
        result[held] = {"inner": margins, "held": held_rows, "chosen": bt.setting_name(variant, t, rule),
                        "base": {b: list(bt.baseline_rows(records, b, test).values())
                                 for b in bt.BASELINES}}
        print(held, "chosen", bt.setting_name(variant, t, rule), f"{time.time() - start:.0f} s", flush=True)
        with open(out, "wb") as f:  # after every fold: a stopped run keeps what it finished
            pickle.dump(result, f)


def worst(inner: dict) -> str:
    """The shipped criterion: the best worst inner margin (one stage first within 0.001)."""
    return bt.select_setting(inner, lambda k: k.split("/")[0])


def mean(inner: dict) -> str:
    return max(inner, key=lambda k: float(np.mean(inner[k])))


def net_only(criterion):
    return lambda inner: criterion({k: m for k, m in inner.items() if k.startswith("mix/")})


CRITERIA = {"worst inner margin (shipped)": worst, "mean inner margin": mean,
            "worst, trees + net only": net_only(worst), "mean, trees + net only": net_only(mean)}


def report(path: str) -> None:
    with open(path, "rb") as f:
        res = pickle.load(f)
    traf = {h: extraction_scores(r["base"]["trafilatura"])["f1"] for h, r in res.items()}
    all_traf = extraction_scores([row for r in res.values() for row in r["base"]["trafilatura"]])["f1"]
    for name, criterion in CRITERIA.items():
        pooled, cells = [], []
        for held, r in res.items():
            inner = {k: m[:-1] for k, m in r["inner"].items() if m[-1] <= bt.MAX_FALLBACK_SHARE}
            chosen = criterion(inner)
            rows, share = r["held"][chosen]
            f1 = extraction_scores(rows)["f1"]
            pooled += rows
            cells.append(f"{held} {f1:.4f} ({f1 - traf[held]:+.4f}; {chosen}, {share:.1%} sent)")
        f1 = extraction_scores(pooled)["f1"]
        print(f"{name}: pooled {f1:.4f} ({f1 - all_traf:+.4f})\n    " + "\n    ".join(cells))
    table = []
    for k in next(iter(res.values()))["held"]:
        m = [extraction_scores(r["held"][k][0])["f1"] - traf[h] for h, r in res.items()]
        share = float(np.mean([r["held"][k][1] for r in res.values()]))
        table.append((min(m), k, m, share))
    table.sort(reverse=True)
    print("ceiling - best held-out worst margins, at most 3% of pages sent:", list(res))
    for w, k, m, share in [t for t in table if t[3] <= bt.MAX_FALLBACK_SHARE][:8]:
        print(f"  {k:26s} worst {w:+.4f}: " + " ".join(f"{x:+.4f}" for x in m) + f" ({share:.1%} sent)")
    for i, held in enumerate(res):
        best = max(table, key=lambda t: t[2][i])
        print(f"  best setting for {held} alone: {best[1]} {best[2][i]:+.4f} ({best[3]:.1%} sent)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["collect"] and len(sys.argv) == 4:
        collect(Path(sys.argv[2]), sys.argv[3])
    elif sys.argv[1:2] == ["report"] and len(sys.argv) == 3:
        report(sys.argv[2])
    else:
        sys.exit(__doc__)
