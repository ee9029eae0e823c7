"""AlpacaEval 2.0: win rate against a reference, and the length-controlled (LC) win rate.

Computed as AlpacaEval's authors define it (Dubois et al. 2024, ``alpaca_eval.metrics``):

* preferences are on AlpacaEval's scale (1: the baseline wins, 2: the model wins, 1.5: a
  draw), here from the two position-swapped games of :mod:`..judges.grading` averaged
  (AlpacaEval's weighted annotator reads them from the judge's token log-probabilities, which
  an OpenAI-compatible endpoint does not always return); an item whose two games both
  failed has no preference and is left out (reported, never a win);
* win rate: mean of ``preference - 1``, with its standard error;
* LC win rate: a logistic GLM of the preference on ``tanh(std_delta_len)`` (length of the
  baseline's answer minus the model's, in characters, divided by its standard deviation)
  and an intercept (``not_gamed_baseline``), plus ``instruction_difficulty`` when every
  item carries one (AlpacaEval publishes them for its 805 instructions); fitted with soft
  labels (each item twice, weighted by the preference and its complement) by
  ``LogisticRegressionCV`` with an L1 penalty, liblinear, no free intercept, grouped
  5-fold cross-validation on the weighted log loss; the LC win rate is the mean predicted
  preference with the length term at zero. AlpacaEval's ``length_controlled_v1`` also
  regularises towards two "gamed" baselines from its hub data; without that data afm fits
  ``length_controlled_minimal`` (no difficulty) or the unregularised v1 formula, and
  says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from afm.evaluation.posttrain.judges.grading import PairResult, model_preference


def preferences(results: Sequence[PairResult]) -> list[float | None]:
    """AlpacaEval preferences (1..2) from both games; None when neither game has a verdict."""
    out: list[float | None] = []
    for r in results:
        ps = [p for p in (model_preference(r.games[0], False), model_preference(r.games[1], True))
              if p is not None]
        out.append(1.0 + sum(ps) / len(ps) if ps else None)
    return out


def win_rate(prefs: Sequence[float | None]) -> dict[str, Any]:
    valid = np.array([p for p in prefs if p is not None], dtype=float) - 1.0
    n = len(valid)
    return {"win_rate": float(valid.mean()) if n else None,
            "stderr": float(valid.std(ddof=1) / math.sqrt(n)) if n > 1 else None,
            "n_wins": int((valid > 0.5).sum()), "n_draws": int((valid == 0.5).sum()),
            "n_losses": int((valid < 0.5).sum()), "n_total": n, "n_failed": len(prefs) - n}


def _logloss(y_true: np.ndarray, y_pred: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
    y_pred = np.clip(y_pred, 1e-15, 1 - 1e-15)
    losses = y_true * np.log(y_pred) + (1 - y_true) * np.log(1 - y_pred)
    if sample_weight is not None:
        losses = losses * sample_weight
    return float(-np.mean(losses))


def _logloss_continuous(y_true: np.ndarray, y_pred: np.ndarray, true_prob: np.ndarray,
                        true_sample_weight: np.ndarray | None = None) -> float:
    """AlpacaEval's scorer: the duplicated binary rows read back as soft targets."""
    return _logloss(np.where(y_true == 1, true_prob, 1 - true_prob), y_pred, true_sample_weight)


def length_controlled(prefs: Sequence[float | None], model_lengths: Sequence[int], baseline_lengths: Sequence[int],
                      difficulty: Sequence[float] | None = None, n_splits: int = 5) -> dict[str, Any]:
    """The LC win rate (0..1) and its standard error, and the GLM used."""
    import sklearn
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GroupKFold

    keep = [i for i, p in enumerate(prefs) if p is not None]
    glm = "length_controlled_noreg" if difficulty is not None else "length_controlled_minimal"
    if len(keep) < 2:
        return {"lc_win_rate": None, "lc_stderr": None, "glm": glm, "note": "fewer than two judged items"}
    delta = np.array(baseline_lengths, dtype=float) - np.array(model_lengths, dtype=float)
    std = delta.std(ddof=1)
    std_delta = delta / std if std > 0 else np.zeros_like(delta)
    y = np.array([prefs[i] for i in keep], dtype=float) - 1.0  # AlpacaEval's preference in [0, 1]
    columns = [np.tanh(std_delta[keep])]
    test_columns = [np.zeros(len(prefs))]
    if difficulty is not None:
        diff = np.asarray(difficulty, dtype=float)
        columns.append(diff[keep])
        test_columns.append(diff)
    columns.append(np.ones(len(keep)))  # not_gamed_baseline: the baseline is not a gamed one
    test_columns.append(np.ones(len(prefs)))
    X, X_test = np.stack(columns, 1), np.stack(test_columns, 1)
    if np.all(y == y[0]) and y[0] in (0.0, 1.0):  # every item won (lost): the GLM's limit
        return {"lc_win_rate": float(y[0]), "lc_stderr": 0.0, "glm": glm, "weights": None}
    X_dup = np.concatenate([X, X])
    y_dup = np.concatenate([np.ones(len(y)), np.zeros(len(y))])
    true_prob = np.concatenate([y, 1 - y])
    groups = np.concatenate([np.arange(len(y)), np.arange(len(y))])
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = make_scorer(_logloss_continuous, response_method="predict_proba",
                             greater_is_better=False).set_score_request(true_sample_weight=True, true_prob=True)
        model = LogisticRegressionCV(cv=GroupKFold(n_splits=min(n_splits, len(y))), scoring=scorer,
                                     l1_ratios=(1.0,), solver="liblinear", random_state=123,
                                     fit_intercept=False, use_legacy_attributes=False)
        model.set_fit_request(sample_weight=True)
        model.fit(X_dup, y_dup, sample_weight=true_prob, groups=groups, true_sample_weight=None, true_prob=true_prob)
    p = model.predict_proba(X_test)[:, 1]
    p = p[keep]
    return {"lc_win_rate": float(p.mean()),
            "lc_stderr": float(p.std(ddof=1) / math.sqrt(len(p))) if len(p) > 1 else None,
            "glm": glm, "weights": [float(w) for w in model.coef_[0]]}
