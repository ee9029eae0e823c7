"""Issue 57: reader comments dropped by a hard rule on declared articles.

    python experiments/extraction-selector/comment_rule.py CACHE GOLD            # first look
    python experiments/extraction-selector/comment_rule.py CACHE GOLD nested [MARGINS.json]

The news sets lose most on reader comments kept under a short post; trafilatura drops
comment containers outright (``include_comments=False``), which would cost WCXB's forum
pages their replies. Here the rule is gated by the page's declared genre
(``genre_features.genre``): on a page declared an article and not a forum or Q&A page,
blocks under a comment-class ancestor are dropped when the kept blocks outside comment
containers hold at least W words. Scored on the cache's fits (the shipped features), held
out by source on the four training sources and Google-Trends held out from all four, one
fit per fold: a first look. GOLD and CACHE as ``genre_features.py`` reads them.

``nested``: the rule as the package has it (``PageRule.comment_words``, the page's genre on
its block table; run on records with the new comment words and with the old ones), one more
axis of ``block_train.choose``'s grid, under the nested leave-one-source-out of ``afm
extraction blocks cv --one-stage --sequence`` on the four training sources; each outer
fold's choice is read three times from the same inner margins: over the whole grid, over
the rules without the comment axis, and over trees + net alone (the restriction written
down at the 2026-12-06 02:02 stop's end, now ``--net-only``); Google-Trends is scored by
the settings chosen on all four. MARGINS.json: every fold's inner margins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from figures_rule import SHIPPED_RULE as RULE
from genre_features import f1, folds, genre_flags

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_features import NAMES
from afm.filters.extraction.block_model import PageRule
from afm.filters.extraction.block_sequence import mixed

WORDS = (None, 0, 20, 50, 100)  # None: without the rule
THRESHOLDS = (0.5, 0.6)
TRAFILATURA_RULES = tuple(bt.page_rules(("trafilatura",)))  # the page rules of its day


def declared(records: list[bt.PageRecord], gold: Path) -> dict[int, bool]:
    """Per record: declared an article and not a forum or Q&A page."""
    flags = genre_flags(gold)
    return {i: bool(flags[r.set, r.id][0] and not flags[r.set, r.id][1]) for i, r in enumerate(records)}


def without_comments(r: bt.PageRecord, p: np.ndarray, threshold: float, words: int) -> np.ndarray:
    """``p`` with the comment-class blocks at 0 when the kept text outside them holds
    ``words`` words or more."""
    comment = r.x[:, NAMES.index("ctx_comment_class")] > 0
    if not comment.any():
        return p
    outside = r.tokens[(p >= threshold) & ~comment].sum()
    return np.where(comment, 0.0, p) if outside >= words else p


def parse_setting(name: str) -> tuple[str, float, PageRule]:
    """``block_train.setting_name`` read back."""
    variant, t, fill, lead, fallback, head, comments = name.split("/")

    def num(x: str, kind: type) -> float | int | None:
        return None if x == "None" else kind(x)

    return variant, float(t), PageRule(num(fill, float), num(lead, int), num(fallback, int),
                                       head == "1", num(comments, int))


def nested(records: list[bt.PageRecord], fits: bt.Fits, out: Path | None = None) -> None:
    by = bt.sources_of(records)
    pooled: dict[str, list] = {"whole grid": [], "no comment rule": [], "trees + net": []}
    kept: dict[str, dict] = {}
    for held, (train, test) in folds(records).items():
        fit_on = [i for s in sorted(train) for i in by[s]]
        *_, margins = bt.choose(records, fit_on, fits, bt.Choice(("one", "mix"), rules=TRAFILATURA_RULES))
        allowed = {k: m[:-1] for k, m in margins.items() if m[-1] <= bt.MAX_FALLBACK_SHARE}
        trees = bt.probabilities(fits.get(train), records, test)
        net = fits.sequence(train)
        mix = {i: mixed(trees[i], net.probability(records[i].x)) for i in test}
        tr = f1(bt.baseline_rows(records, "trafilatura", test).values())
        kept[held] = margins
        for label, keys in (("whole grid", allowed),
                            ("no comment rule", {k: m for k, m in allowed.items() if k.endswith("/None")}),
                            ("trees + net", {k: m for k, m in allowed.items() if k.startswith("mix/")})):
            name = bt.select_setting(keys, lambda k: k.split("/")[0])
            variant, t, rule = parse_setting(name)
            rows = bt.page_rows(records, mix if variant == "mix" else trees, t, rule)
            if held != "googletrends":
                pooled[label] += list(rows.values())
            print(f"{held:12s} {label:15s} {f1(rows.values()):.4f} ({f1(rows.values()) - tr:+.4f}) "
                  f"{name} inner worst {min(keys[name]):+.4f}", flush=True)
    for label, rows in pooled.items():
        print(f"pooled over the four, {label}: {f1(rows):.4f}")
    if out is not None:
        out.write_text(json.dumps(kept))


def main() -> None:
    if len(sys.argv) not in (3, 4, 5):
        sys.exit(__doc__)
    cache, gold = Path(sys.argv[1]), Path(sys.argv[2])
    records = bt.load_records(cache)
    if sys.argv[3:4] == ["nested"]:
        nested(records, bt.Fits(records, lambda m: print(m, flush=True), cache),
               Path(sys.argv[4]) if len(sys.argv) > 4 else None)
        return
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
