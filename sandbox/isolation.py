"""Which boundary this host can give a program, and the command line that sets it up.

``kernel``: ``unshare`` (util-linux) puts the program in new mount, PID and network
namespaces (plus a user namespace when the caller is not root) and ``launcher.py`` builds
its filesystem; ``setpriv`` drops every capability. It is probed once per process by
running a real program through it; when it fails, :func:`require` refuses with the
reason, unless the caller accepted ``weak`` isolation: a separate process with resource
limits and the audit tripwire, started by ``reaper.py`` (a subreaper that kills what the
program detached; a throw-away uid when the caller is root), and nothing the kernel
enforces between it and the user's files or network (nor, unless root, the user's
processes). Either way a run gets its own cgroup where the host allows (``cgroup.py``).
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from afm.sandbox import cgroup
from afm.sandbox.policy import SandboxPolicy

HERE = Path(__file__).resolve().parent
HARNESS = (HERE / "harness.py").read_text(encoding="utf-8")
LAUNCHER = (HERE / "launcher.py").read_text(encoding="utf-8")
REAPER = (HERE / "reaper.py").read_text(encoding="utf-8")
INODE_BYTES = 4096  # each inode of the private /tmp is counted as one page of tmp_bytes
TOOL_DIRS = "/usr/bin:/bin:/usr/sbin:/sbin"
SYSTEM_PATHS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache",
                "/etc/alternatives", "/etc/localtime")
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}


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


def kernel_command(policy: SandboxPolicy, root: str, pass_fds: list[int], cgroup_fds: list[int]) -> list[str]:
    import json

    as_root = os.geteuid() == 0
    cfg = {
        "root": root, "binds": bind_paths(), "tmp_bytes": policy.tmp_bytes, "tmp_inodes": tmp_inodes(policy),
        "python": python(), "harness": HARNESS, "setpriv": tool("setpriv"), "pass_fds": pass_fds,
        "cgroup_fds": cgroup_fds, "uid": throwaway_uid(policy) if as_root else None, "env": ENV,
    }
    namespaces = ["--mount", "--pid", "--net", "--fork", "--kill-child=SIGKILL"]
    if not as_root:
        namespaces = ["--user", "--map-root-user", *namespaces]
    return [tool("unshare") or "unshare", *namespaces, "--", python(), "-I", "-S", "-B", "-c",
            LAUNCHER, json.dumps(cfg)]


def weak_command(policy: SandboxPolicy, workdir: str, pass_fds: list[int], cgroup_fds: list[int],
                 env: dict[str, str]) -> list[str]:
    """The reaper, which starts the harness (as a throw-away uid when we are root)."""
    import json

    uid = None
    if weak_drops_uid():
        uid = throwaway_uid(policy)
        os.chown(workdir, uid, uid)
    cfg = {"python": python(), "harness": HARNESS, "uid": uid, "workdir": workdir, "env": env,
           "cgroup_fds": cgroup_fds, "pass_fds": pass_fds}
    return [python(), "-I", "-S", "-B", "-c", REAPER, json.dumps(cfg)]
