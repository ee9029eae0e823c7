"""AlpacaEval 2.0: the win rate against the reference outputs and the length-controlled (LC)
win rate, computed as AlpacaEval's published code computes them (tatsu-lab/alpaca_eval at
commit cd543a1: ``metrics/winrate.py``, ``metrics/helpers.py``, ``metrics/glm_winrate.py``,
``completion_parsers.logprob_parser``, ``processors.RandomSwitchTwoColumnsProcessor`` and
the ``weighted_alpaca_eval_gpt4_turbo`` annotator's config and prompt).

**Annotation** (the default, :func:`annotate_weighted`): AlpacaEval 2.0's weighted
annotator. One request per item: its prompt (``evaluation/data/writing/
alpaca_eval_weighted_annotator.json``, as published) shows the two outputs as models ``m``
and ``M``, in an order drawn per instruction (``random.Random("is_switched_outputs" +
instruction + "0")``, AlpacaEval's seeded switch), and asks for one token; the judge's
top-5 log-probabilities of that token give the preference ``2 - P(m) / (P(m) + P(M))``
(1 the reference wins, 2 the model wins), switched back. No ``m`` nor ``M`` among them:
no preference (NaN, a failed annotation); identical outputs: 1.5 without asking. The
judge must return log-probabilities (an OpenAI-compatible server with ``logprobs``, or an
afm checkpoint); ``--alpaca-annotation games`` scores instead with the two
position-swapped Arena-style games of :mod:`..judges.grading` (their strengths ignored,
averaged), a different method the results name.

**Win rate** (:func:`win_rate`, AlpacaEval's ``AbsoluteScoringRule``): the mean of
``preference - 1`` over the annotated items, its standard error, wins, draws and the
discrete win rate; a failed annotation is left out.

**LC win rate** (:func:`length_controlled`): a logistic GLM of the preference on
``tanh(std_delta_len)`` (the reference's length minus the model's, in characters, over its
standard deviation across *every* item), the instruction's difficulty and a
``not_gamed_baseline`` indicator, no intercept, fitted on the annotated items with soft
labels (each twice, weighted by the preference and its complement) by
``LogisticRegressionCV`` (L1, liblinear, ``random_state=123``, 5 grouped folds scored by
the weighted log loss). The LC win rate is the mean predicted preference with the length
term at zero over *every* item, the failed ones included (their difficulty is known), and
its standard error that mean's (``pd.Series.sem``). Which formula ran is reported:

* ``length_controlled_v1`` (AlpacaEval 2.0's published LC) with ``instruction_difficulty``
  and AlpacaEval's ``df_gamed.csv`` (annotations of its two length-gamed baselines, fitted
  beside the model's with weight 0.2 / 2 each: the regularisation);
* ``length_controlled_noreg``: the same formula without the gamed rows;
* ``length_controlled_minimal``: no difficulty column. Every item then has the same
  features at zero length, so every predicted preference is equal and the standard error
  is 0 by construction (AlpacaEval's too); the result says so.
"""

from __future__ import annotations

import functools
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from afm.evaluation.posttrain.judges.grading import PairResult, model_preference

ANNOTATOR = Path(__file__).resolve().parents[2] / "data" / "writing" / "alpaca_eval_weighted_annotator.json"
ANNOTATIONS = ("weighted", "games")  # AlpacaEval 2.0's log-prob annotator (default) | two Arena-style games
GLMS = {  # formula columns, and the weight of the gamed baselines' rows (None: not used)
    "length_controlled_v1": (("tanh_std_delta_len", "instruction_difficulty", "not_gamed_baseline"), 0.2),
    "length_controlled_noreg": (("tanh_std_delta_len", "instruction_difficulty", "not_gamed_baseline"), None),
    "length_controlled_minimal": (("tanh_std_delta_len", "not_gamed_baseline"), None),
}
SWITCH_SEED = 0  # AlpacaEval's PairwiseAnnotator default seed, handed to its processors


@functools.lru_cache(maxsize=1)
def weighted_annotator() -> dict[str, Any]:
    """The ``weighted_alpaca_eval_gpt4_turbo`` annotator as published: prompt template,
    completion settings (one token, top-5 log-probs) and the parser's tokens."""
    return json.loads(ANNOTATOR.read_text(encoding="utf-8"))


