"""The post-training tasks: the report's §6.2-6.3 and §7 evaluations that lm-eval has no
task for (tool use, judged writing, safety), their families and what each needs.

They are named in ``afm eval --tasks`` beside lm-eval's tasks (``suite.py`` registers
them, kind ``posttrain``) and run by :mod:`afm.evaluation.posttrain.runner`: the model
writes replies through its chat template, then a checker (BFCL), a judge (writing) or a
judge / the keyword detector (safety) scores them; results land in the same
``afm-eval-v1`` file.
"""

from __future__ import annotations

from dataclasses import dataclass

from afm.evaluation.posttrain.bfcl.data import CATEGORIES


@dataclass(frozen=True)
class PosttrainTask:
    name: str
    family: str  # bfcl | safety | writing
    metric: str  # the primary metric's name (the filter part is the scorer: ast, keyword, judge)
    needs_judge: bool = False
    max_new_tokens: int = 256
    lower_is_better: bool = False
    note: str = ""


def _bfcl(name: str) -> PosttrainTask:
    kind = "relevance" if "relevance" in name else "AST"
    return PosttrainTask(name, "bfcl", "accuracy", note=f"BFCL {CATEGORIES[name]['v4']} ({kind} check)")


TASKS: dict[str, PosttrainTask] = {t.name: t for t in [
    *(_bfcl(n) for n in CATEGORIES),
    PosttrainTask("safety_harmbench", "safety", "violation_rate", lower_is_better=True,
                  note="HarmBench standard behaviours: share of replies that carry out the request"),
    PosttrainTask("safety_xstest", "safety", "violation_rate", lower_is_better=True,
                  note="XSTest unsafe contrast prompts: share of replies that comply"),
    PosttrainTask("overrefusal_xstest", "safety", "refusal_rate", lower_is_better=True,
                  note="XSTest safe prompts that look unsafe: share refused (over-refusal)"),
    PosttrainTask("alpaca_eval", "writing", "lc_win_rate", needs_judge=True, max_new_tokens=1024,
                  note="AlpacaEval 2.0: length-controlled win rate against the reference outputs"),
    PosttrainTask("arena_hard", "writing", "score", needs_judge=True, max_new_tokens=1024,
                  note="Arena-Hard-Auto v2.0: win rate against each category's own baseline, position-swapped "
                       "pairs, categories never pooled"),
    PosttrainTask("afm_writing", "writing", "rating", needs_judge=True, max_new_tokens=512,
                  note="single-answer grades 1-10 (summarization, composition; report §6.3)"),
]}

BFCL_NON_LIVE_AST = ("bfcl_simple", "bfcl_multiple", "bfcl_parallel", "bfcl_parallel_multiple")
BFCL_LIVE_AST = ("bfcl_live_simple", "bfcl_live_multiple", "bfcl_live_parallel", "bfcl_live_parallel_multiple")

GROUPS: dict[str, tuple[str, ...]] = {
    "afm-bfcl": tuple(CATEGORIES),
    "afm-safety": ("safety_harmbench", "safety_xstest", "overrefusal_xstest"),
    "afm-writing": ("alpaca_eval", "arena_hard", "afm_writing"),
}
