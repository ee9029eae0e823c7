"""One control group per sandboxed run, where the host lets us make one.

rlimits bound each process; a run is many processes (a program may fork up to
``max_processes``) plus its private ``/tmp`` (tmpfs pages) and what the kernel allocates
for it (directory entries, inodes, pipes, page tables). A cgroup bounds all of that as
one: ``memory_bytes`` for the whole run (the memory controller charges user pages, tmpfs
pages and kernel memory alike), ``max_processes`` tasks for the whole run (the pids
controller), and at the end everything still in it is killed, whatever session or parent
it moved to.

Probed once per process (:func:`support`):

* **cgroup v2**: the ``memory`` controller (and ``pids`` where delegated) must be enabled
  for children of the cgroup we create runs in. That is our own cgroup when it already delegates them
  (``cgroup.subtree_control``), or when this process is the only one in it: then it
  moves into a leaf ``afm-evaluator`` and enables them (what a delegated systemd scope or
  a container's init expects). ``AFM_SANDBOX_CGROUP=/sys/fs/cgroup/<path>`` names a
  prepared parent instead; ``AFM_SANDBOX_CGROUP=off`` switches cgroups off.
* **cgroup v1**: a writable ``memory`` hierarchy (and ``pids`` when mounted): runs get a
  child of our own cgroup in each.
* otherwise the bounds are per process, and the reason is reported with every run's
  isolation layers.

A process joins its run's cgroup by writing ``0`` to the ``cgroup.procs`` descriptors the
evaluator opened (permission is checked against the opener), before any program code
runs: the launcher does it first thing (``launcher.py``, ``reaper.py``).
"""

from __future__ import annotations

import errno
import itertools
import os
import secrets
import signal
import time
from dataclasses import dataclass

from afm.once import once
from afm.sandbox.policy import SandboxPolicy

ENV = "AFM_SANDBOX_CGROUP"
EXTRA_TASKS = 2  # the launcher and the harness, besides the program's own processes
RUN_PREFIX = "afm-run-"  # then the evaluator's pid: what cleanup.sweep_stale goes by


@dataclass(frozen=True)
class CgroupSupport:
    """Where per-run cgroups go: ``v2`` (one parent), ``v1`` (memory[, pids]) or ``none``."""

    version: str
    reason: str = ""
    memory_parent: str = ""
    pids_parent: str = ""

    def layer(self, policy: SandboxPolicy) -> str:
        if self.version == "none":
            return f"per-process limits only (memory, processes; no cgroup: {self.reason})"
        pids = f", {policy.max_processes + EXTRA_TASKS} tasks" if self.pids_parent else ""
        return f"cgroup-{self.version}(per run: {policy.memory_bytes >> 20} MiB incl. tmpfs and kernel memory{pids})"


def own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as {controller: path}; the v2 entry is under ``""``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for name in (controllers.split(",") if controllers else [""]):
            out[name.removeprefix("name=") if name.startswith("name=") else name] = path
    return out


def cgroup_mounts(text: str) -> dict[str, tuple[str, str]]:
    """``/proc/self/mountinfo``'s cgroup mounts as {controller or "" for v2: (root, mount point)}."""
    out: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if tail[0] == "cgroup2":
            out.setdefault("", (root, point))
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                if option in ("memory", "pids"):
                    out.setdefault(option, (root, point))
    return out


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def cgroup_dir(mount: tuple[str, str], path: str) -> str | None:
    """The directory of cgroup ``path`` under a mount whose root is ``mount[0]``."""
    root, point = mount
    if root == "/":
        return point.rstrip("/") + path
    if path == root or path.startswith(root.rstrip("/") + "/"):
        return point.rstrip("/") + path[len(root.rstrip("/")):]
    return None  # our cgroup is outside what this mount shows


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(value)