def is_switched(instruction: str, seed: int = SWITCH_SEED) -> bool:
    """Whether AlpacaEval shows the model's output first for this instruction
    (``RandomSwitchTwoColumnsProcessor``: a choice seeded by the instruction's text)."""
    return random.Random("is_switched_outputs" + instruction + str(seed)).choices([False, True], k=1)[0]


def chatml_messages(prompt: str) -> list[dict[str, str]]:
    """A ``<|im_start|>role ... <|im_end|>`` prompt as chat messages, each content stripped
    (AlpacaEval's ``prompt_to_chatml``)."""
    out = []
    for part in prompt.strip().split("<|im_start|>")[1:]:
        role, _, rest = part.partition("\n")
        out.append({"role": role.strip(), "content": rest.split("<|im_end|>", 1)[0].strip()})
    return out


def weighted_messages(instruction: str, reference: str, answer: str) -> tuple[list[dict[str, str]], bool]:
    """The annotator's request for one item, and whether its outputs were switched. Each
    placeholder's first occurrence is replaced by the text as is (``utils.make_prompts``)."""
    switched = is_switched(instruction)
    output_1, output_2 = (answer, reference) if switched else (reference, answer)
    prompt = weighted_annotator()["prompt_template"]
    for key, value in (("instruction", instruction), ("output_1", output_1), ("output_2", output_2)):
        prompt = prompt.replace("{" + key + "}", value, 1)
    return chatml_messages(prompt), switched


def logprob_preference(top_logprobs: dict[str, float] | None, switched: bool) -> float:
    """AlpacaEval's preference (1..2, NaN without one) from the annotator token's top
    log-probs (``logprob_parser``, not binarised), switched back to reference-first."""
    kwargs = weighted_annotator()["completion_parser_kwargs"]
    numerator, denominator = kwargs["numerator_token"], list(kwargs["denominator_tokens"])
    seen = {t: lp for t, lp in (top_logprobs or {}).items() if t in [*denominator, numerator]}
    if not seen:
        return float("nan")
    num = seen.get(numerator, -math.inf)
    terms = [seen.get(t, -math.inf) for t in denominator]
    top = max(terms)
    log_denominator = top + math.log(sum(math.exp(x - top) for x in terms))
    pref = 2 - math.exp(num - log_denominator)
    return 3 - pref if switched else pref


@dataclass(frozen=True)
class Annotation:
    """One item's preference (1..2; None when the judge gave none) and what it rests on."""

    preference: float | None
    switched: bool = False
    top_logprobs: dict[str, float] | None = None
    error: str | None = None


def annotate_weighted(judge: Any, instructions: Sequence[str], references: Sequence[str],
                      answers: Sequence[str]) -> list[Annotation]:
    """AlpacaEval 2.0's annotation of every item (see the module docstring)."""
    settings = weighted_annotator()["completions_kwargs"]
    out: list[Annotation | None] = [None] * len(instructions)
    asks, switches = [], []
    for i, (q, ref, ans) in enumerate(zip(instructions, references, answers, strict=True)):
        if ref == ans:  # AlpacaEval's _preprocess: identical outputs are a draw, never sent
            out[i] = Annotation(1.5)
            continue
        messages, switched = weighted_messages(q, ref, ans)
        asks.append((i, messages))
        switches.append(switched)
    replies = judge.ask_logprobs([m for _, m in asks], top_logprobs=int(settings["top_logprobs"]),
                                 max_tokens=int(settings["max_tokens"]), temperature=float(settings["temperature"]))
    for (i, _), switched, reply in zip(asks, switches, replies, strict=True):
        if reply.error is not None:
            out[i] = Annotation(None, switched, None, f"judge failed: {reply.error}")
            continue
        pref = logprob_preference(reply.top_logprobs, switched)
        out[i] = (Annotation(pref, switched, reply.top_logprobs) if math.isfinite(pref)
                  else Annotation(None, switched, reply.top_logprobs, "neither m nor M among the top log-probs"))
    return [a for a in out if a is not None]


