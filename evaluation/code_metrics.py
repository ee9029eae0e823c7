"""Functional correctness of generated code (HumanEval pass@k) through the sandbox.

lm-eval's ``humaneval`` task scores with Hugging Face ``evaluate``'s ``code_eval``, which
is downloaded from the hub at import time and runs programs with ``exec`` in a forked
interpreter. Here the same task (prompt = the function signature and docstring, stop at
the next top-level block, 0-shot, greedy) is scored by running ``prompt + completion``
and then ``test + check(entry_point)`` in :func:`afm.sandbox.run_python`. As in
lm-eval's reference (``code_eval``: any exception, ``SystemExit`` included, fails), a
program passes only when the check returned; here the verdict comes from the sandbox's
harness, so an exit of any kind (``os._exit(0)``, an ``atexit`` hook) cannot pass either.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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


# Verdicts computed ahead, in parallel, by the filter that sees every problem at once
# (lm-eval then calls the metric one problem at a time and finds them here).
_VERDICTS: dict[tuple[str, str], bool] = {}
WORKERS = max(1, min(8, (os.cpu_count() or 2)))


def check_program(program: str, test: str, policy: SandboxPolicy = POLICY) -> bool:
    """Does ``program`` pass ``test`` (which calls ``check(...)``) in the sandbox?"""
    key = (program, test)
    if key in _VERDICTS:
        return _VERDICTS.pop(key)
    return run_python(program, policy, test=test).passed


def check_all(pairs: Sequence[tuple[str, str]], workers: int = WORKERS) -> list[bool]:
    """Sandbox verdicts for many (program, test) pairs, several processes at a time."""
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(pairs) or 1))) as pool:
        return list(pool.map(lambda pt: run_python(pt[0], POLICY, test=pt[1]).passed, pairs))


def count_passing(candidates: Sequence[str], test: str) -> int:
    return sum(check_program(prog, test) for prog in candidates)


def pass_at_1(references: list[str], predictions: list[list[str]], **_: Any) -> float:
    """lm-eval metric: pass@1 of one problem (``references[0]`` is its test program,
    ``predictions[0]`` its candidate programs)."""
    test = references[0]
    candidates = predictions[0] if isinstance(predictions[0], list) else [predictions[0]]
    return pass_at_k_estimate(len(candidates), count_passing(candidates, test), 1)


def test_program(doc: dict) -> str:
    """The task's reference: its tests and the call that runs them (``doc_to_target``)."""
    return f"{doc['test']}\ncheck({doc['entry_point']})"


def build_predictions(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    """lm-eval filter: a completion is only the body; the program is prompt + body. Also
    runs every program in the sandbox now, in parallel, for the metric to pick up."""
    programs = [[doc["prompt"] + r for r in resp] for resp, doc in zip(resps, docs)]
    pairs = [(prog, test_program(doc)) for progs, doc in zip(programs, docs) for prog in progs]
    _VERDICTS.update(zip(pairs, check_all(pairs)))
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
        "metric_list": [{"metric": pass_at_1, "aggregation": "mean", "higher_is_better": True}],
        "generation_kwargs": {"until": list(STOP), "max_gen_toks": 1024, "do_sample": False},
        "repeats": 1,
        "num_fewshot": 0,
        "filter_list": [{"name": "create_test",
                         "filter": [{"function": "custom", "filter_fn": build_predictions}]}],
        "unsafe_code": True,
        "metadata": {"version": 1.0, "scorer": "afm.sandbox"},
    }
