"""Run untrusted Python (model-written programs) in a locked-down child process.

HumanEval-style metrics execute whatever the model wrote. The upstream harnesses run it
with ``exec`` in a forked interpreter after monkey-patching ``os``; that stops accidents,
not a fork bomb or a network call. Here every program gets, in layers:

1. **A separate process** started with ``python -I -S -B`` (isolated mode: no user site,
   no ``PYTHON*`` variables, no bytecode writes) in a fresh **temporary working directory**,
   an empty environment, stdin closed, in its own session (process group).
2. **Resource limits** (``setrlimit``): CPU seconds, address space, file size, open files,
   no core dumps, and a process count.
3. **A network namespace** of its own (``unshare(CLONE_NEWNET)``; loopback only, and down)
   where the kernel permits it: as root, or in a new user namespace otherwise. Where
   neither is permitted, :attr:`SandboxPolicy.require_isolation` decides between
   refusing to run and running with the in-process guard only.
4. **An unprivileged identity**: when started as root the child drops to a throw-away
   uid/gid (no supplementary groups) before the program runs (the standard-library
   modules the program imports are loaded first, as the interpreter's files may be
   readable by root only), so the process-count limit
   applies (the kernel exempts root from it), it cannot write where that uid may not
   (anything outside the temporary directory and world-writable places), and everything
   it started can be killed by uid at the end.
5. **An in-process guard** (a ``sys.addaudithook`` installed before the program runs):
   opening files for writing outside the temporary directory, sockets, ``fork``/``exec``
   and ``ctypes`` raise ``PermissionError``. Audit hooks cannot be removed from Python
   code; this layer stops ordinary code even where 3 and 4 are unavailable.
6. **A wall-clock timeout**: the whole process group (and, as root, every process of the
   sandbox uid) is killed.

The verdict is a :class:`RunResult`: ``passed`` only when the program exits 0 in time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000

# Runs inside the child before the untrusted program (as ``-c`` code, so nothing is imported
# from the working directory). The audit hook is the last thing installed; from then on the
# program cannot open files for writing outside ``root``, open sockets or start processes.
_BOOTSTRAP = r'''
import json, os, sys, resource
cfg = json.loads(os.environ.pop("AFM_SANDBOX", "{}"))
if cfg["netns"]:
    import ctypes
    flags = 0x40000000 | (0x10000000 if cfg["netns"] == "userns" else 0)
    if ctypes.CDLL(None, use_errno=True).unshare(flags) != 0:
        sys.stderr.write("sandbox: could not create a network namespace\n")
        sys.exit(125)
for name, value in cfg["limits"]:
    resource.setrlimit(getattr(resource, name), (value[0], value[1]))
root = os.path.realpath(cfg["root"])
source = open(cfg["program"], encoding="utf-8").read()
code = compile(source, "<program>", "exec")
if cfg.get("uid") is not None:
    # The interpreter's files may be readable by root only (e.g. under /root): import what
    # the program imports from the standard library first, then drop to the sandbox uid.
    import ast
    wanted = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            wanted.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            wanted.add(node.module)
            wanted.update(f"{node.module}.{a.name}" for a in node.names)
    for name in sorted(wanted):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names and top not in cfg["no_preload"]:
            try:
                __import__(name)
            except Exception:
                pass
    os.setgroups([])
    os.setgid(cfg["uid"])
    os.setuid(cfg["uid"])
def _inside(path):
    try:
        p = os.path.realpath(os.fsdecode(path) if not isinstance(path, int) else "")
    except Exception:
        return False
    return p == root or p.startswith(root + os.sep)
_BLOCKED = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
            "os.fork", "os.forkpty", "pty.", "ctypes.", "os.kill", "os.killpg", "shutil.rmtree",
            "os.chmod", "os.chown", "os.link", "os.symlink")
def _guard(event, args):
    if event == "open":
        path, mode, flags = args[0], args[1], args[2]
        writing = (mode is not None and any(c in str(mode) for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
        if writing and not isinstance(path, int) and not _inside(path):
            raise PermissionError(f"sandbox: writing outside the working directory: {path}")
    elif event in ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.truncate", "os.utime"):
        for p in args[:2]:
            if isinstance(p, (str, bytes, os.PathLike)) and not _inside(p):
                raise PermissionError(f"sandbox: {event} outside the working directory: {p}")
    elif event.startswith(_BLOCKED):
        raise PermissionError(f"sandbox: {event} is not allowed")
if cfg.get("guard", True):
    sys.addaudithook(_guard)
del json, cfg
globals_ = {"__name__": "__main__", "__builtins__": __builtins__}
exec(code, globals_)
'''


# Standard-library modules never imported on the program's behalf while still privileged:
# they act when imported (open a browser, print) or exist to reach the OS.
NO_PRELOAD = frozenset({
    "antigravity", "this", "webbrowser", "turtle", "turtledemo", "tkinter", "idlelib", "pydoc",
    "ensurepip", "venv", "subprocess", "multiprocessing", "ctypes", "pty", "asyncio", "concurrent",
})


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits for one program. ``require_isolation``: refuse to run where the kernel
    denies a network namespace (instead of relying on the in-process guard alone)."""

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 1 << 30
    max_file_bytes: int = 16 << 20
    max_processes: int = 16
    max_open_files: int = 64
    require_isolation: bool = False
    audit_guard: bool = True  # off only to test the kernel-level layers on their own
    uid_base: int = 200_000


