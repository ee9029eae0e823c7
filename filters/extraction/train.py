"""Fit the selector on candidate tables, and cross-validate it by source.

The slow path is the vote (``vote.py``: the reference's lines plus the lines a strict
majority of the extractors hold, ``VOTERS`` beside the reference). It has no fitted
weights, so what is chosen by set is the fast path's ``gate``: by leave-one-source-out on
the training sources, the gate whose worst training source gains most over that source's
best single candidate, the cheapest (lowest) within ``TOLERANCE``. The vote is a column
of the table (its page counts) like a candidate's, never one of the single candidates it
is compared with.

A table without the vote column (a made-up one) keeps the older slow path, a switch
model. Its target is each slow candidate's F1 gain over the reference on a page
(under its set's gold); the model is a gradient-boosted regression (scikit-learn, squared
error, shallow trees) over :func:`~afm.filters.extraction.features.switch_features`,
fitted on the pages the gate sends to the slow path. Sets are weighted equally (a set of
990 pages must not decide alone what a set of 91 gets).

Cross-validation is by *source* (leave one source out: ScrapingHub, WCXB, trafilatura):
the held-out source's pages, all of its page types, are never seen by the model, nor by
the choice of ``gate`` (and ``tau``), which is itself a leave-one-source-out search on the
training sources only (the setting whose worst training source gains most over that
source's best single candidate). Page-level splits would leak site templates and gold
conventions between folds, which is exactly what made earlier in-sample gains vanish.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from afm.errors import UserError
from afm.filters.extraction.features import agreement, switch_feature_names, switch_features
from afm.filters.extraction.gold import GoldPage, counts, extraction_scores, page_f1
from afm.filters.extraction.selector import Selector, TreeEnsemble
from afm.filters.extraction.vote import majority, trim_edges, vote_text

FAST = ("traf_fast", "resiliparse")
REFERENCE = "traf_fallback"
OTHERS = ("traf_fast", "traf_recall", "readability", "resiliparse", "justext")
# The vote's members beside the reference: the two fast candidates (already run when a
# page reaches the slow path) and trafilatura's readability port (~5 ms/page), three
# families. Larger panels (boilerpy3, jusText, traf_recall) cost 10-14 ms/page each on
# the slow path, which cost the cascade plain trafilatura's speed, and did not gain
# more held out (experiments/extraction-selector/README.md).
VOTERS = ("traf_fast", "readability", "resiliparse")
MIN_VOTES = majority(len(VOTERS))
VOTE = "vote"  # the vote's column in Table.counts
# The fast path's answer: traf_fast less its leading and trailing lines Resiliparse lacks
# (chosen by the nested cross-validation over this and the untrimmed traf_fast on every
# held-out source; experiments/extraction-selector/README.md). Its column in Table.counts:
FAST_TRIM = "fast_trim"
GATES = (0.7, 0.8, 0.9, 0.95)
TAUS = (0.0, 0.02, 0.05, 0.1, 1.0)
# F1 differences below this are noise on sets of 100-1,000 pages (one page in 1,000 moves
# F1 by about 0.001): among settings that close to the best, the cheaper one is chosen.
TOLERANCE = 0.001
GBT = {"n_estimators": 100, "max_depth": 3, "learning_rate": 0.05, "subsample": 0.8,
       "min_samples_leaf": 20, "random_state": 0}


def source_of(set_name: str) -> str:
    """``wcxb-forum`` -> ``wcxb``: the unit of cross-validation."""
    return set_name.split("-", 1)[0]


@dataclass
class Table:
    """Per page: its set, every candidate's counts, the fast agreement, switch features."""

    sets: list[str] = field(default_factory=list)
    counts: list[dict[str, tuple[float, float, float]]] = field(default_factory=list)
    agree: list[float] = field(default_factory=list)
    x: list[np.ndarray] = field(default_factory=list)  # (len(OTHERS), n_features) per page
    cpu: list[dict[str, float]] = field(default_factory=list)
    names: tuple[str, ...] = ()  # every candidate present on every page (reported)
    vote: tuple[Any, ...] = ()  # (reference, voters, min_votes) of the VOTE column, if any

    def f1(self, i: int, name: str) -> float:
        return page_f1(self.counts[i][name])

    def subset(self, idx: Sequence[int], set_name: str | None = None) -> Table:
        return Table([set_name or self.sets[i] for i in idx], [self.counts[i] for i in idx],
                     [self.agree[i] for i in idx], [self.x[i] for i in idx],
                     [self.cpu[i] for i in idx], self.names, self.vote)

    @property
    def votes(self) -> bool:
        return bool(self.vote)


def row_gold(row: dict[str, Any]) -> GoldPage:
    """The gold side of a cached candidate row (no HTML: the texts are already extracted)."""
    return GoldPage(row["set"], row["id"], row.get("url"), b"", row.get("truth"),
                    row.get("with") or [], row.get("without") or [])


