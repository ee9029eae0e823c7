"""Whole curate's CPU and minor page faults a page under glibc allocator settings, run as a
user runs it: every stage, ``method=blocks``, a decontamination index, one worker, either
in one process (Beam's ``in_memory`` mode) or with the stages in a worker process beside
the launcher (``multi_processing``, ``afm curate``'s default). Each run is a child process;
its CPU and faults are what ``wait4`` reports (the child and every process it reaped: Beam's
workers included, checked against ``perf stat``'s task-clock). Steady state is the
difference of a run on all WARC files and a run on the first one, per page.

    python experiments/page-faults/runner_modes.py CORPUS INDEX --mode multi_processing \\
        --setting 'old={"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}' \\
        --setting 'new={}' --rounds 2

CORPUS holds ``first/`` and ``all/`` folders of WARC files (``afm bench curate --suite
real-pages`` builds them under its workdir: ``curate/real-N-KEY``); INDEX is a
decontamination index (the same bench's ``curate/decontam-index``). A setting is a name and
the environment variables to add; a ``MALLOC_*`` variable set there is kept by
``pipelines/beam/allocator.py`` for every process of the run, so ``old`` above is the
allocator's settings before 2026-12-07 and ``new={}`` its current ones.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CHILD = r'''
import json, sys
from pathlib import Path
from afm.pipelines.curate.pipeline import run_curate
inputs, out, index, mode = sys.argv[1:5]
files = sorted(str(f) for f in Path(inputs).glob("*.warc.gz"))
m = run_curate(files, out, config={"decontaminate": {"params": {"index": index}},
                                   "extract": {"params": {"method": "blocks"}}}, quiet=True,
               pipeline_args=[f"--direct_running_mode={mode}", "--direct_num_workers=1"])
print(json.dumps({"pages": m["totals"]["in"], "kept": m["totals"]["kept"]}))
'''


def run(inputs: str, index: str, mode: str, env: dict[str, str]) -> tuple[int, int, float, int]:
    """(pages, kept, CPU s, minor faults) of one curate run in a child process."""
    out = tempfile.mkdtemp(prefix="page-faults-")
    try:
        with open(f"{out}/stdout", "w+b") as stdout, open(f"{out}/stderr", "w+b") as stderr:
            proc = subprocess.Popen([sys.executable, "-c", CHILD, inputs, out + "/run", index, mode],
                                    stdout=stdout, stderr=stderr, env={**os.environ, **env})
            _, status, usage = os.wait4(proc.pid, 0)  # not proc.wait(): wait4 gives the usage
            proc.returncode = status
            if status:
                stderr.seek(0)
                raise SystemExit(stderr.read().decode()[-3000:])
            stdout.seek(0)
            result = json.loads(stdout.read().decode().strip().splitlines()[-1])
        return result["pages"], result["kept"], usage.ru_utime + usage.ru_stime, usage.ru_minflt
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("index")
    ap.add_argument("--mode", choices=("in_memory", "multi_processing"), default="multi_processing")
    ap.add_argument("--setting", action="append", required=True, help="NAME=JSON of environment variables")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    settings = {s.split("=", 1)[0]: json.loads(s.split("=", 1)[1]) for s in args.setting}
    for r in range(args.rounds):
        for name, env in settings.items():
            a = run(f"{args.corpus}/first", args.index, args.mode, env)
            b = run(f"{args.corpus}/all", args.index, args.mode, env)
            pages = b[0] - a[0]
            print(f"round {r + 1} {name}: {b[0]} pages, {b[1]} kept; steady {1000 * (b[2] - a[2]) / pages:.2f} CPU ms "
                  f"and {(b[3] - a[3]) / pages:.0f} minor faults a page; load {os.getloadavg()[0]:.2f} "
                  f"{time.strftime('%H:%M')}", flush=True)


if __name__ == "__main__":
    main()
