"""``afm bench sandbox``: what the kernel boundary and unforgeable verdicts cost per program.

HumanEval's canonical solutions (``../shared/eval`` when present, else generated
programs of the same shape) are judged, with the same number of workers:

* **split** (what ``afm eval`` and ``afm synth code`` do): the test is interpreted in the
  evaluator and only the program and its calls run behind the kernel boundary;
* **in the program's process**: program and test in one sandboxed process, the harness's
  keeper decides (the mode for tests that do not split; the previous default);
* both with weak isolation (process limits only);

next to the baseline every harness pays anyway: one fresh, unisolated ``python -I``
process per program (what lm-eval's ``code_eval`` rule needs). Every mode must agree on
every verdict. Record the load average (``uptime``) with the figures.
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from afm.app.bench.common import BenchOptions, Comparison

GOAL = "within 2x of a bare process per program"
BARE = "a bare python -I process per program"


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


def _rate(fn, pairs: list[tuple[str, str]], workers: int) -> tuple[float, list[bool]]:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        verdicts = list(pool.map(fn, pairs))
    return len(pairs) / (time.perf_counter() - start), verdicts


def bench_sandbox(opts: BenchOptions) -> list[Comparison]:
    from afm.evaluation import code_metrics
    from afm.sandbox import SandboxPolicy, kernel_boundary, process

    pairs = _programs(opts)[: 40 if opts.quick else None]
    workers = code_metrics.WORKERS
    bare, expected = _rate(_bare, pairs, workers)
    rows = []
    boundaries = [("behind the kernel boundary", kernel_boundary(), code_metrics.POLICY)] \
        if kernel_boundary().kind == "kernel" else []
    boundaries.append(("with weak isolation (process limits only)", process.Boundary("weak", "host", "benchmark"),
                       SandboxPolicy(allow_weak_isolation=True)))
    for where, boundary, policy in boundaries:
        for mode, split in (("split: judged in the evaluator", True), ("in the program's process", False)):
            def one(pt: tuple[str, str], b=boundary, p=policy, s=split) -> bool:
                if s:
                    from afm.sandbox import judge

                    result, _ = judge.run_split(b, pt[0], pt[1], p)
                    if result is not None:
                        return result.passed
                return process.run_in(b, pt[0], p, test=pt[1]).passed

            rate, verdicts = _rate(one, pairs, workers)
            if verdicts != expected:
                wrong = [i for i, (a, b) in enumerate(zip(verdicts, expected)) if a != b]
                raise AssertionError(f"{mode} {where} disagrees with a bare process on programs {wrong[:10]}")
            rows.append(Comparison(f"programs/s {where}, {mode} ({len(pairs)} programs, {workers} workers)",
                                   rate, bare, BARE, "prog/s", GOAL if boundary.kind == "kernel" else ""))
    return rows


BENCHMARKS = {"sandbox": bench_sandbox}