def build_table(rows: Sequence[dict[str, Any]]) -> Table:
    """Counts and features of every cached page (minutes for a few thousand pages)."""
    if not rows:
        raise UserError("no candidate rows to build a table from")
    names = tuple(n for n in rows[0]["texts"] if all(n in r["texts"] for r in rows))
    missing = {FAST[0], FAST[1], REFERENCE, *OTHERS} - set(names)
    if missing:
        raise UserError(f"candidate tables lack {sorted(missing)}; rerun `afm extraction table`")
    table = Table(names=names)
    for row in rows:
        texts, gold = row["texts"], row_gold(row)
        table.sets.append(row["set"])
        table.counts.append({name: counts(gold, texts[name]) for name in names})
        table.agree.append(agreement(texts[FAST[0]], texts[FAST[1]]))
        table.x.append(switch_features(texts, REFERENCE, OTHERS, int(row.get("page_words") or 0)))
        table.cpu.append(row.get("cpu") or {})
    return add_votes(table, rows)


VOTE_SPEC = (REFERENCE, VOTERS, MIN_VOTES, FAST_TRIM)


def add_votes(table: Table, rows: Sequence[dict[str, Any]]) -> Table:
    """The vote's counts and the trimmed fast path's on every page (``rows``: the
    table's, in order), unless the table already has them for this very vote (seconds
    per thousand pages)."""
    if table.vote == VOTE_SPEC:
        return table
    if not set(VOTERS) <= set(table.names):
        raise UserError(f"candidate tables lack some of {list(VOTERS)}; rerun `afm extraction table`")
    for i, row in enumerate(rows):
        texts, gold = row["texts"], row_gold(row)
        table.counts[i][VOTE] = counts(gold, vote_text(texts, REFERENCE, VOTERS, MIN_VOTES))
        table.counts[i][FAST_TRIM] = counts(gold, trim_edges(texts[FAST[0]], texts[FAST[1]]))
    table.vote = VOTE_SPEC
    return table


def _set_weights(sets: list[str]) -> list[float]:
    """Each set's pages weigh 1/len(set): sets count equally."""
    size: dict[str, int] = defaultdict(int)
    for s in sets:
        size[s] += 1
    return [1.0 / size[s] for s in sets]


def fit_model(table: Table, pages: Sequence[int], gate: float) -> TreeEnsemble | None:
    """The switch model on the training pages the gate sends to the slow path."""
    from sklearn.ensemble import GradientBoostingRegressor

    slow = [i for i in pages if table.agree[i] < gate]
    if len(slow) < 2 * GBT["min_samples_leaf"]:
        return None
    weights = _set_weights([table.sets[i] for i in slow])
    x = np.concatenate([table.x[i] for i in slow])
    y = np.concatenate([[table.f1(i, c) - table.f1(i, REFERENCE) for c in OTHERS] for i in slow])
    w = np.concatenate([np.full(len(OTHERS), wt) for wt in weights])
    return TreeEnsemble.from_sklearn(GradientBoostingRegressor(**GBT).fit(x, y, sample_weight=w))


def choose(selector: Selector, table: Table, i: int) -> tuple[str, bool]:
    """(chosen candidate, fast path) for page ``i``: :func:`select.select_text`'s rule on
    the cached texts."""
    if table.agree[i] >= selector.gate:
        return (FAST_TRIM if selector.fast_trim and FAST_TRIM in table.counts[i]
                else selector.fast_candidates[0]), True
    if selector.votes:
        return VOTE, False
    if selector.switches:
        gain = selector.model.predict(table.x[i])  # type: ignore[union-attr]
        if gain.max() > selector.tau:
            return selector.others[int(gain.argmax())], False
    return selector.reference, False


def _score(selector: Selector, table: Table, pages: Sequence[int]) -> float:
    return extraction_scores([table.counts[i][choose(selector, table, i)[0]] for i in pages])["f1"]


def _best_single(table: Table, pages: Sequence[int]) -> float:
    return max(extraction_scores([table.counts[i][c] for i in pages])["f1"] for c in table.names)


def _selector(model: TreeEnsemble | None, gate: float, tau: float, meta: dict[str, Any],
              votes: bool = False) -> Selector:
    if votes:
        return Selector(FAST, REFERENCE, OTHERS, gate, 1.0, None, meta, VOTERS, MIN_VOTES,
                        fast_trim=True)
    return Selector(FAST, REFERENCE, OTHERS, gate, tau, model, meta)


