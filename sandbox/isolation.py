"""Which boundary this host can give a program, the command line that sets it up, and
the code every sandboxed process starts with.

``kernel``: ``unshare`` (util-linux) puts the program in new mount, PID and network
namespaces (plus a user namespace when the caller is not root) and ``launcher.py`` builds
its filesystem; ``setpriv`` drops every capability. It is probed once per process by
running a real program through it; when it fails, :func:`require` refuses with the
reason, unless the caller accepted ``weak`` isolation: a separate process with resource
limits and the audit tripwire, started by ``reaper.py`` (a subreaper that kills what the
program detached; a throw-away uid when the caller is root), and nothing the kernel
enforces between it and the user's files or network (nor, unless root, the user's
processes). Either way a run gets its own cgroup where the host allows (``cgroup.py``),
and a parent-death signal: ``setpriv --pdeathsig`` before ``unshare`` (the reaper sets its
own), so a run never outlives the evaluator (``cleanup.py``).

Every sandboxed process runs ``python -P -s -S -B -c BOOT``: it reads its orders (one line
on stdin, :func:`pack`), makes modules of the compiled code they carry (``plain``,
``channel``, ``harness``, ``referee``: the standard library only, compiled once here,
never parsed in the sandbox nor by two threads at once here) and calls the ``main`` the
orders name. Nothing in a sandboxed process imports ``json`` (and with it ``re``): a
fifth of its start-up.
"""

from __future__ import annotations

import base64
import functools
import itertools
import marshal
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import afm.sandbox.cgroup as cgroup
from afm.sandbox.policy import SandboxPolicy

HERE = Path(__file__).resolve().parent
LAUNCHER = (HERE / "launcher.py").read_text(encoding="utf-8")
REAPER = (HERE / "reaper.py").read_text(encoding="utf-8")
INODE_BYTES = 4096  # each inode of the private /tmp is counted as one page of tmp_bytes
TOOL_DIRS = "/usr/bin:/bin:/usr/sbin:/sbin"
SYSTEM_PATHS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache",
                "/etc/alternatives", "/etc/localtime")
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
SHIPPED = ("plain", "channel", "harness", "referee")  # in import order
# How every sandboxed process runs the interpreter: no user site, no site, no bytecode
# written, no script directory on the path. Not -I/-E: the environment is ours alone
# (ENV) and carries PYTHONHASHSEED, so the two processes of a test share one set order.
FLAGS = ("-P", "-s", "-S", "-B")
BOOT = """
import binascii, marshal, os, sys, types
def _boot():
    data = bytearray()
    while not data.endswith(b"\\n"):
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        data += chunk
    try:
        orders = marshal.loads(binascii.a2b_base64(bytes(data)))
        modules, entry = orders.pop("modules"), orders.pop("entry")
    except (ValueError, EOFError, TypeError, KeyError, binascii.Error) as exc:
        os.write(2, f"sandbox: unusable orders: {exc}\\n".encode())
        os._exit(125)
    for name in ("afm", "afm.sandbox"):
        package = types.ModuleType(name)
        package.__path__ = []
        sys.modules[name] = package
    sys.modules["afm"].sandbox = sys.modules["afm.sandbox"]
    for name, code in modules:
        module = types.ModuleType("afm.sandbox." + name)
        sys.modules[module.__name__] = module
        setattr(sys.modules["afm.sandbox"], name, module)
        exec(code, module.__dict__)
    sys.modules["afm.sandbox." + entry].main(orders)
_boot()
"""
_COMPILE_LOCK = threading.Lock()


@functools.cache
def shipped_code(names: tuple[str, ...]) -> tuple:
    """``((name, code), ...)`` of the modules a sandboxed process runs: compiled once per
    process, under a lock (CPython 3.11's parser is not safe across threads)."""
    out = []
    with _COMPILE_LOCK:
        for name in names:
            path = HERE / f"{name}.py"
            out.append((name, compile(path.read_text(encoding="utf-8"), str(path), "exec", dont_inherit=True)))
    return tuple(out)


def pack(value) -> str:
    """What the evaluator hands a sandboxed process (orders, a launcher's configuration):
    marshal, then base64 on one line. Marshal is for this direction only (trusted data,
    the same interpreter on both sides); nothing comes back this way."""
    return base64.b64encode(marshal.dumps(value)).decode("ascii")


def orders_line(orders: dict, entry: str, modules: tuple[str, ...]) -> bytes:
    """One line: ``orders``, the module to start and the compiled code it needs."""
    return (pack(dict(orders, entry=entry, modules=shipped_code(modules))) + "\n").encode("ascii")


