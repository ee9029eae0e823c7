"""The first process of a run with weak isolation (stdlib only, run as ``-c``).

Without namespaces nothing the kernel enforces keeps a program's processes together, so
this process does what it can, and says so (``isolation.py``'s layers name it):

* it joins the run's cgroup(s) first (``cgroup.py``), where the host gives them: then
  the evaluator kills everything of the run at the end, whatever the program did;
* it becomes a *child subreaper*: a process the program detaches (``setsid`` and a
  double fork) is re-parented here instead of to init, and is killed when the harness
  ends, before this process exits;
* when started as root it runs the harness as a throw-away uid, so the program cannot
  signal the evaluator or any other process of the host's users, and its process limit
  counts only its own processes;
* it dies with the evaluator: a parent-death signal (``SIGTERM``) makes it kill and reap
  every descendant, then exit, and the harness gets ``SIGKILL`` when the reaper ends.

Without a cgroup and without root, a program that kills this process first (same user)
can leave processes behind, and it can signal every process of the user.

Arguments: one object (marshal, base64: ``isolation.pack``) (``python``, ``flags``, ``harness``, ``uid``, ``workdir``, ``env``,
``cgroup_fds``, ``pass_fds``, ``parent``: the evaluator's pid).
"""

import binascii
import ctypes
import marshal
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
LIBC = ctypes.CDLL(None, use_errno=True)


def children(me: int) -> list[int]:
    """Processes whose parent is ``me`` (from /proc; none found without it)."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry))
    return found


def reap_all(me: int) -> None:
    """Kill and reap every descendant (orphans come here: we are their subreaper)."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return  # no child at all, detached or not: nothing to look for in /proc
    for _ in range(1000):
        left = children(me)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in left:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def drop_to(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def on_parent_death(signum, frame) -> None:
    reap_all(os.getpid())
    os._exit(128 + signal.SIGTERM)


def main() -> None:
    cfg = marshal.loads(binascii.a2b_base64(sys.argv[1]))
    try:
        for fd in cfg.get("cgroup_fds", []):
            os.write(int(fd), b"0")
            os.close(int(fd))
        if LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        signal.signal(signal.SIGTERM, on_parent_death)
        if LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
        if cfg.get("parent") and os.getppid() != cfg["parent"]:  # it died before the line above
            os._exit(125)
    except OSError as exc:
        os.write(2, f"sandbox: weak isolation setup: {exc}\n".encode())
        os._exit(125)
    argv = [cfg["python"], *cfg["flags"], "-c", cfg["harness"]]
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(cfg["workdir"])
            if cfg.get("uid") is not None:
                drop_to(int(cfg["uid"]))
            LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # after the uid change, which clears it
            os.execve(argv[0], argv, cfg["env"])
        except OSError as exc:
            os.write(2, f"sandbox: cannot start the harness: {exc}\n".encode())
        os._exit(125)
    os.close(0)  # the orders are the harness's alone
    for fd in cfg.get("pass_fds", []):
        os.close(int(fd))
    me = os.getpid()
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(125)
        if done == pid:
            break
    reap_all(me)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main()
