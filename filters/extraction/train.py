"""Fit the selector on candidate tables, and cross-validate it by set.

The target is each candidate's F1 on the page (under its set's gold); the model is a
gradient-boosted regression (scikit-learn, squared error, shallow trees) over
:mod:`features`; a page's choice is the candidate with the highest prediction. Sets are
weighted equally (a set of 1,500 pages must not decide alone what a set of 181 gets).

Cross-validation is by *source* (leave one source out: ScrapingHub, WCXB, trafilatura):
the held-out source's pages, all of its page types, are never seen by the models or the
gate that score them. Page-level splits would leak site templates between folds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from afm.filters.extraction.features import feature_names, page_features
from afm.filters.extraction.gold import GoldPage, counts, extraction_scores, page_f1
from afm.filters.extraction.selector import Selector, TreeEnsemble

FAST = ("traf_recall", "resiliparse", "readability")
SLOW = ("traf_fast", "traf_precision", "boilerpipe", "justext")
GBT = {"n_estimators": 200, "max_depth": 3, "learning_rate": 0.05, "subsample": 0.8,
       "min_samples_leaf": 20, "random_state": 0}


def source_of(set_name: str) -> str:
    """``wcxb-forum`` -> ``wcxb``: the unit of cross-validation."""
    return set_name.split("-", 1)[0]


@dataclass
class Table:
    """Per page: the set, per-candidate counts and the two feature blocks."""

    sets: list[str]
    counts: list[dict[str, tuple[float, float, float]]]  # candidate -> (tp, fp, fn)
    fast_x: list[np.ndarray]  # (len(FAST), n_features) per page
    full_x: list[np.ndarray]  # (len(FAST + SLOW), n_features) per page
    cpu: list[dict[str, float]]

    def f1(self, i: int, name: str) -> float:
        return page_f1(self.counts[i][name])


def _gold(row: dict[str, Any]) -> GoldPage:
    return GoldPage(row["set"], row["id"], row.get("url"), b"", row.get("truth"),
                    row.get("with") or [], row.get("without") or [])


def build_table(rows: Sequence[dict[str, Any]], fast: tuple[str, ...] = FAST,
                slow: tuple[str, ...] = SLOW) -> Table:
    from afm.filters.extract import page_words

    table = Table([], [], [], [], [])
    for row in rows:
        texts = row["texts"]
        gold = _gold(row)
        words = row.get("page_words")
        if words is None:
            words = page_words(row.get("html", "")) if row.get("html") else max(
                len(t.split()) for t in texts.values())
        table.sets.append(row["set"])
        table.counts.append({name: counts(gold, texts.get(name, "")) for name in fast + slow})
        table.fast_x.append(page_features(texts, fast, words))
        table.full_x.append(page_features(texts, fast + slow, words))
        table.cpu.append(row.get("cpu") or {})
    return table


def _fit(xs: list[np.ndarray], ys: list[np.ndarray], ws: list[float]) -> TreeEnsemble:
    from sklearn.ensemble import GradientBoostingRegressor

    x = np.concatenate(xs)
    y = np.concatenate(ys)
    w = np.concatenate([np.full(len(a), wt) for a, wt in zip(xs, ws)])
    model = GradientBoostingRegressor(**GBT).fit(x, y, sample_weight=w)
    return TreeEnsemble.from_sklearn(model)


def _set_weights(sets: list[str]) -> list[float]:
    """Each set's pages weigh 1/len(set): sets count equally."""
    size: dict[str, int] = defaultdict(int)
    for s in sets:
        size[s] += 1
    return [1.0 / size[s] for s in sets]