@dataclass
class RunResult:
    status: str  # passed | failed | timeout | error
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    isolation: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return self.status == "passed"


class SandboxUnavailable(RuntimeError):
    """The policy requires isolation the kernel does not grant here."""


def _probe_netns() -> str | None:
    """Which way a child can get a network namespace here: 'root', 'userns' or None."""
    candidates = (("root", CLONE_NEWNET), ("userns", CLONE_NEWUSER | CLONE_NEWNET))
    for name, flags in candidates:
        if name == "root" and os.geteuid() != 0:
            continue
        code = f"import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare({flags}) != 0)"
        try:
            ok = subprocess.run([_python(), "-I", "-S", "-c", code], capture_output=True,
                                timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return name
    return None


def _python() -> str:
    return os.path.realpath(sys.executable)


_NETNS_MODE: list[str | None] = []


def netns_mode() -> str | None:
    if not _NETNS_MODE:
        _NETNS_MODE.append(_probe_netns() if sys.platform.startswith("linux") else None)
    return _NETNS_MODE[0]


def isolation_layers(policy: SandboxPolicy | None = None) -> tuple[str, ...]:
    """What a program run here gets, for reports and logs."""
    layers = ["process", "rlimits", "tempdir", "timeout"]
    if policy is None or policy.audit_guard:
        layers.append("audit-guard")
    if netns_mode():
        layers.append(f"netns({netns_mode()})")
    if os.geteuid() == 0:
        layers.append("unprivileged-uid")
    return tuple(layers)


def _limits(policy: SandboxPolicy, uid: int | None) -> list[tuple[str, tuple[int, int]]]:
    """The rlimits the bootstrap sets before the program runs."""
    nproc = policy.max_processes
    if uid is None:  # the limit counts every process of the user, not just ours
        nproc += _user_process_count()
    return [
        ("RLIMIT_CPU", (policy.cpu_s, policy.cpu_s + 1)),
        ("RLIMIT_AS", (policy.memory_bytes, policy.memory_bytes)),
        ("RLIMIT_FSIZE", (policy.max_file_bytes, policy.max_file_bytes)),
        ("RLIMIT_NOFILE", (policy.max_open_files, policy.max_open_files)),
        ("RLIMIT_CORE", (0, 0)),
        ("RLIMIT_NPROC", (nproc, nproc)),
    ]


def _user_process_count() -> int:
    uid = os.getuid()
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


def _kill_uid(uid: int) -> None:
    """Kill every process of ``uid`` (escapees of the process group included), repeating
    until none is left (a fork bomb may fork while we kill; its process limit bounds it)."""
    for _ in range(50):
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.stat(f"/proc/{entry}").st_uid == uid:
                        pids.append(int(entry))
                except OSError:
                    pass
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def run_python(program: str, policy: SandboxPolicy | None = None) -> RunResult:
    """Run ``program`` (Python source) under ``policy``; never raises for what it does."""
    policy = policy or SandboxPolicy()
    netns = netns_mode()
    if policy.require_isolation and netns is None:
        raise SandboxUnavailable("no network namespace can be created here "
                                 "(needs root or unprivileged user namespaces)")
    uid = None
    work = Path(tempfile.mkdtemp(prefix="afm-sandbox-"))
    if os.geteuid() == 0:
        uid = policy.uid_base + (os.getpid() * 131 + time.monotonic_ns()) % 100_000
        os.chown(work, uid, uid)
    os.chmod(work, 0o700)
    prog = work / "program.py"
    prog.write_text(program, encoding="utf-8")
    if uid is not None:
        os.chown(prog, uid, uid)
    cfg = {"root": str(work), "program": str(prog), "guard": policy.audit_guard, "uid": uid,
           "no_preload": sorted(NO_PRELOAD), "netns": netns, "limits": _limits(policy, uid)}
    env = {"AFM_SANDBOX": json.dumps(cfg),
           "PATH": "/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work), "LANG": "C.UTF-8"}
    start = time.perf_counter()
    status, rc, out, err = "error", None, "", ""
    try:
        proc = subprocess.Popen(
            [_python(), "-I", "-S", "-B", "-c", _BOOTSTRAP],
            cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
        )
        try:
            out_b, err_b = proc.communicate(timeout=policy.timeout_s)
            rc = proc.returncode
            status = "passed" if rc == 0 else ("timeout" if rc in (-signal.SIGXCPU, -signal.SIGKILL) else "failed")
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out_b, err_b = proc.communicate()
            rc, status = proc.returncode, "timeout"
        out = out_b.decode("utf-8", "replace")[-10_000:]
        err = err_b.decode("utf-8", "replace")[-10_000:]
    except OSError as exc:
        err = f"sandbox could not start the program: {exc}"
    finally:
        if uid is not None:
            _kill_uid(uid)
        else:
            try:
                _kill_group(proc.pid)  # type: ignore[possibly-undefined]
            except (NameError, UnboundLocalError):
                pass
        shutil.rmtree(work, ignore_errors=True)
    return RunResult(status, rc, out, err, time.perf_counter() - start, isolation_layers(policy))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
