"""Functional correctness of generated code (HumanEval pass@k) through the sandbox.

lm-eval's ``humaneval`` task scores with Hugging Face ``evaluate``'s ``code_eval``, which
is downloaded from the hub at import time and runs programs with ``exec`` in a forked
interpreter. Here the same task (prompt = the function signature and docstring, stop at
the next top-level block, 0-shot, greedy) is scored by running ``prompt + completion``
and then ``test + check(entry_point)`` in :func:`afm.sandbox.run_python`. As in
lm-eval's reference (``code_eval``: any exception, ``SystemExit`` included, fails), a
program passes only when the check returned with every assertion true, and an exit of any
kind (``os._exit(0)``, an ``atexit`` hook) cannot pass either.

Where the verdict is decided: HumanEval's tests split (``sandbox/judge.py``): only the
program and the calls the test makes of it run in the sandbox, their values come back as
plain data and the asserts are judged in the evaluator, so nothing the program does in its
own process (a forged key, an ``__eq__`` that is always true, a patched ``abs``) can pass
it. A test that does not split is judged by the harness in the program's process. The
task reports both: ``pass_at_1`` and ``judged_outside`` (the share of this benchmark's
verdicts decided outside the program's process).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from afm.sandbox import SandboxPolicy, run_python

POLICY = SandboxPolicy(timeout_s=10.0, cpu_s=10)
# HumanEval's own stop sequences: a new top-level statement ends the function body.
STOP = ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]


def pass_at_k_estimate(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` pass (Chen et al., 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


@dataclass(frozen=True)
class Verdict:
    passed: bool
    judged_outside: bool


# Verdicts computed ahead, in parallel, by the filter that sees every problem at once
# (lm-eval then calls the metrics one problem at a time and finds them here; the last
# metric, judged_outside, forgets them).
_VERDICTS: dict[tuple[str, str], Verdict] = {}
WORKERS = max(1, min(8, (os.cpu_count() or 2)))


def judge(program: str, test: str, policy: SandboxPolicy = POLICY) -> Verdict:
    result = run_python(program, policy, test=test)
    return Verdict(result.passed, result.judged == "outside")


def check_program(program: str, test: str, policy: SandboxPolicy = POLICY) -> bool:
    """Does ``program`` pass ``test`` (which calls ``check(...)``) in the sandbox?"""
    found = _VERDICTS.get((program, test))
    return found.passed if found is not None else judge(program, test, policy).passed


def judge_all(pairs: Sequence[tuple[str, str]], workers: int = WORKERS) -> list[Verdict]:
    """Sandbox verdicts for many (program, test) pairs, several processes at a time."""
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(pairs) or 1))) as pool:
        return list(pool.map(lambda pt: judge(pt[0], pt[1]), pairs))


def check_all(pairs: Sequence[tuple[str, str]], workers: int = WORKERS) -> list[bool]:
    return [v.passed for v in judge_all(pairs, workers)]


def _candidates(predictions: list[Any]) -> list[str]:
    return predictions[0] if isinstance(predictions[0], list) else [predictions[0]]


def count_passing(candidates: Sequence[str], test: str) -> int:
    return sum(check_program(prog, test) for prog in candidates)


def pass_at_1(references: list[str], predictions: list[list[str]], **_: Any) -> float:
    """lm-eval metric: pass@1 of one problem (``references[0]`` is its test program,
    ``predictions[0]`` its candidate programs)."""
    candidates = _candidates(predictions)
    return pass_at_k_estimate(len(candidates), count_passing(candidates, references[0]), 1)


def judged_outside(references: list[str], predictions: list[list[str]], **_: Any) -> float:
    """lm-eval metric: the share of this problem's verdicts decided outside the
    program's process (a split test), 1.0 for HumanEval's tests."""
    test, candidates = references[0], _candidates(predictions)
    verdicts = [_VERDICTS.pop((prog, test), None) or judge(prog, test) for prog in candidates]
    return sum(v.judged_outside for v in verdicts) / max(1, len(verdicts))


def test_program(doc: dict) -> str:
    """The task's reference: its tests and the call that runs them (``doc_to_target``)."""
    return f"{doc['test']}\ncheck({doc['entry_point']})"


def build_predictions(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    """lm-eval filter: a completion is only the body; the program is prompt + body. Also
    runs every program in the sandbox now, in parallel, for the metric to pick up."""
    programs = [[doc["prompt"] + r for r in resp] for resp, doc in zip(resps, docs)]
    pairs = [(prog, test_program(doc)) for progs, doc in zip(programs, docs) for prog in progs]
    _VERDICTS.clear()
    _VERDICTS.update(zip(pairs, judge_all(pairs)))
    return programs


def humaneval_config() -> dict[str, Any]:
    """lm-eval's ``humaneval`` task with the sandboxed metric."""
    return {
        "task": "humaneval",
        "dataset_path": "openai/openai_humaneval",
        "output_type": "generate_until",
        "test_split": "test",
        "doc_to_text": "{{prompt}}",
        "doc_to_target": "{{test}}\ncheck({{entry_point}})",
        "metric_list": [{"metric": pass_at_1, "aggregation": "mean", "higher_is_better": True},
                        {"metric": judged_outside, "aggregation": "mean", "higher_is_better": True}],
        "generation_kwargs": {"until": list(STOP), "max_gen_toks": 1024, "do_sample": False},
        "repeats": 1,
        "num_fewshot": 0,
        "filter_list": [{"name": "create_test",
                         "filter": [{"function": "custom", "filter_fn": build_predictions}]}],
        "unsafe_code": True,
        "metadata": {"version": 1.0, "scorer": "afm.sandbox"},
    }