def _try_child(parent: str, files: dict[str, str]) -> str:
    """Make and remove a child of ``parent`` with ``files`` written: '' or the reason."""
    probe = os.path.join(parent, f"afm-probe-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        os.mkdir(probe)
    except OSError as exc:
        return f"cannot create a cgroup in {parent}: {exc.strerror}"
    try:
        for name, value in files.items():
            _write(os.path.join(probe, name), value)
        return ""
    except OSError as exc:
        return f"cannot set {name} in {parent}: {exc.strerror}"
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


def _v2(directory: str, explicit: bool) -> CgroupSupport:
    """Runs as children of ``directory``: ``memory`` is required, ``pids`` used when
    delegated too (else the process count stays per process, RLIMIT_NPROC)."""
    try:
        available = set(_read(os.path.join(directory, "cgroup.controllers")).split())
        enabled = set(_read(os.path.join(directory, "cgroup.subtree_control")).split())
    except OSError as exc:
        return CgroupSupport("none", f"cannot read {directory}: {exc.strerror}")
    if "memory" not in available:
        return CgroupSupport("none", f"the cgroup v2 memory controller is not delegated to {directory}")
    wanted = {"memory", "pids"} & available
    if not wanted <= enabled:
        why = _enable_here(directory, explicit, sorted(wanted))
        if why:
            return CgroupSupport("none", why)
    files = {"memory.max": str(64 << 20), **({"pids.max": "8"} if "pids" in wanted else {})}
    why = _try_child(directory, files)
    if why:
        return CgroupSupport("none", why)
    return CgroupSupport("v2", "", directory, directory if "pids" in wanted else "")


def _enable_here(directory: str, explicit: bool, controllers: list[str]) -> str:
    """Enable ``controllers`` for children of ``directory``. A cgroup with processes of
    its own cannot: when the only one is this process, it moves to a leaf first."""
    try:
        procs = [p for p in _read(os.path.join(directory, "cgroup.procs")).split() if p]
    except OSError as exc:
        return f"cannot read {directory}/cgroup.procs: {exc.strerror}"
    if procs and procs != [str(os.getpid())]:
        hint = "" if explicit else f" (give afm a delegated cgroup, or name one in {ENV})"
        return f"{directory} holds other processes, so its controllers cannot be enabled{hint}"
    try:
        if procs:
            leaf = os.path.join(directory, "afm-evaluator")
            os.makedirs(leaf, exist_ok=True)
            _write(os.path.join(leaf, "cgroup.procs"), "0")
        _write(os.path.join(directory, "cgroup.subtree_control"), " ".join("+" + c for c in controllers))
    except OSError as exc:
        return f"cannot enable {' and '.join(controllers)} in {directory}: {exc.strerror}"
    return ""


def _v1(mounts: dict[str, tuple[str, str]], own: dict[str, str]) -> CgroupSupport:
    if "memory" not in mounts or "memory" not in own:
        return CgroupSupport("none", "no cgroup v2 controllers and no cgroup v1 memory hierarchy")
    memory = cgroup_dir(mounts["memory"], own["memory"])
    if memory is None:
        return CgroupSupport("none", "our cgroup v1 memory cgroup is not visible here")
    why = _try_child(memory, {"memory.limit_in_bytes": str(64 << 20)})
    if why:
        return CgroupSupport("none", why)
    pids = cgroup_dir(mounts["pids"], own["pids"]) if "pids" in mounts and "pids" in own else None
    if pids is not None and _try_child(pids, {"pids.max": "8"}):
        pids = None
    return CgroupSupport("v1", "", memory, pids or "")


def probe() -> CgroupSupport:
    """What this host allows (uncached; :func:`support` caches it)."""
    choice = os.environ.get(ENV, "").strip()
    if choice.lower() in ("off", "0", "no", "none"):
        return CgroupSupport("none", f"switched off by {ENV}={choice}")
    if choice:
        return _v2(choice, explicit=True)
    try:
        own = own_cgroups(_read("/proc/self/cgroup"))
        mounts = cgroup_mounts(_read("/proc/self/mountinfo"))
    except OSError as exc:
        return CgroupSupport("none", f"cannot read /proc/self: {exc.strerror}")
    first = ""
    if "" in mounts and "" in own:
        directory = cgroup_dir(mounts[""], own[""])
        if directory is not None:
            found = _v2(directory, explicit=False)
            if found.version != "none":
                return found
            first = found.reason
    found = _v1(mounts, own)
    if found.version == "none" and first:
        return CgroupSupport("none", first)
    return found


@once
def support() -> CgroupSupport:
    """What this host allows, probed once per process: the probe creates cgroups, so two
    threads must not run it at the same time (a test pretends a host through ``support.results``)."""
    return probe()


_NAMES = itertools.count()


class RunGroup:
    """The cgroup(s) of one run: created with its limits, joined through
    :meth:`procs_fds` by the run's first process, emptied and removed by :meth:`close`."""

    def __init__(self, found: CgroupSupport, policy: SandboxPolicy) -> None:
        self.found = found
        name = f"{RUN_PREFIX}{os.getpid()}-{next(_NAMES)}-{secrets.token_hex(3)}"
        self.dirs: list[str] = []
        self.fds: list[int] = []
        tasks = str(policy.max_processes + EXTRA_TASKS)
        try:
            if found.version == "v2":
                files = {"memory.max": str(policy.memory_bytes), "memory.swap.max": "0"}
                if found.pids_parent:
                    files["pids.max"] = tasks
                self._make(os.path.join(found.memory_parent, name), files, optional=("memory.swap.max",))
            else:
                self._make(os.path.join(found.memory_parent, name),
                           {"memory.limit_in_bytes": str(policy.memory_bytes),
                            "memory.memsw.limit_in_bytes": str(policy.memory_bytes)},
                           optional=("memory.memsw.limit_in_bytes",))
                if found.pids_parent:
                    self._make(os.path.join(found.pids_parent, name), {"pids.max": tasks}, optional=())
        except BaseException:
            self.close()
            raise

    def _make(self, directory: str, files: dict[str, str], optional: tuple[str, ...]) -> None:
        os.mkdir(directory)
        self.dirs.append(directory)
        for file, value in files.items():
            try:
                _write(os.path.join(directory, file), value)
            except OSError:
                if file not in optional:
                    raise
        self.fds.append(os.open(os.path.join(directory, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC))

    def procs_fds(self) -> list[int]:
        return list(self.fds)

    def close_fds(self) -> None:
        """The evaluator's copies, once the run's first process holds its own."""
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []

    def memory_exceeded(self) -> bool:
        """Did the kernel kill a process of this run for going over its memory?"""
        if not self.dirs:
            return False
        name = "memory.events" if self.found.version == "v2" else "memory.oom_control"
        try:
            for line in _read(os.path.join(self.dirs[0], name)).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value or 0) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def kill_all(self) -> None:
        """SIGKILL every process still in the run, until none is left (bounded)."""
        for directory in self.dirs:
            kill = os.path.join(directory, "cgroup.kill")
            if self.found.version == "v2" and os.path.exists(kill):
                try:
                    _write(kill, "1")
                except OSError:
                    pass
            for _ in range(200):
                pids = self._pids(directory)
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                time.sleep(0.005)

    @staticmethod
    def _pids(directory: str) -> list[int]:
        try:
            return [int(p) for p in _read(os.path.join(directory, "cgroup.procs")).split()]
        except (OSError, ValueError):
            return []

    def close(self) -> None:
        self.close_fds()
        self.kill_all()
        for directory in reversed(self.dirs):
            for _ in range(200):
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(0.005)
        self.dirs = []


def remove_stale(directory: str) -> None:
    """Kill what is left in a run's cgroup whose evaluator is gone, and remove it."""
    group = RunGroup.__new__(RunGroup)
    group.found, group.dirs, group.fds = support(), [directory], []
    group.close()


def create(policy: SandboxPolicy) -> RunGroup | None:
    """A cgroup for one run, or None where the host gives none (see :func:`support`)."""
    found = support()
    if found.version == "none":
        return None
    return RunGroup(found, policy)
