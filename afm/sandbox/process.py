"""Run one program behind the boundary: feed its orders, read its output under a cap,
enforce the wall clock on the whole process tree, and decide the verdict.

The parent never trusts what the program prints or how it exits. It passes a fresh random
key to the harness on stdin and counts a pass only when that key comes back on a
separate pipe (``harness.py`` writes it after the test returned). Output is read as it
arrives and only a bounded tail is kept; past ``max_output_bytes`` the run is stopped.
At the deadline the process group is killed (behind the kernel boundary, killing it ends
the PID namespace and so every process the program started), then what is left in the
pipes is read. When :func:`run_in` returns, no process of the run remains.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from afm.sandbox.isolation import ENV, Boundary, kernel_command, require, weak_command
from afm.sandbox.policy import RunResult, SandboxPolicy

KEEP_CHARS = 10_000  # tail of stdout/stderr kept for the caller
SETUP_FAILED = 125
GRACE_S = 5.0  # after a kill, how long pipes may take to close
LEFTOVER_GRACE_S = 0.5  # after the first process ended, how long leftovers may hold the pipes


def run_python(program: str, policy: SandboxPolicy | None = None, *, test: str | None = None) -> RunResult:
    """Run ``program`` then ``test`` (Python source) in one namespace under ``policy``.

    Passes only when both ran to the end; an exit of any kind, early or late, is a failure.
    Raises :class:`SandboxUnavailable` when the host cannot isolate and the policy did
    not accept weak isolation; never raises for what the program does."""
    policy = policy or SandboxPolicy()
    return run_in(require(policy), program, policy, test=test)


def _limits(policy: SandboxPolicy, boundary: Boundary) -> list[tuple[str, tuple[int, int]]]:
    nproc = policy.max_processes + 1  # the harness itself
    if boundary.kind == "kernel" and boundary.user == "userns":
        nproc += 1  # the launcher has the same uid there
    if boundary.kind == "weak":  # the limit counts every process of the user
        nproc += _user_process_count()
    cpu = max(1, int(policy.cpu_s))
    return [
        ("RLIMIT_CPU", (cpu, cpu + 1)),
        ("RLIMIT_AS", (policy.memory_bytes, policy.memory_bytes)),
        ("RLIMIT_FSIZE", (policy.max_file_bytes, policy.max_file_bytes)),
        ("RLIMIT_NOFILE", (policy.max_open_files, policy.max_open_files)),
        ("RLIMIT_CORE", (0, 0)),
        ("RLIMIT_NPROC", (nproc, nproc)),
    ]


def _user_process_count() -> int:
    uid, n = os.getuid(), 0
    if not os.path.isdir("/proc"):
        return 64  # no way to count here: leave room for the user's other processes
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                n += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return n


class _Tail:
    """The last ``KEEP_CHARS`` bytes of a stream, and how many bytes it had in all."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > 4 * KEEP_CHARS:
            del self.data[:-KEEP_CHARS]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")[-KEEP_CHARS:]


def run_in(boundary: Boundary, program: str, policy: SandboxPolicy, *, test: str | None) -> RunResult:
    """Run behind an already chosen ``boundary`` (``run_python`` chooses it)."""
    start = time.perf_counter()
    key = secrets.token_hex(32)
    verdict_r, verdict_w = os.pipe()
    workdir = tempfile.mkdtemp(prefix="afm-sandbox-")
    os.chmod(workdir, 0o700)
    if boundary.kind == "kernel":
        argv, cwd, root = kernel_command(policy, workdir, verdict_w), "/", "/tmp"
    else:
        argv, cwd, root = weak_command(), workdir, workdir
    orders = json.dumps({
        "key": key, "verdict_fd": verdict_w, "program": program, "test": test, "root": root,
        "tripwire": policy.tripwire, "limits": _limits(policy, boundary),
    }).encode()
    env = dict(ENV, HOME=root, TMPDIR=root)
    out, err, verdict = _Tail(), _Tail(), bytearray()
    status, reason, rc = "error", "", None
    try:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, pass_fds=(verdict_w,), start_new_session=True)
        except OSError as exc:
            return RunResult("error", None, "", f"sandbox could not start: {exc}",
                             time.perf_counter() - start, boundary.layers(policy), "could not start")
        finally:
            os.close(verdict_w)
        feeder = threading.Thread(target=_feed, args=(proc.stdin, orders), daemon=True)
        feeder.start()
        ended = _pump(proc, verdict_r, out, err, verdict, start + policy.timeout_s, policy.max_output_bytes)
        if ended != "eof":
            _kill(proc)
            _pump(proc, verdict_r, out, err, verdict, time.perf_counter() + GRACE_S, None)
        try:
            rc = proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            _kill(proc)
            rc = proc.wait()
        feeder.join(timeout=GRACE_S)
        status, reason = _verdict(ended, rc, bytes(verdict) == key.encode(), err.text())
    finally:
        os.close(verdict_r)
        shutil.rmtree(workdir, ignore_errors=True)
    return RunResult(status, rc, out.text(), err.text(), time.perf_counter() - start,
                     boundary.layers(policy), reason)


def _feed(stdin, orders: bytes) -> None:
    try:
        stdin.write(orders)
        stdin.close()
    except (BrokenPipeError, ValueError, OSError):
        pass


def _pump(proc: subprocess.Popen, verdict_fd: int, out: _Tail, err: _Tail, verdict: bytearray,
          deadline: float, cap: int | None) -> str:
    """Read every pipe until all close (``eof``), the ``deadline`` (``timeout``), more
    than ``cap`` bytes of output (``output``), or, when the first process has ended but
    something it left behind still holds a pipe (weak isolation only: behind the kernel
    boundary its end takes every process with it), shortly after (``exited``)."""
    sel = selectors.DefaultSelector()
    sinks = {proc.stdout.fileno(): out.add, proc.stderr.fileno(): err.add,
             verdict_fd: lambda b: verdict.extend(b[: max(0, 256 - len(verdict))])}
    for fd in sinks:
        try:
            sel.register(fd, selectors.EVENT_READ)
        except (ValueError, KeyError, OSError):
            pass
    exited_at = None
    try:
        while sel.get_map():
            now = time.perf_counter()
            left = deadline - now
            if left <= 0:
                return "timeout"
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > LEFTOVER_GRACE_S:
                return "exited"
            for k, _ in sel.select(timeout=min(left, 0.1 if exited_at is not None else 0.5)):
                chunk = os.read(k.fd, 1 << 16)
                if not chunk:
                    sel.unregister(k.fd)
                    continue
                sinks[k.fd](chunk)
                if cap is not None and out.total + err.total > cap:
                    return "output"
        return "eof"
    finally:
        sel.close()


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the run's process group: ``unshare``'s ``--kill-child`` then takes the
    namespace's first process, and the kernel every other process in it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _verdict(ended: str, rc: int | None, key_seen: bool, stderr: str) -> tuple[str, str]:
    if ended == "timeout":
        return "timeout", "over the wall-clock limit"
    if ended == "output":
        return "failed", "over the output limit"
    # ended == "eof" or "exited" (leftovers were killed): the key decides
    if key_seen:
        return "passed", ""
    if rc == SETUP_FAILED and "sandbox:" in stderr:
        return "error", "sandbox setup failed"
    if rc in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL):
        return "timeout", "over the CPU limit"
    if rc == 0:
        return "failed", "exited before the test finished"
    if rc == 1:
        return "failed", "raised an exception or exited"
    return "failed", f"ended with status {rc}"