def preferences(results: Sequence[PairResult]) -> list[float | None]:
    """The ``games`` annotation: preferences (1..2) from both position-swapped games'
    labels, strength ignored, averaged; None when neither game has a verdict."""
    out: list[float | None] = []
    for r in results:
        ps = [p for p in (model_preference(r.games[0], False), model_preference(r.games[1], True))
              if p is not None]
        out.append(1.0 + sum(ps) / len(ps) if ps else None)
    return out


def _valid(prefs: Sequence[float | None]) -> np.ndarray:
    """AlpacaEval's preferences in [0, 1] (a draw coded 0 read as 1.5), NaN and anything
    outside [1, 2] left out (``validate_alpacaeval_preference``)."""
    x = np.array([np.nan if p is None else (1.5 if p == 0 else float(p)) for p in prefs], np.float64)
    return x[np.isfinite(x) & (x >= 1) & (x <= 2)] - 1.0


def _sem(x: np.ndarray) -> float | None:
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else None


def win_rate(prefs: Sequence[float | None]) -> dict[str, Any]:
    """AlpacaEval's head-to-head description (``AbsoluteScoringRule.describe_head2head``)
    as fractions: win rate and standard error over the annotated items, wins, losses,
    draws (a preference of exactly 1.5), and the discrete win rate (each preference
    rounded to a win, a loss or a draw)."""
    valid = _valid(prefs)
    n = len(valid)
    discrete = np.where(valid == 0.5, 0.5, np.round(valid))
    return {"win_rate": float(valid.mean()) if n else None, "stderr": _sem(valid),
            "n_wins": int((valid > 0.5).sum()), "n_draws": int((valid == 0.5).sum()),
            "n_losses": int((valid < 0.5).sum()), "n_total": n, "n_failed": len(prefs) - n,
            "discrete_win_rate": float(discrete.mean()) if n else None}


