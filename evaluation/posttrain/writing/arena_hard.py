"""Arena-Hard-Auto's score: the model's win rate against the baseline, with a bootstrap
interval, as its authors compute it (``show_result.py`` of arena-hard-auto).

Each question gives two games (positions swapped, :mod:`..judges.grading`); a question
whose two games do not both have a verdict is dropped (and counted as failed). Each label
becomes battles: a slight win 1, a tie 0.5, a loss 0, a significant win or loss three
battles of 1 or 0. The score is the mean over all battles, bootstrapped (100 resamples of
the battles with replacement, a fixed seed): the reported score is the mean of the
bootstrap means, the interval their 5th and 95th percentiles. With one model against one
baseline this is what Arena-Hard's Bradley-Terry fit reduces to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from afm.evaluation.posttrain.judges.grading import PairResult, model_scores


def score(results: Sequence[PairResult], rounds: int = 100, seed: int = 0) -> dict[str, Any]:
    battles: list[float] = []
    failed = 0
    for r in results:
        s = model_scores(r)
        if s is None:
            failed += 1
        else:
            battles += s
    if not battles:
        return {"score": None, "lower": None, "upper": None, "questions": 0, "failed": failed, "battles": 0}
    b = np.asarray(battles)
    rng = np.random.default_rng(seed)
    means = np.array([rng.choice(b, size=len(b), replace=True).mean() for _ in range(rounds)])
    return {"score": float(means.mean()), "lower": float(np.quantile(means, 0.05)),
            "upper": float(np.quantile(means, 0.95)), "raw": float(b.mean()),
            "questions": len(results) - failed, "failed": failed, "battles": len(b)}
