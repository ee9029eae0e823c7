"""Nested leave-one-source-out: every choice of the cascade made without the held-out source.

``train.cross_validate_by_source`` chooses only the fast path's gate inside the
cross-validation; the vote's panel was fixed beforehand, after seeing the by-source
figures. Here the panel (which extractors vote beside the reference) and the gate are one
grid of configurations, and for each held-out source the configuration is chosen on the
other sources only: the one whose worst training source gains most over that source's
best single candidate, the cheapest (fewest voters, then lowest gate) within
``TOLERANCE`` of it. The held-out source's figures never enter a choice.

How sure a held-out margin is: a paired bootstrap over the held-out source's pages
(the same resampled pages for afm and for that source's best single candidate), giving
P(afm ahead) and a 90% interval of the margin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from afm.errors import UserError
from afm.filters.extraction.gold import counts
from afm.filters.extraction.train import (
    FAST,
    FAST_TRIM,
    REFERENCE,
    TOLERANCE,
    Table,
    row_gold,
    source_of,
)
from afm.filters.extraction.vote import majority, vote_text

# The panels tried (experiments/extraction-selector/README.md), smallest first. Larger
# panels cost 10-14 ms per slow page per extra voter (boilerpy3, jusText, traf_recall).
PANELS: tuple[tuple[str, ...], ...] = (
    ("traf_fast", "readability", "resiliparse"),
    ("traf_fast", "readability", "boilerpipe", "resiliparse"),
    ("traf_recall", "traf_fast", "readability", "resiliparse"),
    ("traf_fast", "readability", "justext", "resiliparse"),
    ("traf_recall", "traf_fast", "readability", "boilerpipe", "resiliparse"),
    ("traf_recall", "traf_fast", "readability", "boilerpipe", "justext", "resiliparse"),
)
GATES = (0.7, 0.8, 0.9, 0.95)
# The fast path's answers tried: traf_fast's text, and that text less its leading and
# trailing lines Resiliparse lacks (train.FAST_TRIM, the shipped one).
FASTS = (FAST[0], FAST_TRIM)


@dataclass(frozen=True)
class Config:
    """One cascade: the fast path's gate, the vote's reference and panel."""

    panel: tuple[str, ...]
    gate: float
    reference: str = REFERENCE
    fast: str = FAST[0]  # the column that answers on the fast path
    votes: int = 0  # voters a line the reference lacks needs (0: a strict majority)

    @property
    def column(self) -> str:
        return vote_column(self.reference, self.panel, self.votes)

    @property
    def cost(self) -> tuple[int, float]:
        """Cheaper first: fewer voters, then more fast path (a lower gate)."""
        return len(self.panel), self.gate

    def __str__(self) -> str:
        ref = "" if self.reference == REFERENCE else f"{self.reference} + "
        fast = "" if self.fast == FAST[0] else f", fast path {self.fast}"
        votes = f" ({self.votes} of {len(self.panel)})" if self.votes else ""
        return f"{ref}{'+'.join(self.panel)}{votes} @ {self.gate}{fast}"


def vote_column(reference: str, panel: Sequence[str], votes: int = 0) -> str:
    """The table's column of a vote (``votes`` = 0: a strict majority, :func:`majority`)."""
    return f"vote:{reference}:{'+'.join(panel)}" + (f":k{votes}" if votes else "")


def grid(panels: Iterable[Sequence[str]] = PANELS, gates: Iterable[float] = GATES,
         references: Iterable[str] = (REFERENCE,), fasts: Iterable[str] = FASTS
         ) -> list[Config]:
    return [Config(tuple(p), g, r, f) for f in fasts for r in references for p in panels
            for g in gates]


def _row_votes(args: tuple[dict[str, Any], list[tuple[str, tuple[str, ...], int]]]
               ) -> dict[str, tuple[float, float, float]]:
    row, specs = args
    return {vote_column(ref, panel, k): counts(row_gold(row), vote_text(
                row["texts"], ref, panel, k or majority(len(panel))))
            for ref, panel, k in specs}


def add_vote_columns(table: Table, rows: Sequence[dict[str, Any]], configs: Sequence[Config],
                     workers: int = 1) -> Table:
    """Each configuration's vote counts on every page (``rows``: the table's, in order),
    unless the table has them already (a few seconds per thousand pages and panel)."""
    specs = sorted({(c.reference, c.panel, c.votes) for c in configs
                    if c.column not in table.counts[0]})
    if not specs:
        return table
    jobs = [(row, specs) for row in rows]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            out = list(pool.map(_row_votes, jobs, chunksize=16))
    else:
        out = list(map(_row_votes, jobs))
    for i, cols in enumerate(out):
        table.counts[i].update(cols)
    return table


