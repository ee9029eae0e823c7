"""The janitor: a process that outlives the evaluator and removes what its runs leave
(stdlib only, run as ``-c`` by ``cleanup.py``, once per evaluator process).

The evaluator writes one line per change on the janitor's stdin: ``+ TOKEN {json}`` when
a run starts (its process group, its cgroup directories, its working directory) and
``- TOKEN`` when the run ended cleanly. The janitor holds the only other end of that pipe
besides the evaluator, so when the evaluator dies in any way (SIGKILL, a segfault, the
end of an interrupted ``afm eval``) the janitor reads end-of-file and, for every run still
listed: asks the run's process group to end (``SIGTERM``: a weak run's reaper then kills
what its program detached), kills it, kills everything in the run's cgroups and removes
them, and removes the working directory. Then it exits. It ignores ``SIGINT`` and
``SIGHUP`` (a Ctrl-C in the evaluator's terminal is the evaluator's to handle) and cleans
up on ``SIGTERM``.
"""

import errno
import json
import os
import shutil
import signal
import time

ENTRIES: dict = {}


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return ""


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def empty_cgroup(directory: str) -> None:
    try:
        with open(os.path.join(directory, "cgroup.kill"), "w") as fh:
            fh.write("1")
    except OSError:
        pass
    for _ in range(400):
        pids = [int(p) for p in _read(os.path.join(directory, "cgroup.procs")).split() if p.isdigit()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)
    for _ in range(400):
        try:
            os.rmdir(directory)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
            time.sleep(0.005)


def clean(entry: dict) -> None:
    pgid = entry.get("pgid")
    if isinstance(pgid, int) and pgid > 1:
        try:
            os.killpg(pgid, signal.SIGTERM)
        except OSError:
            pass
        end = time.monotonic() + 1.0
        while _alive(pgid) and time.monotonic() < end:
            time.sleep(0.01)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    for directory in entry.get("cgroups", []):
        empty_cgroup(directory)
    workdir = entry.get("workdir")
    if isinstance(workdir, str) and "/afm-sandbox-" in workdir:
        shutil.rmtree(workdir, ignore_errors=True)


def clean_all(*_) -> None:
    for entry in list(ENTRIES.values()):
        clean(entry)
    os._exit(0)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, clean_all)
    buffer = b""
    while True:
        try:
            chunk = os.read(0, 1 << 16)
        except InterruptedError:
            continue
        if not chunk:
            clean_all()
        buffer += chunk
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            op, _, rest = line.decode("utf-8", "replace").partition(" ")
            token, _, data = rest.partition(" ")
            if op == "+":
                try:
                    ENTRIES[token] = {**ENTRIES.get(token, {}), **json.loads(data)}
                except ValueError:
                    pass
            elif op == "-":
                ENTRIES.pop(token, None)


main()
