"""Runs die with their evaluator: what each run leaves is known to a process that
outlives the evaluator, and what an earlier evaluator left is removed at the next start.

Three layers, so that a killed (``SIGKILL``), crashed (a segfault) or interrupted
evaluator leaves no process, cgroup or ``/tmp/afm-sandbox-*`` directory behind:

* **the kernel**: every sandboxed run is started with a parent-death signal
  (``setpriv --pdeathsig`` before ``unshare``; the weak path's reaper sets its own), so the
  run's first process dies with the evaluator's thread that started it, and with it the
  run's PID namespace (kernel path) or the reaper's descendants (weak path);
* **the janitor** (``janitor.py``): one process per evaluator, started on first use,
  told of each run's process group, cgroups and directory when it starts and when it
  ends. It reads end-of-file when the evaluator dies however it dies, and removes what is
  still listed;
* **the next start** (:func:`sweep_stale`): directories and cgroups named after an
  evaluator process that no longer exists (``afm-sandbox-<pid>-*``, ``afm-run-<pid>-*``)
  are removed the first time this process starts a run, for what no janitor could (the
  janitor itself killed).

An interrupted evaluator (``SIGINT``: Ctrl-C) stops judging at once rather than waiting
for the runs in flight and those queued behind them: :func:`watch_interrupts` (called
from the main thread) chains Python's ``SIGINT`` handler and the interpreter's shutdown to
``STOPPING``, on which every run in flight is ended and no new one starts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import afm.sandbox.cgroup as cgroup
from afm.sandbox.isolation import python

JANITOR = (Path(__file__).resolve().parent / "janitor.py").read_text(encoding="utf-8")
WORKDIR_PREFIX = "afm-sandbox-"
_LOCK = threading.Lock()
_STATE: dict = {"pid": None, "janitor": None, "swept": None, "watching": False}
STOPPING = threading.Event()


def watch_interrupts() -> None:
    """Set ``STOPPING`` on Ctrl-C and when the interpreter shuts down (from the main
    thread only, once; Python's own handler still raises KeyboardInterrupt after)."""
    if _STATE["watching"] or threading.current_thread() is not threading.main_thread():
        return
    _STATE["watching"] = True
    register = getattr(threading, "_register_atexit", None)  # before non-daemon threads are joined
    if register is not None:
        register(STOPPING.set)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        def interrupted(signum, frame):
            STOPPING.set()
            signal.default_int_handler(signum, frame)

        signal.signal(signal.SIGINT, interrupted)


class Janitor:
    """The evaluator's end of the janitor's pipe."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([python(), "-I", "-S", "-B", "-c", JANITOR], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                     close_fds=True)
        self.fd = self.proc.stdin.fileno()
        self.lock = threading.Lock()

    def _send(self, line: str) -> None:
        data = line.encode("utf-8") + b"\n"
        with self.lock:
            try:
                while data:
                    data = data[os.write(self.fd, data):]
            except OSError:  # the janitor is gone: the next start sweeps instead
                pass

    def note(self, token: str, **entry) -> None:
        self._send(f"+ {token} {json.dumps(entry)}")

    def forget(self, token: str) -> None:
        self._send(f"- {token}")


def janitor() -> Janitor | None:
    """This process's janitor (started on first use; a forked child gets its own)."""
    with _LOCK:
        if _STATE["pid"] != os.getpid():
            _STATE["pid"] = os.getpid()
            try:
                _STATE["janitor"] = Janitor()
            except OSError:
                _STATE["janitor"] = None
        return _STATE["janitor"]


def make_workdir() -> str:
    """A run's directory, named after this process (what :func:`sweep_stale` goes by)."""
    sweep_stale()
    path = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")
    os.chmod(path, 0o700)
    return path


def _dead(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True
    except PermissionError:
        return False


def _owner(name: str, prefix: str) -> int | None:
    head = name[len(prefix):].partition("-")[0]
    return int(head) if name.startswith(prefix) and head.isdigit() else None


def sweep_stale() -> list[str]:
    """Remove the directories and cgroups of runs whose evaluator no longer exists
    (once per process); returns what was removed."""
    with _LOCK:
        if _STATE["swept"] == os.getpid():
            return []
        _STATE["swept"] = os.getpid()
    removed = []
    tmp = tempfile.gettempdir()
    try:
        names = os.listdir(tmp)
    except OSError:
        names = []
    for name in names:
        pid = _owner(name, WORKDIR_PREFIX)
        if pid is not None and _dead(pid):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
            removed.append(os.path.join(tmp, name))
    found = cgroup.support()
    for parent in {found.memory_parent, found.pids_parent} - {""}:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            pid = _owner(name, cgroup.RUN_PREFIX)
            if pid is not None and _dead(pid):
                cgroup.remove_stale(os.path.join(parent, name))
                removed.append(os.path.join(parent, name))
    return removed


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
