"""One sandboxed process from the evaluator's side: start it behind the boundary, feed
its stdin, read its output under a cap, enforce the wall clock on the whole process
tree, and end it with nothing left behind.

The parent never trusts what the program prints or how it exits. In ``run`` mode
(:func:`run_in`) it passes a fresh random key in the orders and counts a pass only when
that key comes back on a separate pipe (``harness.py`` explains why the program cannot
produce it). In ``serve`` mode (a split test, ``judge.py``) the same pipe carries plain
values and the evaluator judges them. Output is read as it arrives and only a bounded
tail is kept; past ``max_output_bytes`` the run is stopped. At the deadline the process
group is killed (behind the kernel boundary, killing it ends the PID namespace and so
every process the program started), the run's cgroup is emptied where there is one,
then what is left in the pipes is read. When :meth:`Sandboxed.end` returns, no process
of the run remains.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable

from afm.sandbox import cgroup, harness
from afm.sandbox.isolation import ENV, Boundary, kernel_command, weak_command
from afm.sandbox.policy import RunResult, SandboxPolicy

KEEP_CHARS = 10_000  # tail of stdout/stderr kept for the caller
SETUP_FAILED = 125
GRACE_S = 5.0  # after a kill, how long pipes may take to close
LEFTOVER_GRACE_S = 0.5  # after the first process ended, how long leftovers may hold the pipes
VERDICT_CAP = 256


def _limits(policy: SandboxPolicy, boundary: Boundary) -> list[tuple[str, tuple[int, int]]]:
    nproc = policy.max_processes + 1  # the harness itself
    if boundary.kind == "kernel" and boundary.user == "userns":
        nproc += 1  # the launcher has the same uid there
    if boundary.kind == "weak" and os.geteuid() != 0:  # the limit counts every process of the user
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


class Sandboxed:
    """One process tree behind ``boundary``: :meth:`start`, :meth:`send`, :meth:`pump`,
    :meth:`end`. ``channel`` collects what arrives on the verdict/results pipe, up to
    ``channel_cap`` bytes (past it the run is stopped as over its output limit)."""

    def __init__(self, boundary: Boundary, policy: SandboxPolicy, channel_cap: int = VERDICT_CAP) -> None:
        self.boundary, self.policy, self.channel_cap = boundary, policy, channel_cap
        self.started = time.perf_counter()
        self.deadline = self.started + policy.timeout_s
        self.out, self.err, self.channel = _Tail(), _Tail(), bytearray()
        self.proc: subprocess.Popen | None = None
        self.ended: str | None = None  # eof | timeout | output | exited, once pumping stopped for good
        self.rc: int | None = None
        self.start_error = ""
        self.memory_exceeded = False
        self._pending = bytearray()
        self._close_stdin = False
        self._channel_fd = -1
        self._workdir = ""
        self._group: cgroup.RunGroup | None = None

    def layers(self) -> tuple[str, ...]:
        return self.boundary.layers(self.policy)

    def start(self, orders: dict) -> bool:
        """Start the run and queue ``orders`` (JSON, one line). False when it could not
        start (``start_error`` says why)."""
        channel_r, channel_w = os.pipe()
        self._channel_fd = channel_r
        self._workdir = tempfile.mkdtemp(prefix="afm-sandbox-")
        os.chmod(self._workdir, 0o700)
        try:
            self._group = cgroup.create(self.policy)
        except OSError as exc:
            os.close(channel_w)
            self.start_error = f"sandbox could not create the run's cgroup: {exc}"
            return False
        cgroup_fds = self._group.procs_fds() if self._group else []
        if self.boundary.kind == "kernel":
            argv, cwd, root = kernel_command(self.policy, self._workdir, [channel_w], cgroup_fds), "/", "/tmp"
            env = dict(ENV)
        else:
            root, cwd = self._workdir, self._workdir
            env = dict(ENV, HOME=root, TMPDIR=root)
            argv = weak_command(self.policy, self._workdir, [channel_w], cgroup_fds, env)
        orders = dict(orders, root=root, limits=_limits(self.policy, self.boundary),
                      tripwire=self.policy.tripwire)
        orders["verdict_fd" if orders["mode"] == "run" else "results_fd"] = channel_w
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, pass_fds=(channel_w, *cgroup_fds),
                                         start_new_session=True)
        except OSError as exc:
            self.start_error = f"sandbox could not start: {exc}"
            return False
        finally:
            os.close(channel_w)
            if self._group is not None:
                self._group.close_fds()
        os.set_blocking(self.proc.stdin.fileno(), False)
        self.send(json.dumps(orders).encode() + b"\n")
        return True

    def send(self, data: bytes) -> None:
        self._pending += data

    def close_stdin(self) -> None:
        """Close stdin once everything queued has been written."""
        self._close_stdin = True

    def _write_stdin(self) -> bool:
        """Write what is queued; True while the stdin pipe is still open."""
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            return False
        try:
            while self._pending:
                n = os.write(stdin.fileno(), self._pending[: 1 << 16])
                del self._pending[:n]
        except BlockingIOError:
            return True
        except OSError:  # the other end is gone: nothing more to say
            self._pending.clear()
        if not self._pending and self._close_stdin:
            try:
                stdin.close()
            except OSError:
                pass
            return False
        return True

    def pump(self, until: Callable[[], bool] | None = None, *, drain: bool = False) -> str:
        """Read every pipe (and write stdin) until ``until()`` holds (``until``), all
        pipes close (``eof``), the deadline (``timeout``), more output than allowed
        (``output``), or, when the first process has ended but something it left behind
        still holds a pipe (weak isolation only), shortly after (``exited``). ``drain``
        (after a kill): read what is left, caps no longer stop it."""
        if self.ended is not None and not drain:
            return self.ended
        cap = self.policy.max_output_bytes
        sel = selectors.DefaultSelector()
        sinks = {self.proc.stdout.fileno(): self.out.add, self.proc.stderr.fileno(): self.err.add,
                 self._channel_fd: self.channel.extend}
        for fd in sinks:
            sel.register(fd, selectors.EVENT_READ)
        stdin_fd = self.proc.stdin.fileno() if self.proc.stdin and not self.proc.stdin.closed else None
        exited_at = None
        try:
            while True:
                if until is not None and until():
                    return "until"
                if stdin_fd is not None:
                    writing = bool(self._pending) or self._close_stdin
                    if writing and not self._write_stdin():
                        stdin_fd = None
                    elif self._pending:
                        if stdin_fd not in sel.get_map():
                            sel.register(stdin_fd, selectors.EVENT_WRITE)
                    elif stdin_fd in sel.get_map():
                        sel.unregister(stdin_fd)
                    if stdin_fd is None:
                        try:
                            sel.unregister(self.proc.stdin.fileno())
                        except (KeyError, ValueError):
                            pass
                if not any(fd in sinks for fd in sel.get_map()):
                    return self._stop("eof")
                now = time.perf_counter()
                left = self.deadline - now
                if left <= 0:
                    return self._stop("timeout")
                if exited_at is None and self.proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > LEFTOVER_GRACE_S:
                    return self._stop("exited")
                for k, _ in sel.select(timeout=min(left, 0.1 if exited_at is not None else 0.5)):
                    if k.fd not in sinks:
                        continue  # stdin became writable: handled at the top of the loop
                    chunk = os.read(k.fd, 1 << 16)
                    if not chunk:
                        sel.unregister(k.fd)
                        continue
                    if k.fd == self._channel_fd and len(self.channel) + len(chunk) > self.channel_cap:
                        self.channel.extend(chunk[: max(0, self.channel_cap - len(self.channel))])
                        if drain:
                            continue
                        return self._stop("output")
                    sinks[k.fd](chunk)
                    if not drain and self.out.total + self.err.total > cap:
                        return self._stop("output")
        finally:
            sel.close()

    def _stop(self, why: str) -> str:
        self.ended = why
        return why

    def end(self) -> int | None:
        """Kill whatever is left, collect the remaining output, remove every trace."""
        try:
            if self.proc is None:
                return None
            if self.ended != "eof":
                _kill(self.proc)
                if self._group is not None:
                    self._group.kill_all()
                self.deadline = time.perf_counter() + GRACE_S
                self._close_stdin, self._pending = True, bytearray()
                self.pump(drain=True)
            try:
                self.rc = self.proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                _kill(self.proc)
                self.rc = self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            return self.rc
        finally:
            if self._group is not None:
                self.memory_exceeded = self._group.memory_exceeded()
                self._group.close()
            if self._channel_fd >= 0:
                os.close(self._channel_fd)
                self._channel_fd = -1
            if self._workdir:
                shutil.rmtree(self._workdir, ignore_errors=True)

    def seconds(self) -> float:
        return time.perf_counter() - self.started


def run_in(boundary: Boundary, program: str, policy: SandboxPolicy, *, test: str | None) -> RunResult:
    """Program then test in one process behind an already chosen ``boundary``; the
    harness's key decides (``run_python`` chooses the boundary and the mode)."""
    key = secrets.token_hex(32)
    box = Sandboxed(boundary, policy)
    if not box.start({"mode": "run", "key": key, "program": program, "test": test, "finish_line": _finish_line()}):
        box.end()
        return RunResult("error", None, "", box.start_error, box.seconds(), box.layers(), "could not start",
                         judged="inside" if test else "")
    box.close_stdin()
    first = box.pump()
    rc = box.end()
    status, reason = _verdict(first, rc, bytes(box.channel) == key.encode(), box.err.text(),
                              box.memory_exceeded)
    if box.memory_exceeded and status != "passed" and "memory" not in reason:
        reason += "; a process of the run was killed over the run's memory limit"
    return RunResult(status, rc, box.out.text(), box.err.text(), box.seconds(), box.layers(), reason,
                     judged="inside" if test else "")


@functools.cache
def _finish_line() -> int:
    """The line of the harness's ``run`` that calls ``finish`` (the keeper checks it),
    found once here rather than in every sandboxed process."""
    return harness.call_line(harness.run, "finish")


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the run's process group: ``unshare``'s ``--kill-child`` then takes the
    namespace's first process, and the kernel every other process in it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _verdict(ended: str, rc: int | None, key_seen: bool, stderr: str, memory_exceeded: bool) -> tuple[str, str]:
    if ended == "timeout":
        return "timeout", "over the wall-clock limit"
    if ended == "output":
        return "failed", "over the output limit"
    # ended == "eof" or "exited" (leftovers were killed): the key decides
    if key_seen:
        return "passed", ""
    if memory_exceeded:
        return "failed", "over the run's memory limit"
    if rc == SETUP_FAILED and "sandbox:" in stderr:
        return "error", "sandbox setup failed"
    if rc in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL):
        return "timeout", "over the CPU limit"
    if rc == 0:
        return "failed", "exited before the test finished"
    if rc == 1:
        return "failed", "raised an exception or exited"
    return "failed", f"ended with status {rc}"