@dataclass(frozen=True)
class Boundary:
    """How programs run here: ``kernel`` (as ``root`` or in a ``userns``) or ``weak``."""

    kind: str
    user: str  # root | userns | host
    reason: str = ""  # why the kernel boundary is unavailable (weak only)

    def layers(self, policy: SandboxPolicy) -> tuple[str, ...]:
        base = ["process", "rlimits", "timeout(process tree)", "output-cap", "verdict-channel"]
        if self.kind == "kernel":
            base += ["pid-namespace", "mount-namespace(private root, no /proc)", "network-namespace",
                     "private-tmp(bytes and inodes capped)", "no-capabilities",
                     "throw-away-uid" if self.user == "root" else "user-namespace"]
        else:
            base += ["weak(no kernel boundary)", "subreaper"]
            base.append("throw-away-uid" if weak_drops_uid() else "same-uid(can signal the user's processes)")
        base.append(cgroup.support().layer(policy))
        if policy.tripwire:
            base.append("audit-tripwire")
        return tuple(base)


def python() -> str:
    """The interpreter the sandbox runs: the real binary behind any venv."""
    return os.path.realpath(sys.executable)


def tool(name: str) -> str | None:
    return shutil.which(name, path=TOOL_DIRS)


def bind_paths() -> list[str]:
    """Read-only host paths the program sees: system libraries and the interpreter."""
    paths = [p for p in SYSTEM_PATHS if os.path.lexists(p)]
    for prefix in {sys.base_prefix, sys.base_exec_prefix}:
        real = os.path.realpath(prefix)
        if not any(real == p or real.startswith(p + "/") for p in paths):
            paths.append(real)
    exe_dir = os.path.dirname(python())
    if not any(exe_dir == p or exe_dir.startswith(p + "/") for p in paths):
        paths.append(exe_dir)
    return paths


_UIDS = itertools.count()
_UID_LOCK = threading.Lock()


def throwaway_uid(policy: SandboxPolicy) -> int:
    """A uid no one uses, different for every concurrent run of this process."""
    with _UID_LOCK:
        n = next(_UIDS)
    return policy.uid_base + (os.getpid() % 1000) * 100 + n % 100


def _open_to_others(path: str) -> bool:
    """Can a user with no groups of ours reach ``path`` (every directory above it searchable)?"""
    real = os.path.realpath(path)
    parts = real.split("/")
    for i in range(2, len(parts)):
        try:
            if not os.stat("/".join(parts[:i])).st_mode & 0o001:
                return False
        except OSError:
            return False
    try:
        return bool(os.stat(real).st_mode & 0o004)
    except OSError:
        return False


def weak_drops_uid() -> bool:
    """Weak isolation runs programs as a throw-away uid when we are root and that uid can
    reach the interpreter and its library (not under a private home directory, say)."""
    if os.geteuid() != 0:
        return False
    lib = os.path.dirname(os.__file__)
    return _open_to_others(python()) and _open_to_others(lib) and _open_to_others(os.path.join(lib, "os.py"))


def tmp_inodes(policy: SandboxPolicy) -> int:
    return max(256, policy.tmp_bytes // INODE_BYTES)


@functools.cache
def pdeathsig_prefix() -> tuple[str, ...]:
    """``setpriv --pdeathsig SIGKILL --`` where util-linux has it (2.33+), else nothing
    (the janitor still ends the run)."""
    setpriv = tool("setpriv")
    if setpriv is None:
        return ()
    try:
        usage = subprocess.run([setpriv, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return (setpriv, "--pdeathsig", "SIGKILL", "--") if "--pdeathsig" in usage else ()


def kernel_command(policy: SandboxPolicy, root: str, pass_fds: list[int], cgroup_fds: list[int],
                   env: dict[str, str]) -> list[str]:
    as_root = os.geteuid() == 0
    cfg = {
        "root": root, "binds": bind_paths(), "tmp_bytes": policy.tmp_bytes, "tmp_inodes": tmp_inodes(policy),
        "python": python(), "flags": FLAGS, "harness": BOOT, "setpriv": tool("setpriv"), "pass_fds": pass_fds,
        "cgroup_fds": cgroup_fds, "uid": throwaway_uid(policy) if as_root else None, "env": env,
    }
    namespaces = ["--mount", "--pid", "--net", "--fork", "--kill-child=SIGKILL"]
    if not as_root:
        namespaces = ["--user", "--map-root-user", *namespaces]
    return [*pdeathsig_prefix(), tool("unshare") or "unshare", *namespaces, "--", python(), "-I", "-S", "-B",
            "-c", LAUNCHER, pack(cfg)]


def weak_command(policy: SandboxPolicy, workdir: str, pass_fds: list[int], cgroup_fds: list[int],
                 env: dict[str, str]) -> list[str]:
    """The reaper, which starts the harness (as a throw-away uid when we are root)."""
    uid = None
    if weak_drops_uid():
        uid = throwaway_uid(policy)
        os.chown(workdir, uid, uid)
    cfg = {"python": python(), "flags": FLAGS, "harness": BOOT, "uid": uid, "workdir": workdir, "env": env,
           "cgroup_fds": cgroup_fds, "pass_fds": pass_fds, "parent": os.getpid()}
    return [python(), "-I", "-S", "-B", "-c", REAPER, pack(cfg)]