class Scorer:
    """Page-level precision/recall arrays of every column, so that a configuration's F1 on
    any (re)sample of pages is a few vector operations."""

    def __init__(self, table: Table, columns: Iterable[str]) -> None:
        self.table = table
        self.agree = np.asarray(table.agree)
        self.arrays: dict[str, tuple[np.ndarray, ...]] = {}
        for c in set(columns) | set(table.names):
            tp, fp, fn = (np.asarray(v) for v in zip(*(row[c] for row in table.counts)))
            pv, rv = tp + fp > 0, tp + fn > 0
            p = np.where(pv, tp / np.where(pv, tp + fp, 1), 0.0)
            r = np.where(rv, tp / np.where(rv, tp + fn, 1), 0.0)
            self.arrays[c] = (p, pv.astype(float), r, rv.astype(float))

    def choice(self, config: Config) -> tuple[np.ndarray, ...]:
        """Per-page (p, p valid, r, r valid) of the cascade ``config``."""
        fast = self.agree >= config.gate
        a, b = self.arrays[config.fast], self.arrays[config.column]
        return tuple(np.where(fast, x, y) for x, y in zip(a, b))

    @staticmethod
    def f1(arrays: tuple[np.ndarray, ...], idx: np.ndarray, weights: np.ndarray | None = None
           ) -> float:
        p, pv, r, rv = (x[idx] for x in arrays)
        w = np.ones(len(idx)) if weights is None else weights
        pm = (w * p * pv).sum() / max((w * pv).sum(), 1e-12)
        rm = (w * r * rv).sum() / max((w * rv).sum(), 1e-12)
        return float(2 * pm * rm / (pm + rm)) if pm + rm else 0.0

    def single(self, idx: np.ndarray) -> tuple[str, float]:
        """The best single candidate on these pages (chosen after the fact) and its F1."""
        return max(((c, self.f1(self.arrays[c], idx)) for c in self.table.names),
                   key=lambda t: t[1])


def choose(scorer: Scorer, configs: Sequence[Config], by_source: dict[str, np.ndarray]
           ) -> tuple[Config, dict[Config, list[float]]]:
    """The configuration whose worst source (of ``by_source``) gains most over that
    source's best single candidate; the cheapest within ``TOLERANCE`` of it."""
    best = {s: scorer.single(idx)[1] for s, idx in by_source.items()}
    margins = {c: [scorer.f1(scorer.choice(c), idx) - best[s] for s, idx in by_source.items()]
               for c in configs}
    top = max(min(m) for m in margins.values())
    near = [c for c in configs if min(margins[c]) >= top - TOLERANCE]
    return min(near, key=lambda c: c.cost), margins


def bootstrap(scorer: Scorer, a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...],
              idx: np.ndarray, n: int = 1000, seed: int = 0) -> dict[str, float]:
    """Paired bootstrap over pages of F1(a) - F1(b): P(a ahead) and a 90% interval."""
    rng = np.random.default_rng(seed)
    diffs = np.empty(n)
    for k in range(n):
        w = np.bincount(rng.integers(0, len(idx), len(idx)), minlength=len(idx)).astype(float)
        diffs[k] = scorer.f1(a, idx, w) - scorer.f1(b, idx, w)
    return {"p_ahead": float((diffs > 0).mean()), "lo": float(np.quantile(diffs, 0.05)),
            "hi": float(np.quantile(diffs, 0.95))}


def nested_cv(table: Table, configs: Sequence[Config],
              chooser: Callable[..., tuple[Config, Any]] = choose,
              n_boot: int = 1000) -> dict[str, Any]:
    """Per held-out source: the configuration chosen on the other sources, its held-out F1,
    the held-out source's best single candidate, the margin and its bootstrap; and the
    same figures per set of the held-out source (for information: chosen for the source)."""
    scorer = Scorer(table, [c.column for c in configs] + [c.fast for c in configs])
    sources = sorted({source_of(s) for s in table.sets})
    if len(sources) < 3:
        raise UserError("nested cross-validation needs pages of three sources at least")
    src = np.array([source_of(s) for s in table.sets])
    sets = np.array(table.sets)
    out: dict[str, Any] = {}
    for held in sources:
        train = {s: np.flatnonzero(src == s) for s in sources if s != held}
        config, margins = chooser(scorer, configs, train)
        afm = scorer.choice(config)
        groups = {held: np.flatnonzero(src == held)}
        names = sorted(set(sets[groups[held]]))
        if len(names) > 1:
            groups.update({n: np.flatnonzero(sets == n) for n in names})
        for name, idx in groups.items():
            single, single_f1 = scorer.single(idx)
            f1 = scorer.f1(afm, idx)
            out[name] = {
                "source": held, "pages": len(idx), "config": str(config), "afm": f1,
                "best_single": single, "best_single_f1": single_f1, "margin": f1 - single_f1,
                "fast_share": float((scorer.agree[idx] >= config.gate).mean()),
                "single": {c: scorer.f1(scorer.arrays[c], idx) for c in table.names},
                **bootstrap(scorer, afm, scorer.arrays[single], idx, n_boot),
                "inner_worst": max(min(m) for m in margins.values()) if margins else None,
            }
    return out


def report_rows(results: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """The nested table: per held-out source (and its sets), afm, the best single
    candidate, the margin, P(afm ahead) and the chosen configuration."""
    header = ["set", "pages", "afm F1", "best single", "best F1", "margin", "P(afm ahead)",
              "90% interval", "fast path", "chosen on the other sources"]
    rows = [[name, r["pages"], f"{r['afm']:.4f}", r["best_single"], f"{r['best_single_f1']:.4f}",
             f"{r['margin']:+.4f}", f"{r['p_ahead']:.2f}", f"{r['lo']:+.4f} .. {r['hi']:+.4f}",
             f"{r['fast_share']:.0%}", r["config"]] for name, r in results.items()]
    return header, rows
