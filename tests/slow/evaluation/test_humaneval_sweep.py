"""All of HumanEval, both ways, through the three paths that score model-written code:
the 164 canonical solutions pass and the 164 ``return None`` bodies fail, every verdict
judged outside the program's process (none unjudgeable), through ``code_metrics``
(what lm-eval's HumanEval task calls), lm-eval's task itself, and ``afm synth code``'s
``run_pairs``."""

from __future__ import annotations

from pathlib import Path

import pytest

from afm.evaluation import code_metrics
from afm.sandbox import kernel_boundary

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(kernel_boundary().kind != "kernel",
                                 reason=f"no kernel boundary here: {kernel_boundary().reason}")]


def _problems(shared_eval: Path) -> list[dict]:
    from afm.evaluation.local_data import read_file

    return read_file(shared_eval / "benchmarks" / "humaneval.jsonl.gz")


def test_canonical_solutions_pass_and_return_none_fails(shared_eval: Path) -> None:
    problems = _problems(shared_eval)
    canonical = code_metrics.judge_all([(p["prompt"] + p["canonical_solution"], code_metrics.test_program(p))
                                        for p in problems])
    nothing = code_metrics.judge_all([(p["prompt"] + "    return None\n", code_metrics.test_program(p))
                                      for p in problems])
    assert [p["task_id"] for p, v in zip(problems, canonical) if not v.passed] == []
    assert [p["task_id"] for p, v in zip(problems, nothing) if v.passed] == []
    assert all(v.judged_outside and not v.unjudgeable for v in canonical + nothing)


def test_lm_eval_and_synth_code_take_the_same_path(shared_eval: Path) -> None:
    from afm.evaluation.parity import run_tasks
    from afm.evaluation.suite import BuildContext, build_task_configs
    from afm.synth.code_data import CodeConfig, run_pairs
    from tests.integration.evaluation.test_humaneval_sandbox import FixedCompletions

    problems = _problems(shared_eval)
    configs = build_task_configs(["humaneval"], BuildContext(data_dir=str(shared_eval / "benchmarks")))
    out = run_tasks(FixedCompletions({p["prompt"]: "    return None\n" for p in problems}), configs)
    assert out["results"]["humaneval"]["pass_at_1,create_test"] == 0.0
    assert out["results"]["humaneval"]["judged_outside,create_test"] == 1.0
    pairs = [(p["prompt"] + p["canonical_solution"], code_metrics.test_program(p)) for p in problems]
    outcomes = run_pairs(pairs, CodeConfig(timeout_s=10.0, workers=2), progress=False)
    assert [v for v, _ in outcomes] == ["passed"] * len(problems) and all(o for _, o in outcomes)


def test_humaneval_33_and_37_through_lm_eval(shared_eval: Path) -> None:
    """lm-eval's pass@1 of HumanEval/33 and /37 for a program that returns a million and
    one items (which made the previous judge fall back to the program's process): 0."""
    from afm.evaluation.parity import run_tasks
    from afm.evaluation.suite import BuildContext, build_task_configs
    from tests.integration.evaluation.test_forged_verdicts import JUDGED_INSIDE_BODY
    from tests.integration.evaluation.test_humaneval_sandbox import FixedCompletions

    problems = {p["task_id"]: p for p in _problems(shared_eval)}
    chosen = [problems["HumanEval/33"], problems["HumanEval/37"]]
    configs = build_task_configs(["humaneval"], BuildContext(data_dir=str(shared_eval / "benchmarks")))
    out = run_tasks(FixedCompletions({p["prompt"]: JUDGED_INSIDE_BODY for p in chosen}), configs, limit=40)
    assert out["results"]["humaneval"]["pass_at_1,create_test"] == 0.0
