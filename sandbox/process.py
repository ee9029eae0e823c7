"""Sandboxed processes from the evaluator's side: start one behind the boundary, feed
its orders, read its output under a cap, enforce the wall clock on the whole process
tree, and end it with nothing left behind; and :func:`run_program`, a program alone.

The evaluator never parses what a program writes beyond a capped line on a channel of
its own (the program alone: ``{"ready": true}``; a test: the referee's verdict,
``judge.py``). Output is read as it arrives and only a bounded tail is kept; past
``max_output_bytes`` (all processes of a run together) the run is stopped. At the
deadline the process groups are killed (behind the kernel boundary, killing one ends its
PID namespace and so every process the program started), the run's cgroups are emptied
where there are some, then what is left in the pipes is read. When :meth:`Sandboxed.end`
returns, no process of the run remains; if the evaluator dies first, the parent-death
signal, the janitor and the next start see to it (``cleanup.py``).
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

import afm.sandbox.cgroup as cgroup
import afm.sandbox.cleanup as cleanup
from afm.sandbox.isolation import ENV, Boundary, kernel_command, orders_line, weak_command
from afm.sandbox.policy import MAX_HASH_SEED, RunResult, SandboxPolicy

KEEP_CHARS = 10_000  # tail of stdout/stderr kept for the caller
SETUP_FAILED = 125
GRACE_S = 5.0  # after a kill, how long pipes may take to close
LEFTOVER_GRACE_S = 0.5  # after the first process ended, how long leftovers may hold the pipes
READY_CAP = 256
CANDIDATE = ("plain", "channel", "harness")
KILLED_BY_CPU = (-signal.SIGXCPU, 128 + signal.SIGXCPU)  # RLIMIT_CPU's signal (the launcher adds 128)


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


def hash_seed(policy: SandboxPolicy) -> int:
    return policy.hash_seed if policy.hash_seed is not None else secrets.randbelow(MAX_HASH_SEED + 1)


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
    """One process tree behind ``boundary``: :meth:`start`, then :func:`pump` (with the
    other processes of the run), then :meth:`end`. With ``channel_cap``, a pipe of its own
    to the evaluator whose first ``channel_cap`` bytes are kept in ``channel``."""

    def __init__(self, boundary: Boundary, policy: SandboxPolicy, *, channel_cap: int = 0, seed: int = 0) -> None:
        self.boundary, self.policy, self.channel_cap, self.seed = boundary, policy, channel_cap, seed
        self.started = time.perf_counter()
        self.deadline = self.started + policy.timeout_s
        self.out, self.err, self.channel = _Tail(), _Tail(), bytearray()
        self.proc: subprocess.Popen | None = None
        self.rc: int | None = None
        self.start_error = ""
        self.memory_exceeded = False
        self.open: dict[int, Callable[[bytes], None]] = {}
        self._pending = bytearray()
        self._channel_fd = -1
        self._workdir = ""
        self._group: cgroup.RunGroup | None = None
        self._token = secrets.token_hex(8)
        self._ended = False

    def layers(self) -> tuple[str, ...]:
        return self.boundary.layers(self.policy)

    def start(self, orders: dict, entry: str, modules: tuple[str, ...], *, pass_fds: Sequence[int] = (),
              channel_key: str = "") -> bool:
        """Start the process and queue its orders (one line on stdin, then stdin closes).
        False when it could not start (``start_error`` says why)."""
        if cleanup.STOPPING.is_set():
            self.start_error = "the evaluator is stopping (interrupted)"
            return False
        janitor = cleanup.janitor()
        self._workdir = cleanup.make_workdir()
        channel_w = -1
        try:
            self._group = cgroup.create(self.policy)
        except OSError as exc:
            self.start_error = f"sandbox could not create the run's cgroup: {exc}"
            return False
        if janitor is not None:
            janitor.note(self._token, workdir=self._workdir, cgroups=list(self._group.dirs) if self._group else [])
        if self.channel_cap:
            self._channel_fd, channel_w = os.pipe()
            orders = dict(orders, **{channel_key: channel_w})
        fds = [*pass_fds, *([channel_w] if channel_w >= 0 else [])]
        cgroup_fds = self._group.procs_fds() if self._group else []
        env = dict(ENV, PYTHONHASHSEED=str(self.seed))
        if self.boundary.kind == "kernel":
            argv, cwd, root = kernel_command(self.policy, self._workdir, fds, cgroup_fds, env), "/", "/tmp"
        else:
            root, cwd = self._workdir, self._workdir
            env.update(HOME=root, TMPDIR=root)
            argv = weak_command(self.policy, self._workdir, fds, cgroup_fds, env)
        orders = dict(orders, root=root, limits=_limits(self.policy, self.boundary), tripwire=self.policy.tripwire)
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, pass_fds=(*fds, *cgroup_fds),
                                         start_new_session=True)
        except OSError as exc:
            self.start_error = f"sandbox could not start: {exc}"
            return False
        finally:
            if channel_w >= 0:
                os.close(channel_w)
            if self._group is not None:
                self._group.close_fds()
        if janitor is not None:
            janitor.note(self._token, pgid=self.proc.pid)
        os.set_blocking(self.proc.stdin.fileno(), False)
        self._pending += orders_line(orders, entry, modules)
        self.open = {self.proc.stdout.fileno(): self.out.add, self.proc.stderr.fileno(): self.err.add}
        if self._channel_fd >= 0:
            self.open[self._channel_fd] = self._take_channel
        return True

    def _take_channel(self, chunk: bytes) -> None:
        self.channel += chunk[: max(0, self.channel_cap - len(self.channel))]

    def write_stdin(self) -> bool:
        """Write what is queued; True while there is more to write."""
        stdin = self.proc.stdin if self.proc is not None else None
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
        try:
            stdin.close()
        except OSError:
            pass
        return False

    def stdin_fd(self) -> int | None:
        stdin = self.proc.stdin if self.proc is not None else None
        return None if stdin is None or stdin.closed else stdin.fileno()

    def exited(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def end(self) -> int | None:
        """Kill whatever is left, collect the remaining output, remove every trace."""
        if self._ended:
            return self.rc
        self._ended = True
        try:
            if self.proc is None:
                return None
            if self.boundary.kind != "kernel" and self._group is None:  # with a cgroup, its kill reaches all
                _ask_reaper_to_end(self.proc)
            _kill(self.proc)
            if self._group is not None:
                self._group.kill_all()
            if self.open:
                pump([self], deadline=time.perf_counter() + GRACE_S, drain=True)
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
            janitor = cleanup.janitor()
            if janitor is not None:
                janitor.forget(self._token)

    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def killed_by_cpu(self) -> bool:
        return self.rc in KILLED_BY_CPU

    def setup_failed(self) -> bool:
        return self.rc == SETUP_FAILED and "sandbox:" in self.err.text()


def pump(boxes: Sequence[Sandboxed], *, deadline: float, until: Callable[[], bool] | None = None,
         drain: bool = False) -> str:
    """Write the orders and read every pipe of ``boxes`` until ``until()`` holds
    (``until``), every pipe closed (``eof``), the deadline (``timeout``), more output than
    allowed from all of them together (``output``), the evaluator interrupted
    (``stopped``), or, when every first process has ended but something left behind
    still holds a pipe, shortly after (``exited``).
    ``drain`` (after a kill): read what is left, caps no longer stop it."""
    cap = max(b.policy.max_output_bytes for b in boxes)
    sel = selectors.DefaultSelector()
    owners: dict[int, Sandboxed] = {}
    for box in boxes:
        for fd in box.open:
            sel.register(fd, selectors.EVENT_READ)
            owners[fd] = box
    writing: dict[int, int] = {}  # id(box) -> its stdin, while orders are still queued
    exited_at = None
    try:
        while True:
            if until is not None and until():
                return "until"
            for box in () if drain else boxes:
                fd = box.stdin_fd()
                more = fd is not None and box.write_stdin()
                if more and id(box) not in writing:
                    sel.register(fd, selectors.EVENT_WRITE)
                    writing[id(box)] = fd
                elif not more and id(box) in writing:
                    sel.unregister(writing.pop(id(box)))
            if not owners:
                return "eof"
            now = time.perf_counter()
            left = deadline - now
            if left <= 0:
                return "timeout"
            if not drain and cleanup.STOPPING.is_set():
                return "stopped"
            if exited_at is None and all(b.exited() for b in boxes):
                exited_at = now
            if exited_at is not None and now - exited_at > LEFTOVER_GRACE_S:
                return "exited"
            for key, _ in sel.select(timeout=min(left, 0.1 if exited_at is not None else 0.5)):
                box = owners.get(key.fd)
                if box is None:
                    continue  # a stdin became writable: handled at the top of the loop
                try:
                    chunk = os.read(key.fd, 1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fd)
                    del owners[key.fd]
                    box.open.pop(key.fd, None)
                    continue
                box.open[key.fd](chunk)
                if not drain and sum(b.out.total + b.err.total for b in boxes) > cap:
                    return "output"
    finally:
        sel.close()


def _ask_reaper_to_end(proc: subprocess.Popen) -> None:
    """A weak run's first process, the reaper, kills and reaps what the program detached
    when asked (SIGTERM); killed outright, it would leave those to init where there is no
    cgroup to end them."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=GRACE_S)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the run's process group: ``unshare``'s ``--kill-child`` then takes the
    namespace's first process, and the kernel every other process in it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_program(boundary: Boundary, program: str, policy: SandboxPolicy) -> RunResult:
    """The program alone, behind an already chosen ``boundary``: passed when it ran to its
    end (an exit of any kind, ``os._exit(0)`` included, is not that)."""
    box = Sandboxed(boundary, policy, channel_cap=READY_CAP, seed=hash_seed(policy))
    try:
        if not box.start({"program": program, "serve": False}, "harness", CANDIDATE, channel_key="to_referee"):
            return RunResult("error", None, "", box.start_error, box.seconds(), box.layers(), "could not start",
                             cause="setup")
        first = pump([box], deadline=box.deadline)
    finally:
        box.end()
    status, reason, cause = _program_verdict(first, box)
    return RunResult(status, box.rc, box.out.text(), box.err.text(), box.seconds(), box.layers(), reason,
                     cause=cause)


def _ready(box: Sandboxed) -> bool:
    line = bytes(box.channel).partition(b"\n")[0]
    try:
        return json.loads(line) == {"ready": True}
    except ValueError:
        return False


def _program_verdict(ended: str, box: Sandboxed) -> tuple[str, str, str]:
    if ended == "stopped":
        return "error", "the evaluator was interrupted", "stopped"
    if ended == "timeout":
        return "timeout", "over the wall-clock limit", "timeout"
    if ended == "output":
        return "failed", "over the output limit", "output"
    if _ready(box):
        return "passed", "", ""
    if box.memory_exceeded:
        return "failed", "over the run's memory limit", "memory"
    if box.setup_failed():
        return "error", "sandbox setup failed", "setup"
    if box.killed_by_cpu():
        return "timeout", "over the CPU limit", "timeout"
    if box.rc == 0:
        return "failed", "exited before the program finished", "exited"
    if box.rc == 1:
        return "failed", "raised an exception or exited", "error"
    return "failed", f"ended with status {box.rc}", "exited"
