"""HumanEval through lm-eval's task pipeline and the sandbox: canonical solutions score
pass@1 = 1.0, empty completions 0.0 (the ``LM`` here only replays fixed completions)."""

from __future__ import annotations

from pathlib import Path

from afm.evaluation.parity import run_tasks
from afm.evaluation.suite import BuildContext, build_task_configs
from lm_eval.api.model import LM


class FixedCompletions(LM):
    """Returns a fixed completion per prompt (the canonical solution, or nothing)."""

    def __init__(self, completions: dict[str, str]) -> None:
        super().__init__()
        self.completions = completions

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        return [self.completions.get(r.args[0], "") for r in requests]

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError


def test_canonical_solutions_pass_and_empty_ones_fail(shared_eval: Path) -> None:
    from afm.evaluation.local_data import read_file

    problems = read_file(shared_eval / "benchmarks" / "humaneval.jsonl.gz")
    configs = build_task_configs(["humaneval"], BuildContext(data_dir=str(shared_eval / "benchmarks")))
    canonical = {p["prompt"]: p["canonical_solution"] for p in problems}
    out = run_tasks(FixedCompletions(canonical), configs)
    assert out["results"]["humaneval"]["pass_at_1,create_test"] == 1.0
    assert out["n-samples"]["humaneval"]["effective"] == 164
    out = run_tasks(FixedCompletions({}), configs, limit=40)
    assert out["results"]["humaneval"]["pass_at_1,create_test"] == 0.0
