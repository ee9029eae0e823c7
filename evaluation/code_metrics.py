"""Functional correctness of generated code (HumanEval pass@k) through the sandbox.

lm-eval's ``humaneval`` task scores with Hugging Face ``evaluate``'s ``code_eval``, which
is downloaded from the hub at import time and runs programs with ``exec`` in a forked
interpreter. Here the same task (prompt = the function signature and docstring, stop at
the next top-level block, 0-shot, greedy) is scored by running ``prompt + completion``
and then ``test + check(entry_point)`` in :func:`afm.sandbox.run_python`. As in
lm-eval's reference (``code_eval``: any exception, ``SystemExit`` included, fails), a
program passes only when the check returned with every assertion true, and an exit of any
kind (``os._exit(0)``, an ``atexit`` hook) cannot pass either.

Where the verdict is decided (``sandbox/judge.py``): the program runs in one sandboxed
process and the test in another, the referee's, under the real interpreter, with no code
of the program; every call of the program is a request, its values come back as plain
data, and the referee decides. Nothing the program does in its own process (a forged
message, an ``__eq__`` that is always true, a patched ``abs``, a huge or hostile value)
can pass it, and nothing it returns can move the judgement into its process. Where the
program's own code would have to decide (its ``__eq__`` against the expected value), the
test is *unjudgeable*: a failure, counted. The task reports ``pass_at_1``,
``judged_outside`` (the share of verdicts the referee decided) and ``unjudgeable`` (the
share it refused); every verdict is one or the other.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from afm.sandbox import SandboxPolicy, require, run_python

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
    unjudgeable: bool = False


# Verdicts computed ahead, in parallel, by the filter that sees every problem at once
# (lm-eval then calls the metrics one problem at a time and finds them here; the last
# metric, unjudgeable, forgets them).
_VERDICTS: dict[tuple[str, str], Verdict] = {}
WORKERS = max(1, min(8, (os.cpu_count() or 2)))


def judge(program: str, test: str, policy: SandboxPolicy = POLICY) -> Verdict:
    result = run_python(program, policy, test=test)
    return Verdict(result.passed, result.judged == "outside", result.unjudgeable)


def check_program(program: str, test: str, policy: SandboxPolicy = POLICY) -> bool:
    """Does ``program`` pass ``test`` (which calls ``check(...)``) in the sandbox?"""
    found = _VERDICTS.get((program, test))
    return found.passed if found is not None else judge(program, test, policy).passed


def judge_all(pairs: Sequence[tuple[str, str]], workers: int = WORKERS) -> list[Verdict]:
    """Sandbox verdicts for many (program, test) pairs, several processes at a time."""
    require(POLICY)  # here, in the caller's thread: a Ctrl-C then stops every run at once
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


def _verdicts(references: list[str], predictions: list[list[str]], forget: bool) -> list[Verdict]:
    test, candidates = references[0], _candidates(predictions)
    take = _VERDICTS.pop if forget else _VERDICTS.get
    return [take((prog, test), None) or judge(prog, test) for prog in candidates]


def judged_outside(references: list[str], predictions: list[list[str]], **_: Any) -> float:
    """lm-eval metric: the share of this problem's verdicts the referee decided (outside
    the program's process; 1.0 for HumanEval's canonical solutions)."""
    verdicts = _verdicts(references, predictions, forget=False)
    return sum(v.judged_outside for v in verdicts) / max(1, len(verdicts))


def unjudgeable(references: list[str], predictions: list[list[str]], **_: Any) -> float:
    """lm-eval metric: the share of this problem's verdicts the referee refused to decide
    (the program's own code would have had to: counted as failures)."""
    verdicts = _verdicts(references, predictions, forget=True)
    return sum(v.unjudgeable for v in verdicts) / max(1, len(verdicts))


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
                        {"metric": judged_outside, "aggregation": "mean", "higher_is_better": True},
                        {"metric": unjudgeable, "aggregation": "mean", "higher_is_better": False}],
        "generation_kwargs": {"until": list(STOP), "max_gen_toks": 1024, "do_sample": False},
        "repeats": 1,
        "num_fewshot": 0,
        "filter_list": [{"name": "create_test",
                         "filter": [{"function": "custom", "filter_fn": build_predictions}]}],
        "unsafe_code": True,
        "metadata": {"version": 1.0, "scorer": "afm.sandbox"},
    }
