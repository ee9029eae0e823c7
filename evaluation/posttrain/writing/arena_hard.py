"""Arena-Hard-Auto v2.0's score, computed as its published code computes it
(lmarena/arena-hard-auto at commit 196f6b8: ``gen_judgment.py``, ``show_result.py``,
``utils/judge_utils.py``, ``config/arena-hard-v2.0.yaml``).

* **Judgments.** Each question gives two games (positions swapped, :mod:`..judges.grading`)
  with the system prompt of the question's category; the verdict of each is read by
  v2.0's rule (``judges.prompts.parse_pairwise``: upper-cased, the last label wins).
* **Battles.** A question whose two games do not both have a verdict is dropped (and
  counted as failed). Each label becomes battles: a slight win 1, a tie 0.5, a loss 0, a
  significant win or loss three battles of 1 or 0.
* **Per category, never pooled.** v2.0's categories have their own baselines
  (``hard_prompt``: o3-mini, ``creative_writing``: gemini-2.0-flash) and its leaderboard
  reports each on its own (``show_result.py --category``); a mean over both would mix two
  different comparisons. :func:`score_by_category` scores each category alone.
* **Bootstrap.** 100 rounds, each the mean of the category's battles resampled with
  replacement (``groupby("model").sample(frac=1.0, replace=True)``); the score is the mean
  of the 100 means, the interval their 5th and 95th percentiles. The draws are
  ``RandomState(seed).choice(n, n)`` per round, the calls pandas makes on NumPy's global
  generator, so with ``np.random.seed(seed)`` before ``show_result``'s category the two
  give the same numbers (the parity test's expected values come from its code). With one
  model against one baseline the Bradley-Terry fit of the style-controlled leaderboard is
  not needed: this is the default (no ``--control-features``) table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from afm.evaluation.posttrain.judges.grading import PairResult, model_scores

ROUNDS = 100
HEADLINE = "hard_prompt"  # show_result.py's default category


def bootstrap(battles: Sequence[float], rounds: int = ROUNDS, seed: int = 0) -> dict[str, float]:
    """Mean of ``rounds`` resampled means, and their 5th / 95th percentiles."""
    b = np.asarray(battles, np.float64)
    rng = np.random.RandomState(seed)
    means = np.array([b[rng.choice(len(b), size=len(b), replace=True)].mean() for _ in range(rounds)])
    return {"score": float(means.mean()), "lower": float(np.quantile(means, 0.05)),
            "upper": float(np.quantile(means, 0.95)), "raw": float(b.mean())}


def score(results: Sequence[PairResult], rounds: int = ROUNDS, seed: int = 0) -> dict[str, Any]:
    """The score of one category's questions (one baseline)."""
    battles: list[float] = []
    failed = 0
    for r in results:
        s = model_scores(r)
        if s is None:
            failed += 1
        else:
            battles += s
    if not battles:
        return {"score": None, "lower": None, "upper": None, "raw": None, "questions": 0, "failed": failed,
                "battles": 0}
    return {**bootstrap(battles, rounds, seed), "questions": len(results) - failed, "failed": failed,
            "battles": len(battles)}


def score_by_category(results: Sequence[PairResult], categories: Sequence[str], rounds: int = ROUNDS,
                      seed: int = 0) -> dict[str, dict[str, Any]]:
    """Each category's score on its own (v2.0 never pools categories: their baselines differ)."""
    if len(results) != len(categories):
        raise ValueError("one category per result")
    return {c: score([r for r, rc in zip(results, categories) if rc == c], rounds, seed)
            for c in sorted(set(categories))}


def headline(by_category: dict[str, dict[str, Any]]) -> str | None:
    """The category a single number reports: ``hard_prompt`` (v2.0's default table) when
    present, else the only category; None when several others are there (then each is
    reported and none stands for the set)."""
    if HEADLINE in by_category:
        return HEADLINE
    return next(iter(by_category)) if len(by_category) == 1 else None


__all__ = ["HEADLINE", "ROUNDS", "bootstrap", "headline", "score", "score_by_category"]
