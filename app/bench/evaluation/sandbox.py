"""``afm bench sandbox``: what a verdict no program can forge costs per program.

HumanEval's canonical solutions with their tests (``../shared/eval`` when present, else
generated programs of the same shape) are judged with the same number of workers:

* **this design**: each test in two sandboxed processes, the program's and the
  referee's (``sandbox/judge.py``), behind the kernel boundary and with weak isolation;
* **the previous design** (commit ``PREVIOUS``: a split test interpreted in the evaluator,
  a test that does not split in the program's process), run from that commit in a
  subprocess of this benchmark, same programs, same workers, same run, when the
  repository's history has it; otherwise its figure as recorded before this design
  (``RECORDED``, not this run);
* the baseline every harness pays anyway: one fresh, unisolated ``python -I`` process
  per program (what lm-eval's ``code_eval`` rule needs).

Every mode must agree on every verdict. Record the load average (``uptime``) with the
figures.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from afm.app.bench.common import BenchOptions, Comparison

GOAL = "within 3x of a bare process per program"
BARE = "a bare python -I process per program"
PREVIOUS = "5a8d677"
# programs/s of the previous design on the 164 canonical programs, 2 workers, measured with
# `afm bench sandbox` at PREVIOUS on this 2-core box just before this design (load 6.9-8.2)
RECORDED = {"kernel": 10.47, "weak": 13.96, "bare": 12.32}
WORKLOAD = """
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from afm.sandbox import Boundary, SandboxPolicy, run as front, run_python
pairs, workers, weak = json.load(sys.stdin)
if weak:
    front.kernel_boundary.results[()] = Boundary("weak", "host", "benchmark")
policy = SandboxPolicy(timeout_s=10.0, cpu_s=10, allow_weak_isolation=bool(weak))
start = time.perf_counter()
with ThreadPoolExecutor(workers) as pool:
    verdicts = list(pool.map(lambda pt: run_python(pt[0], policy, test=pt[1]).passed, pairs))
print(json.dumps({"rate": len(pairs) / (time.perf_counter() - start), "verdicts": verdicts}))
"""


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


def previous_design(workdir: Path) -> Path | None:
    """A directory with the previous design's ``afm`` package (core and sandbox), taken
    from the repository's history, or None where there is none."""
    repo = Path(__file__).resolve().parents[3]
    if shutil.which("git") is None or not (repo / ".git").exists():
        return None
    root = workdir / f"sandbox-{PREVIOUS}"
    if (root / "afm" / "sandbox" / "judge.py").exists():
        return root
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "previous.tar"
        done = subprocess.run(["git", "-C", str(repo), "archive", "-o", str(archive), PREVIOUS, "afm", "sandbox"],
                              capture_output=True)
        if done.returncode != 0:
            return None
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(root, filter="data")
    (root / "sandbox").rename(root / "afm" / "sandbox")
    return root


def _measure_previous(root: Path, pairs: list[tuple[str, str]], workers: int, weak: bool) -> tuple[float, list]:
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-c", WORKLOAD], input=json.dumps([pairs, workers, weak]), env=env,
                          capture_output=True, text=True, timeout=3600, cwd=str(root))
    if done.returncode != 0:
        raise RuntimeError(f"the previous design did not run: {done.stderr[-1000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["rate"], out["verdicts"]


def bench_sandbox(opts: BenchOptions) -> list[Comparison]:
    from afm.evaluation import code_metrics
    from afm.sandbox import Boundary, SandboxPolicy, kernel_boundary
    from afm.sandbox.judge import run_test

    pairs = _programs(opts)[: 40 if opts.quick else None]
    workers = code_metrics.WORKERS
    bare, expected = _rate(_bare, pairs, workers)
    previous = previous_design(Path(opts.workdir))
    rows = []
    where = [("kernel", "behind the kernel boundary", kernel_boundary(), code_metrics.POLICY)] \
        if kernel_boundary().kind == "kernel" else []
    where.append(("weak", "with weak isolation (process limits only)", Boundary("weak", "host", "benchmark"),
                  SandboxPolicy(allow_weak_isolation=True)))
    for key, label, boundary, policy in where:
        rate, verdicts = _rate(lambda pt, b=boundary, p=policy: run_test(b, pt[0], pt[1], p).passed, pairs, workers)
        if verdicts != expected:
            wrong = [i for i, (a, b) in enumerate(zip(verdicts, expected)) if a != b]
            raise AssertionError(f"the referee {label} disagrees with a bare process on programs {wrong[:10]}")
        what = f"programs/s {label}, judged by the referee ({len(pairs)} programs, {workers} workers)"
        rows.append(Comparison(what, rate, bare, BARE, "prog/s", GOAL if key == "kernel" else ""))
        if previous is not None:
            before, verdicts = _measure_previous(previous, pairs, workers, weak=key == "weak")
            if verdicts != expected:
                raise AssertionError(f"the previous design {label} disagrees with a bare process")
            rows.append(Comparison(f"programs/s {label}: this design vs the previous one (commit {PREVIOUS}, "
                                   f"same run)", rate, before, f"the previous design ({PREVIOUS})", "prog/s"))
        else:
            rows.append(Comparison(f"programs/s {label}: this design vs the previous one as recorded before it "
                                   f"(commit {PREVIOUS}; not this run: no git history here)", rate, RECORDED[key],
                                   f"the previous design ({PREVIOUS}, recorded)", "prog/s"))
    return rows


BENCHMARKS = {"sandbox": bench_sandbox}
