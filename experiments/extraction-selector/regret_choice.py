"""Issue 57: the block model's settings chosen by minimax regret instead of the worst margin.

    python experiments/extraction-selector/regret_choice.py CACHE MARGINS
    python experiments/extraction-selector/regret_choice.py CACHE cv5.pkl googletrends   # trains, never chooses

``block_train.choose`` takes the setting whose worst inner source has the best margin over
trafilatura. When one inner source is the hardest under every setting (Google-Trends in the
five-source run), that rule follows it alone. Minimax regret measures each inner source
against its own best allowed setting first: a setting's regret is the largest shortfall
from those bests, and the least regret wins (within 0.001: the best worst margin, then the
grid's order). Read from stored inner margins (MARGINS: a ``comment_rule.py nested`` JSON, or
``five_sources_net_only.py``'s ``cv5.pkl``), trees + net settings only, under the same
fallback bound; each outer fold's held-out F1 is then scored with the cache's fits. The
worst-margin rule is scored the same way first, which reproduces the nested run (a check)."""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from comment_rule import parse_setting
from five_sources_net_only import NEW_SOURCE

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_sequence import mixed
from afm.filters.extraction.gold import extraction_scores

TIE = 0.001


def allowed(margins: dict[str, list[float]]) -> dict[str, list[float]]:
    """Trees + net settings within the fallback bound, margins only (the share dropped)."""
    return {k: v[:-1] for k, v in margins.items()
            if k.startswith("mix/") and v[-1] <= bt.MAX_FALLBACK_SHARE}


def worst_margin(margins: dict[str, list[float]]) -> str:
    return bt.select_setting(margins, lambda key: key.split("/")[0])


def least_regret(margins: dict[str, list[float]]) -> str:
    m = np.array(list(margins.values()))
    regret = (m.max(axis=0) - m).max(axis=1)
    near = [k for k, r in zip(margins, regret) if r <= regret.min() + TIE]
    return max(near, key=lambda k: (min(margins[k]), -list(margins).index(k)))


def without_source(source: str) -> Callable[[str, list[str], dict[str, list[float]]], str]:
    """The worst-margin rule over a fold's inner sources but ``source`` (it trains, does
    not choose)."""
    def rule(held: str, inner: list[str], margins: dict[str, list[float]]) -> str:
        drop = inner.index(source)
        return worst_margin({k: [m for j, m in enumerate(v) if j != drop] for k, v in margins.items()})
    return rule


def load_margins(path: Path, folds: list[str]) -> dict[str, dict[str, list[float]]]:
    """Per outer fold, every setting's inner margins and fallback share."""
    if path.suffix == ".pkl":
        metas = pickle.loads(path.read_bytes())["models"]
        return {fold: meta["inner_margins"] for fold, meta in zip(folds, metas)}
    return json.loads(path.read_text())


def main(cache: Path, margins_path: Path, train_only: str | None = None) -> None:
    """Both rules on every outer fold; with ``train_only`` (a source of the cache), only the
    worst-margin rule without that source's inner margins, on the other sources' folds."""
    records = bt.load_records(cache)
    by = bt.sources_of(records)
    stored = load_margins(margins_path, list(by))
    fits = bt.Fits(records, None, cache)
    rules = [("worst margin", lambda held, inner, m: worst_margin(m)),
             ("least regret", lambda held, inner, m: least_regret(m))]
    if train_only is not None:
        rules = [(f"{train_only} trains only", without_source(train_only))]
    for name, rule in rules:
        rows: dict[int, tuple[float, float, float]] = {}
        for held, test in by.items():
            if held == train_only:
                continue
            # a fold's inner sources: the cache's order without the held-out one
            setting = rule(held, [s for s in by if s != held], allowed(stored[held]))
            _, threshold, page_rule = parse_setting(setting)
            others = set(by) - {held}
            forest, net = fits.get(others), fits.sequence(others)
            stage1 = bt.probabilities(forest, records, test)
            probs = {i: mixed(stage1[i], net.probability(records[i].x)) for i in test}
            fold_rows = bt.page_rows(records, probs, threshold, page_rule)
            rows.update(fold_rows)
            f1 = extraction_scores(list(fold_rows.values()))["f1"]
            traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", test).values()))["f1"]
            print(f"{name:13} {held:13} {setting:34} F1 {f1:.4f} trafilatura {traf:.4f} "
                  f"margin {f1 - traf:+.4f}", flush=True)
        old = [i for i in rows if records[i].set.split("-")[0] != NEW_SOURCE]
        pooled = extraction_scores([rows[i] for i in old])["f1"]
        print(f"{name:13} pooled over the old sources' {len(old)} pages: {pooled:.4f}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
