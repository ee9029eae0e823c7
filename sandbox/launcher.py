"""The sandbox's first process inside its new namespaces (stdlib only, run as ``-c``).

``unshare`` starts it as PID 1 of a new PID namespace, in new mount and network namespaces
(and, on a host where the caller is not root, a new user namespace in which it is root).
It builds the program's whole filesystem on a fresh tmpfs: the interpreter and system
libraries bound read-only, ``/dev/null``-style devices, a writable ``/tmp`` limited in
bytes and in inodes (directories and links cost kernel memory that the byte size does not
count), no ``/proc``, no home directory and nothing else of the host; makes it the root
(``pivot_root``) and detaches the old one. Then it starts the harness through ``setpriv``
(no capabilities, no new privileges; a throw-away uid when the host caller is root) and
waits: when the harness exits, this process exits, and the kernel kills every process left
in the namespace. Setup failures exit 125 with one ``sandbox:`` line on stderr.

Before anything else it joins the run's control group(s) by writing ``0`` to the
``cgroup.procs`` descriptors it was handed (``cgroup.py``), so every process of the run is
inside before any program code exists.

Arguments: one object (marshal, base64: ``isolation.pack``) (``root``, ``binds``, ``tmp_bytes``, ``tmp_inodes``, ``python``,
``flags`` and ``harness``: the interpreter's flags and code, ``setpriv``, ``uid``, ``env``,
``cgroup_fds``, ``pass_fds``: the run's own descriptors, which the launcher closes in
itself after starting the harness).
"""

import binascii
import ctypes
import marshal
import os
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
DEVICES = ("null", "zero", "full", "random", "urandom")
LIBC = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    pass


def check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def enc(value):
    return value.encode() if isinstance(value, str) else value


def mount(source, target, fstype, flags: int, data=None) -> None:
    check(LIBC.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
          f"mount {target}")


def locked_flags(path: str) -> int:
    """The flags a read-only remount must keep (a user namespace may not clear them)."""
    f = os.statvfs(path).f_flag
    flags = MS_NOSUID | MS_NODEV | MS_RDONLY
    flags |= f & (MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    if f & 4096:  # ST_RELATIME
        flags |= MS_RELATIME
    return flags


def bind_read_only(source: str, root: str) -> None:
    """``source`` appears at the same path under ``root``, read-only (symlinks copied)."""
    target = root + source
    if os.path.islink(source):
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(source), target)
        return
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif os.path.exists(source):
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        open(target, "a").close()
    else:
        return
    mount(source, target, None, MS_BIND | MS_REC)
    mount(None, target, None, MS_BIND | MS_REMOUNT | locked_flags(source))


def build_root(cfg: dict) -> None:
    root = cfg["root"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    for path in cfg["binds"]:
        bind_read_only(path, root)
    os.makedirs(root + "/dev", mode=0o755)
    for name in DEVICES:
        dev = "/dev/" + name
        if os.path.exists(dev):
            open(root + dev, "a").close()
            mount(dev, root + dev, None, MS_BIND)
    os.makedirs(root + "/tmp")
    mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={int(cfg['tmp_bytes'])},nr_inodes={int(cfg['tmp_inodes'])},mode=1777")
    os.makedirs(root + "/.old")
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise SetupError(f"pivot_root: unknown machine {os.uname().machine}")
    check(LIBC.syscall(number, root.encode(), (root + "/.old").encode()), "pivot_root")
    os.chdir("/")
    check(LIBC.umount2(b"/.old", MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def harness_argv(cfg: dict) -> list[str]:
    drop = ["--no-new-privs", "--bounding-set=-all", "--inh-caps=-all"]
    if cfg["uid"] is not None:  # host root: become a throw-away user
        drop += [f"--reuid={cfg['uid']}", f"--regid={cfg['uid']}", "--clear-groups"]
    else:  # root of our user namespace: keep uid 0 but never regain capabilities
        drop += ["--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked"]
    return [cfg["setpriv"], *drop, "--", cfg["python"], *cfg["flags"], "-c", cfg["harness"]]


def join_cgroups(fds: list) -> None:
    for fd in fds:
        try:
            os.write(int(fd), b"0")
        except OSError as exc:
            raise SetupError(f"cannot join the run's cgroup: {os.strerror(exc.errno)}") from None
        os.close(int(fd))


def main() -> None:
    cfg = marshal.loads(binascii.a2b_base64(sys.argv[1]))
    try:
        join_cgroups(cfg.get("cgroup_fds", []))
        build_root(cfg)
    except (SetupError, OSError) as exc:
        sys.stderr.write(f"sandbox: {exc}\n")
        sys.stderr.flush()
        os._exit(125)
    argv = harness_argv(cfg)
    pid = os.fork()
    if pid == 0:
        os.chdir("/tmp")
        try:
            os.execve(argv[0], argv, cfg["env"])
        except OSError as exc:
            os.write(2, f"sandbox: cannot start {argv[0]}: {exc}\n".encode())
        os._exit(125)
    os.close(0)  # the orders are the harness's alone
    for fd in cfg["pass_fds"]:
        os.close(int(fd))
    while True:  # reap everything; leave when the harness is gone
        try:
            done, status = os.wait()
        except ChildProcessError:
            os._exit(125)
        if done == pid:
            os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status)
                     else 128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main()
