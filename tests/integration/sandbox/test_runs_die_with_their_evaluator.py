"""An evaluator killed in the middle of judging (SIGKILL, SIGINT, a segfault) leaves no
process, no cgroup and no ``/tmp/afm-sandbox-*`` directory: the runs' parent-death
signals, the janitor and (for what neither could reach) the next start see to it.

Each case starts an evaluator in a subprocess, two workers judging programs that detach
a ``sleep`` (a new session, a double fork) and then hang, kills the evaluator once the
runs are up, and checks the host. Both boundaries; with and without cgroups (without one,
nothing but the reaper's parent-death signal keeps a weak run's detached process)."""

from __future__ import annotations

import glob
import os
import secrets
import signal
import subprocess
import sys
import time

import pytest

from afm.sandbox import kernel_boundary

EVALUATOR = """
import signal
from concurrent.futures import ThreadPoolExecutor
# Ctrl-C as in a terminal: a shell's background job (a CI runner may be one) starts its
# children with SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
from afm.sandbox import Boundary, SandboxPolicy, run as front, run_python
if {weak!r}:
    front.kernel_boundary.results[()] = Boundary("weak", "host", "test")
    front.accept_weak_isolation()
program = {program!r}
policy = SandboxPolicy(timeout_s=120, cpu_s=100, tripwire=False)
front.require(policy)  # from the main thread, as afm eval and afm synth code do before any run
print("started", flush=True)
with ThreadPoolExecutor(2) as pool:
    list(pool.map(lambda _: run_python(program, policy, test="assert f()"), range(2)))
"""


def _alive_with(command: str) -> list[int]:
    """Processes whose command line is ``command`` (arguments joined by spaces)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if fh.read().rstrip(b"\0").replace(b"\0", b" ") == command.encode():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _left(pid: int, token: str) -> tuple[list, list, list]:
    sleeping = _alive_with(f"sleep {token}")
    dirs = glob.glob(f"/tmp/afm-sandbox-{pid}-*")
    cgroups = glob.glob(f"/sys/fs/cgroup/**/afm-run-{pid}-*", recursive=True)
    return sleeping, dirs, cgroups


CASES = [("kernel", "SIGKILL", "on"), ("weak", "SIGKILL", "off"),
         *[pytest.param(b, s, c, marks=pytest.mark.slow) for b in ("kernel", "weak")
           for s in ("SIGKILL", "SIGINT", "SIGSEGV") for c in ("on", "off")
           if (b, s, c) not in (("kernel", "SIGKILL", "on"), ("weak", "SIGKILL", "off"))]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, cgroups and parent-death signals are Linux's")
@pytest.mark.parametrize("boundary, sig, cgroups", CASES)
def test_a_killed_evaluator_leaves_nothing_behind(boundary: str, sig: str, cgroups: str) -> None:
    if boundary == "kernel" and kernel_boundary().kind != "kernel":
        pytest.skip(f"no kernel boundary here: {kernel_boundary().reason}")
    token = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"
    program = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
               f"        os.execv('/bin/sleep', ['sleep', '{token}'])\n    os._exit(0)\n"
               "def f():\n    time.sleep(600)\n")
    env = dict(os.environ, **({"AFM_SANDBOX_CGROUP": "off"} if cgroups == "off" else {}))
    proc = subprocess.Popen([sys.executable, "-c", EVALUATOR.format(weak=boundary == "weak", program=program)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while len(_left(proc.pid, token)[0]) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_left(proc.pid, token)[0]) == 2, "the runs did not start"
        time.sleep(1.0)  # the referees are waiting on the programs now
        os.kill(proc.pid, getattr(signal, sig))
        proc.wait(timeout=60)
        deadline = time.monotonic() + 20
        while any(_left(proc.pid, token)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _left(proc.pid, token) == ([], [], [])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
