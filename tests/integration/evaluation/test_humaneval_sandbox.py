"""HumanEval through lm-eval's task pipeline and the sandbox: canonical solutions score
pass@1 = 1.0 with every verdict judged outside, empty completions 0.0 (the ``LM`` here
only replays fixed completions). Every problem, canonical and ``return None``, is the
slow tier's ``tests/slow/evaluation/test_humaneval_sweep.py``."""

from __future__ import annotations

from pathlib import Path

from lm_eval.api.model import LM

from afm.evaluation.parity import run_tasks
from afm.evaluation.suite import BuildContext, build_task_configs


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
    assert out["results"]["humaneval"]["judged_outside,create_test"] == 1.0
    assert out["results"]["humaneval"]["unjudgeable,create_test"] == 0.0
    assert out["n-samples"]["humaneval"]["effective"] == 164
    out = run_tasks(FixedCompletions({}), configs, limit=40)
    assert out["results"]["humaneval"]["pass_at_1,create_test"] == 0.0


EXIT_ONLY = {
    "raise-systemexit": "    raise SystemExit\n",
    "os-exit-0": "    import os\n    os._exit(0)\n",
    "sys-exit-false": "    import sys\n    sys.exit(False)\n",
    "exit-code-wraps": "    import os\n    os._exit(256)\n",
    "atexit-exit-0": "    import atexit, os\n    atexit.register(os._exit, 0)\n    return None\n",
}


def test_completions_that_only_exit_score_zero(shared_eval: Path) -> None:
    from afm.evaluation.local_data import read_file

    problems = read_file(shared_eval / "benchmarks" / "humaneval.jsonl.gz")[:30]
    configs = build_task_configs(["humaneval"], BuildContext(data_dir=str(shared_eval / "benchmarks")))
    for name, body in EXIT_ONLY.items():
        out = run_tasks(FixedCompletions({p["prompt"]: body for p in problems}), configs, limit=30)
        assert out["results"]["humaneval"]["pass_at_1,create_test"] == 0.0, name


REFERENCE = """
import sys
source = sys.stdin.read()
try:
    exec(source, {})
    verdict = "passed"
except BaseException:
    verdict = "failed"
sys.stdout.write("\\n<<reference:" + verdict + ">>")
sys.stdout.flush()
"""


def _reference_verdict(program: str, timeout_s: float = 10.0) -> bool:
    """lm-eval's rule (HF ``code_eval``): ``exec`` the program in a child process; it
    passes when ``exec`` returned, any exception (``SystemExit`` too) fails, no result
    (the child ended some other way) fails. Unsandboxed, in a fresh interpreter: only for
    the known programs below."""
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-I", "-c", REFERENCE], input=program, capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return done.stdout.endswith("<<reference:passed>>")


def test_verdicts_match_lm_evals_reference_rule(shared_eval: Path) -> None:
    """Same predictions, same verdicts as the reference rule: canonical solutions, a wrong
    body, and the exit-only bodies (which the reference also fails)."""
    from afm.evaluation.code_metrics import check_all, test_program
    from afm.evaluation.local_data import read_file

    problems = read_file(shared_eval / "benchmarks" / "humaneval.jsonl.gz")[:20]
    bodies = ["canonical", "    return None\n", *EXIT_ONLY.values()]
    pairs = [(p["prompt"] + (p["canonical_solution"] if b == "canonical" else b), test_program(p))
             for p in problems for b in bodies]
    ours = check_all(pairs)
    reference = [_reference_verdict(f"{prog}\n{test}\n") for prog, test in pairs]
    assert ours == reference
    assert sum(ours) == len(problems)  # exactly the canonical solutions pass
