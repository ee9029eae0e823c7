"""``afm bench sandbox``: what the kernel boundary costs per program.

HumanEval's canonical solutions (``../shared/eval`` when present, else generated
programs of the same shape) run through ``code_metrics.check_all`` behind the kernel
boundary and with weak isolation, next to the baseline every harness pays anyway: one
fresh, unisolated ``python -I`` process per program (what lm-eval's ``code_eval`` rule
needs), with the same number of workers.
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from afm.app.bench.common import BenchOptions, Comparison

GOAL = "within 2x of a bare process per program"


def _programs(opts: BenchOptions) -> list[tuple[str, str]]:
    if opts.shared_dir is not None:
        from afm.evaluation.code_metrics import test_program
        from afm.evaluation.local_data import read_file

        problems = read_file(opts.shared_dir / "eval" / "benchmarks" / "humaneval.jsonl.gz")
        return [(p["prompt"] + p["canonical_solution"], test_program(p)) for p in problems]
    return [(f"def f(x):\n    return sorted(x)[{i % 3}]", f"assert f([3, 1, 2, 5]) == {[1, 2, 3][i % 3]}")
            for i in range(164)]


def _bare(pair: tuple[str, str]) -> bool:
    done = subprocess.run([sys.executable, "-I", "-c", f"{pair[0]}\n{pair[1]}\n"], capture_output=True, timeout=30)
    return done.returncode == 0


def _rate(fn, pairs: list[tuple[str, str]], workers: int) -> tuple[float, int]:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        passed = sum(pool.map(fn, pairs))
    return len(pairs) / (time.perf_counter() - start), passed


def bench_sandbox(opts: BenchOptions) -> list[Comparison]:
    from afm.evaluation import code_metrics

    from afm.sandbox import SandboxPolicy, kernel_boundary, process, run_python

    pairs = _programs(opts)[: 40 if opts.quick else None]
    workers = code_metrics.WORKERS
    bare, bare_passed = _rate(_bare, pairs, workers)
    rows = []
    if kernel_boundary().kind == "kernel":
        kernel, passed = _rate(lambda pt: run_python(pt[0], code_metrics.POLICY, test=pt[1]).passed, pairs, workers)
        assert passed == bare_passed, "the sandbox and a bare process disagree"
        rows.append(Comparison(f"programs/s behind the kernel boundary ({len(pairs)} programs, {workers} workers)",
                               kernel, bare, "a bare python -I process per program", "prog/s", GOAL))
    weak_boundary = process.Boundary("weak", "host", "benchmark")
    policy = SandboxPolicy(allow_weak_isolation=True)
    weak, _ = _rate(lambda pt: process.run_in(weak_boundary, pt[0], policy, test=pt[1]).passed, pairs, workers)
    rows.append(Comparison("programs/s with weak isolation (process limits only)", weak, bare,
                           "a bare python -I process per program", "prog/s", ""))
    return rows


BENCHMARKS = {"sandbox": bench_sandbox}