def fit_selector(table: Table, pages: Sequence[int], slow_share: float,
                 fast: tuple[str, ...] = FAST, slow: tuple[str, ...] = SLOW,
                 meta: dict[str, Any] | None = None) -> Selector:
    """Both models and the gate from ``pages`` of ``table``."""
    weights = _set_weights([table.sets[i] for i in pages])
    fast_model = _fit([table.fast_x[i] for i in pages],
                      [np.array([table.f1(i, c) for c in fast]) for i in pages], weights)
    full_model = _fit([table.full_x[i] for i in pages],
                      [np.array([table.f1(i, c) for c in fast + slow]) for i in pages], weights)
    # The gate: the fast model's confidence (its best predicted F1) below which the
    # slow candidates run; the slow_share quantile of the training pages' confidences.
    confidence = np.array([fast_model.predict(table.fast_x[i]).max() for i in pages])
    gate = float(np.quantile(confidence, slow_share)) if slow_share > 0 else -np.inf
    info = {"features": feature_names(fast + slow), "slow_share": slow_share,
            "gbt": GBT, **(meta or {})}
    return Selector(fast, slow, gate, fast_model, full_model, info)


def choose(selector: Selector, fast_x: np.ndarray, full_x: np.ndarray | None
           ) -> tuple[str, bool]:
    """(chosen candidate, whether the slow path ran) for one page; ``full_x`` is only
    computed by the caller when the gate opens (None means: not computed)."""
    pred = selector.fast.predict(fast_x)
    if pred.max() >= selector.gate or full_x is None:
        return selector.fast_candidates[int(pred.argmax())], False
    pred = selector.full.predict(full_x)
    return selector.all_candidates[int(pred.argmax())], True


def evaluate(selector: Selector, table: Table, pages: Sequence[int]) -> dict[str, Any]:
    """Per set: F1 of the selector's choices and of every single candidate, slow share."""
    by_set: dict[str, list[int]] = defaultdict(list)
    for i in pages:
        by_set[table.sets[i]].append(i)
    out = {}
    for name, idx in sorted(by_set.items()):
        chosen = [choose(selector, table.fast_x[i], table.full_x[i]) for i in idx]
        rows = [table.counts[i][c] for i, (c, _slow) in zip(idx, chosen)]
        out[name] = {
            "pages": len(idx),
            "afm": extraction_scores(rows),
            "slow_share": float(np.mean([s for _c, s in chosen])),
            "single": {c: extraction_scores([table.counts[i][c] for i in idx])
                       for c in selector.all_candidates},
            "oracle": extraction_scores([max(table.counts[i].values(), key=page_f1)
                                         for i in idx]),
        }
    return out


def cross_validate_by_source(table: Table, slow_share: float, fast: tuple[str, ...] = FAST,
                             slow: tuple[str, ...] = SLOW) -> dict[str, Any]:
    """Leave one source out: per held-out source, :func:`evaluate` of a selector fitted
    on the other sources, plus its sets pooled under the source's name."""
    sources = sorted({source_of(s) for s in table.sets})
    if len(sources) < 2:
        from afm.errors import UserError

        raise UserError("cross-validation by set needs pages of at least two sources")
    results: dict[str, Any] = {}
    for held in sources:
        train = [i for i, s in enumerate(table.sets) if source_of(s) != held]
        test = [i for i, s in enumerate(table.sets) if source_of(s) == held]
        selector = fit_selector(table, train, slow_share, fast, slow)
        per_set = evaluate(selector, table, test)
        if len(per_set) > 1:
            pooled = evaluate(selector, Table([held] * len(test), [table.counts[i] for i in test],
                                              [table.fast_x[i] for i in test],
                                              [table.full_x[i] for i in test],
                                              [table.cpu[i] for i in test]),
                              range(len(test)))
            per_set.update(pooled)
        results.update(per_set)
    return results


def report_rows(results: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """The cross-validation table: per set, afm, the best single candidate and the margin,
    then every candidate, the per-page oracle and the slow path's share."""
    names = list(next(iter(results.values()))["single"])
    header = ["set", "pages", "afm F1", "best single", "margin", *names, "oracle", "slow share"]
    rows = []
    for set_name, r in results.items():
        best = max(names, key=lambda c: r["single"][c]["f1"])
        rows.append([set_name, r["pages"], round(r["afm"]["f1"], 4), best,
                     f"{r['afm']['f1'] - r['single'][best]['f1']:+.4f}",
                     *(round(r["single"][c]["f1"], 4) for c in names),
                     round(r["oracle"]["f1"], 4), f"{r['slow_share']:.0%}"])
    return header, rows
