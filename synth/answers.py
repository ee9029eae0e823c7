"""Final-answer extraction and matching for GSM8K- and MATH-style solutions.

The rules are the evaluation's, taken from the same installed code so that "a synthetic
solution is correct" means what "the model scored on GSM8K / MATH" means in ``afm eval``
(``afm.evaluation`` runs lm-eval's ``gsm8k_cot`` and ``minerva_math`` tasks):

* **GSM8K**: the regular expressions of lm-eval's ``gsm8k-cot.yaml`` read from the
  installed package -- ``strict-match`` ("The answer is N."), then ``flexible-extract``
  (the last number) -- and the same normalisation as its ``exact_match`` metric
  (``regexes_to_ignore``: thousands commas, ``$``, everything up to ``#### ``, a final
  period; case ignored). A ground truth ``... #### 72`` normalises to ``72``.
* **MATH**: the last ``\\boxed{...}`` (lm-eval's ``minerva_math.utils``:
  ``last_boxed_only_string``, ``remove_boxed``, ``normalize_final_answer``), equal when
  ``is_equiv`` (sympy) or ``math_verify.verify`` says so, as the ``minerva_math`` task
  scores ``exact_match`` / ``math_verify``.

Needs the ``eval`` extra (lm-eval, math-verify); a clear error says so otherwise.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from afm.config import load_yaml


class AnswerRulesUnavailable(ImportError):
    """lm-eval / math-verify are not installed (``pip install 'afm[eval]'``)."""


@dataclass(frozen=True)
class Gsm8kRules:
    strict: str
    flexible: str
    ignore: tuple[str, ...]
    ignore_case: bool


@functools.lru_cache(maxsize=1)
def gsm8k_rules() -> Gsm8kRules:
    """The filters and metric normalisation of lm-eval's ``gsm8k_cot`` task."""
    try:
        from importlib import resources

        text = resources.files("lm_eval.tasks").joinpath("gsm8k/gsm8k-cot.yaml").read_text()
    except (ImportError, FileNotFoundError) as exc:
        raise AnswerRulesUnavailable(f"GSM8K answer rules come from lm-eval; install the eval extra ({exc})") from None

    cfg = load_yaml(text, "lm_eval gsm8k/gsm8k-cot.yaml")
    filters = {f["name"]: f["filter"][0]["regex_pattern"] for f in cfg["filter_list"]}
    metric = next(m for m in cfg["metric_list"] if m["metric"] == "exact_match")
    return Gsm8kRules(filters["strict-match"], filters["flexible-extract"],
                      tuple(metric.get("regexes_to_ignore", ())), bool(metric.get("ignore_case", False)))


def _normalize_gsm8k(text: str) -> str:
    rules = gsm8k_rules()
    for pattern in rules.ignore:
        text = re.sub(pattern, "", text)
    text = text.strip()
    return text.lower() if rules.ignore_case else text


def extract_gsm8k(text: str) -> str | None:
    """The final answer of a GSM8K-style solution (strict, else flexible), normalised;
    None when it holds no number."""
    rules = gsm8k_rules()
    strict = re.findall(rules.strict, text)
    if strict:
        found = strict[0]
    else:
        matches = re.findall(rules.flexible, text)
        if not matches:
            return None
        last = matches[-1]  # group_select: -1
        found = next((g for g in last if g), "") if isinstance(last, tuple) else last
    if isinstance(found, tuple):
        found = next((g for g in found if g), "")
    answer = _normalize_gsm8k(found)
    return answer or None


def gsm8k_gold(answer: str) -> str:
    """A GSM8K ground truth (``... #### N`` or a bare value) as the metric compares it."""
    return _normalize_gsm8k(answer)


@functools.lru_cache(maxsize=1)
def _minerva() -> Any:
    try:
        from lm_eval.tasks.minerva_math import utils
    except ImportError as exc:
        raise AnswerRulesUnavailable(f"MATH answer rules come from lm-eval[math]; install the eval extra ({exc})") from None
    return utils


def extract_boxed(text: str) -> str | None:
    """The normalised content of the last ``\\boxed{}`` (or ``\\fbox{}``), or None."""
    u = _minerva()
    boxed = u.last_boxed_only_string(text)
    if boxed is None:
        return None
    try:
        inner = u.remove_boxed(boxed)
    except AssertionError:
        return None
    return u.normalize_final_answer(inner)


def math_equal(predicted: str, gold: str) -> bool:
    """Equal by minerva's normalised sympy comparison or by math-verify."""
    u = _minerva()
    if u.is_equiv(predicted, gold):
        return True
    from math_verify import parse, verify

    try:
        return bool(verify(parse(f"${gold}$"), parse(f"${predicted}$")))
    except Exception:  # noqa: BLE001 - math-verify raises on odd LaTeX; unequal then
        return False


def extract_answer(text: str, style: str) -> str | None:
    """``style``: ``gsm8k`` or ``math``."""
    return extract_gsm8k(text) if style == "gsm8k" else extract_boxed(text)


def answers_match(predicted: str | None, gold: str, style: str) -> bool:
    if predicted is None:
        return False
    if style == "gsm8k":
        return predicted == gsm8k_gold(gold)
    return math_equal(predicted, gold)