def search(table: Table, pages: Sequence[int]) -> tuple[float, float, dict[str, Any]]:
    """(gate, tau) by leave-one-source-out on ``pages``: among the settings whose worst
    held-out source's margin over that source's best single candidate is within
    ``TOLERANCE`` of the best such margin, the cheapest: the larger ``tau`` (fewer
    switches: the slow candidates other than the reference never run at ``tau`` = 1),
    then the lower gate (more fast path)."""
    sources = sorted({source_of(table.sets[i]) for i in pages})
    if len(sources) < 2:
        raise UserError("choosing gate and tau by set needs pages of at least two sources")
    margins: dict[tuple[float, float], list[float]] = defaultdict(list)
    for held in sources:
        fit_on = [i for i in pages if source_of(table.sets[i]) != held]
        test = [i for i in pages if source_of(table.sets[i]) == held]
        best = _best_single(table, test)
        for gate in GATES:
            if table.votes:  # nothing to fit: the vote's column is the slow path
                sel = _selector(None, gate, 1.0, {}, votes=True)
                margins[gate, 1.0].append(_score(sel, table, test) - best)
                continue
            model = fit_model(table, fit_on, gate)
            for tau in TAUS:
                margins[gate, tau].append(_score(_selector(model, gate, tau, {}), table, test) - best)
    best = max(min(m) for m in margins.values())
    near = [k for k, m in margins.items() if min(m) >= best - TOLERANCE]
    gate, tau = max(near, key=lambda k: (k[1], -k[0]))
    return gate, tau, {f"{g}/{t}": [round(m, 5) for m in ms] for (g, t), ms in margins.items()}


def fit_selector(table: Table, pages: Sequence[int], meta: dict[str, Any] | None = None
                 ) -> Selector:
    """The gate by :func:`search`; then, for a table with the vote's column, the vote as
    the slow path (nothing to fit), else the switch model fitted on every page of ``pages``."""
    gate, tau, margins = search(table, pages)
    if table.votes:
        info = {"vote": {"reference": REFERENCE, "voters": VOTERS, "min_votes": MIN_VOTES},
                "fast_path": "traf_fast less the edge lines resiliparse lacks",
                "search_margins": margins, **(meta or {})}
        return _selector(None, gate, tau, info, votes=True)
    info = {"features": switch_feature_names((REFERENCE, *OTHERS)), "gbt": GBT,
            "search_margins": margins, **(meta or {})}
    return _selector(fit_model(table, pages, gate), gate, tau, info)


def evaluate(selector: Selector, table: Table, pages: Sequence[int]) -> dict[str, Any]:
    """Per set: F1 of the selector's choices and of every single candidate, the fast
    path's share and the share answered other than by the reference (the vote's, or
    switched)."""
    by_set: dict[str, list[int]] = defaultdict(list)
    for i in pages:
        by_set[table.sets[i]].append(i)
    out = {}
    for name, idx in sorted(by_set.items()):
        chosen = [choose(selector, table, i) for i in idx]
        out[name] = {
            "pages": len(idx),
            "afm": extraction_scores([table.counts[i][c] for i, (c, _f) in zip(idx, chosen)]),
            "fast_share": float(np.mean([f for _c, f in chosen])),
            "switch_share": float(np.mean([not f and c != selector.reference for c, f in chosen])),
            "single": {c: extraction_scores([table.counts[i][c] for i in idx]) for c in table.names},
            "oracle": extraction_scores([max((table.counts[i][c] for c in table.names),
                                             key=page_f1) for i in idx]),
            "gate": selector.gate, "tau": selector.tau,
        }
    return out


def cross_validate_by_source(table: Table) -> dict[str, Any]:
    """Leave one source out: per held-out source, :func:`evaluate` of a selector fitted
    (gate, tau and model) on the other sources, plus its sets pooled under its name."""
    sources = sorted({source_of(s) for s in table.sets})
    if len(sources) < 3:
        raise UserError("cross-validation by set needs pages of three sources (two to choose "
                        "gate and tau on, one held out)")
    results: dict[str, Any] = {}
    for held in sources:
        fit_on = [i for i, s in enumerate(table.sets) if source_of(s) != held]
        test = [i for i, s in enumerate(table.sets) if source_of(s) == held]
        selector = fit_selector(table, fit_on)
        per_set = evaluate(selector, table, test)
        if len(per_set) > 1:
            per_set.update(evaluate(selector, table.subset(test, held), range(len(test))))
        results.update(per_set)
    return results


def report_rows(results: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """The cross-validation table: per set, afm, the best single candidate and the margin,
    then every candidate, the per-page oracle, the fast path's and the switches' shares."""
    names = list(next(iter(results.values()))["single"])
    header = ["set", "pages", "afm F1", "best single", "margin", *names, "oracle",
              "fast path", "voted/switched", "gate/tau"]
    rows = []
    for set_name, r in results.items():
        best = max(names, key=lambda c: r["single"][c]["f1"])
        rows.append([set_name, r["pages"], f"{r['afm']['f1']:.4f}", best,
                     f"{r['afm']['f1'] - r['single'][best]['f1']:+.4f}",
                     *(f"{r['single'][c]['f1']:.4f}" for c in names),
                     f"{r['oracle']['f1']:.4f}", f"{r['fast_share']:.0%}",
                     f"{r['switch_share']:.0%}", f"{r['gate']}/{r['tau']}"])
    return header, rows