def _logloss(y_true: np.ndarray, y_pred: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
    y_pred = np.clip(y_pred, 1e-15, 1 - 1e-15)
    losses = y_true * np.log(y_pred) + (1 - y_true) * np.log(1 - y_pred)
    if sample_weight is not None:
        losses = losses * sample_weight
    return float(-np.mean(losses))


def _logloss_continuous(y_true: np.ndarray, y_pred: np.ndarray, true_prob: np.ndarray,
                        true_sample_weight: np.ndarray | None = None) -> float:
    """The CV scorer: the duplicated binary rows read back as soft targets."""
    return _logloss(np.where(y_true == 1, true_prob, 1 - true_prob), y_pred, true_sample_weight)


@dataclass(frozen=True)
class GamedRows:
    """AlpacaEval's ``df_gamed.csv``: its two length-gamed baselines' annotations, already
    featurised (preference in [0, 1], ``std_delta_len``, ``instruction_difficulty``),
    fitted beside the model's rows by ``length_controlled_v1``."""

    preference: np.ndarray
    std_delta_len: np.ndarray
    instruction_difficulty: np.ndarray


def choose_glm(difficulty: Sequence[float] | None, gamed: GamedRows | None) -> str:
    """AlpacaEval 2.0's published formula when its data is there, else the closest one."""
    if difficulty is None:
        return "length_controlled_minimal"
    return "length_controlled_v1" if gamed is not None else "length_controlled_noreg"


def length_controlled(prefs: Sequence[float | None], model_lengths: Sequence[int], baseline_lengths: Sequence[int],
                      difficulty: Sequence[float] | None = None, gamed: GamedRows | None = None,
                      glm: str | None = None, n_splits: int = 5) -> dict[str, Any]:
    """The LC win rate (0..1) and its standard error over every item, and the GLM used."""
    import sklearn
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GroupKFold

    glm = glm or choose_glm(difficulty, gamed)
    columns, lam = GLMS[glm]
    if "instruction_difficulty" in columns and difficulty is None:
        raise ValueError(f"{glm} needs the instructions' difficulty")
    if lam is not None and gamed is None:
        raise ValueError(f"{glm} needs AlpacaEval's gamed-baseline annotations (df_gamed.csv)")
    n = len(prefs)
    y_all = np.array([np.nan if p is None else (1.5 if p == 0 else float(p)) for p in prefs], np.float64) - 1.0
    keep = np.isfinite(y_all)
    note = ("every item has the same features at zero length, so every predicted preference is equal and the "
            "standard error is 0 by construction" if "instruction_difficulty" not in columns else None)
    if keep.sum() < n_splits:  # AlpacaEval's grouped CV needs a group per fold
        return {"lc_win_rate": None, "lc_stderr": None, "glm": glm, "weights": None,
                "note": f"fewer annotated items than the GLM's {n_splits} cross-validation folds"}
    delta = np.asarray(baseline_lengths, np.float64) - np.asarray(model_lengths, np.float64)
    std = delta.std(ddof=1)
    std_delta = delta / std if std > 0 else np.zeros(n)
    diff = np.asarray(difficulty, np.float64) if difficulty is not None else np.zeros(n)

    def design(tanh_len: np.ndarray, d: np.ndarray, not_gamed: np.ndarray) -> np.ndarray:
        cols = {"tanh_std_delta_len": tanh_len, "instruction_difficulty": d, "not_gamed_baseline": not_gamed}
        return np.stack([cols[c] for c in columns], 1)

    X = design(np.tanh(std_delta[keep]), diff[keep], np.ones(int(keep.sum())))
    y = y_all[keep]
    weight = np.ones(len(y))
    if lam is not None:  # the gamed baselines' rows first, as AlpacaEval concatenates them
        g_keep = np.isfinite(gamed.preference)
        X = np.concatenate([design(np.tanh(gamed.std_delta_len[g_keep]), gamed.instruction_difficulty[g_keep],
                                   np.zeros(int(g_keep.sum()))), X])
        y = np.concatenate([gamed.preference[g_keep], y])
        weight = np.concatenate([np.full(int(g_keep.sum()), lam / 2), weight])
    X_test = design(np.zeros(n), diff, np.ones(n))
    X_dup = np.concatenate([X, X])
    y_dup = np.concatenate([np.ones(len(y)), np.zeros(len(y))])
    true_prob = np.concatenate([y, 1 - y])
    groups = np.concatenate([np.arange(len(y)), np.arange(len(y))])
    true_weight = None if lam is None else np.concatenate([weight, weight])
    fit_weight = true_prob if true_weight is None else true_prob * true_weight
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = make_scorer(_logloss_continuous, response_method="predict_proba",
                             greater_is_better=False).set_score_request(true_sample_weight=True, true_prob=True)
        model = LogisticRegressionCV(cv=GroupKFold(n_splits=n_splits), scoring=scorer, l1_ratios=(1.0,),
                                     solver="liblinear", random_state=123, fit_intercept=False,
                                     use_legacy_attributes=False)
        model.set_fit_request(sample_weight=True)
        model.fit(X_dup, y_dup, sample_weight=fit_weight, groups=groups, true_sample_weight=true_weight,
                  true_prob=true_prob)
    p = model.predict_proba(X_test)[:, 1]  # every item, the failed ones included
    out = {"lc_win_rate": float(p.mean()), "lc_stderr": _sem(p), "glm": glm,
           "weights": dict(zip(columns, (float(w) for w in model.coef_[0]), strict=True))}
    if note:
        out["note"] = note
    return out


def read_gamed(path: str | Path) -> GamedRows:
    """AlpacaEval's ``df_gamed.csv`` (columns ``preference``, ``std_delta_len``,
    ``instruction_difficulty``; others ignored)."""
    import csv

    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    need = ("preference", "std_delta_len", "instruction_difficulty")
    if not rows or any(k not in rows[0] for k in need):
        raise ValueError(f"{path}: expected the columns {', '.join(need)}")

    def col(k: str) -> np.ndarray:
        return np.array([float(r[k]) if r[k] not in ("", "nan", "NaN") else np.nan for r in rows], np.float64)

    return GamedRows(col("preference"), col("std_delta_len"), col("instruction_difficulty"))


__all__ = ["ANNOTATIONS", "GLMS", "Annotation", "GamedRows", "annotate_weighted", "choose_glm", "chatml_messages",
           "is_switched", "length_controlled", "logprob_preference", "preferences", "read_gamed",
           "weighted_annotator", "weighted_messages", "win_rate"]
