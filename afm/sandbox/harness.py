"""The code that runs inside the sandbox, around the untrusted program (stdlib only).

Started as ``python -I -S -B -c <this file>``; reads its orders from stdin (then points
stdin at ``/dev/null``), sets the resource limits, runs the program and then the test in
one namespace, and reports a pass by writing a secret key to the verdict pipe only after
the test has returned. Anything else (an exception, ``SystemExit``, ``os._exit``, a signal,
an ``atexit`` hook, a forged message on stdout) is a failure, because none of them can
produce the key:

* the key arrives on stdin, which is read to the end before the program runs;
* it lives only in a local variable of :func:`main`, and every route from the program to
  another frame's locals is closed by an audit hook installed first (frames, tracebacks'
  and generators' frames, the garbage collector's object lists, trace and profile
  functions, further audit hooks, ``ctypes`` and the interpreter's test modules);
* the process is not dumpable, so a child it starts cannot ptrace it or read its memory.

The audit hook also keeps the optional *tripwire* (no sockets, processes or writes outside
the working directory). It is not the boundary: the kernel namespaces set up by
``launcher.py`` are. Exit codes: 0 after a pass, 1 after a failure, 125 when the orders
are unusable.
"""

import os
import sys

# Routes to other frames' locals (the key's hiding place) or to raw memory.
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
INTROSPECTION_EVENTS = frozenset({
    "sys._current_frames", "sys._current_exceptions", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "sys.settrace", "sys.setprofile", "sys._settraceallthreads",
    "sys._setprofileallthreads", "sys.monitoring.register_callback",
})
BLOCKED_MODULES = frozenset({
    "ctypes", "_ctypes", "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
    "_testsinglephase", "_testimportmultiple", "_testclinic", "_xxtestfuzz", "_xxsubinterpreters",
})
# The tripwire: operations ordinary test code never needs.
TRIPWIRE_PREFIXES = (
    "socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
    "os.forkpty", "pty.", "os.kill", "os.killpg", "shutil.rmtree", "os.chmod", "os.chown",
    "os.link", "os.symlink",
)
PATH_EVENTS = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.truncate", "os.utime")


def read_orders() -> dict:
    """Everything on stdin (JSON), then stdin becomes /dev/null for the program."""
    import json

    chunks = []
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return json.loads(b"".join(chunks))


def set_limits(limits: list) -> None:
    import resource

    for name, (soft, hard) in limits:
        resource.setrlimit(getattr(resource, name), (soft, hard))


def make_undumpable() -> None:
    """No ptrace, no /proc/<pid>/mem for our own children; then forget ctypes."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (ImportError, OSError, AttributeError):
        pass
    for name in [m for m in sys.modules if m.split(".")[0] in BLOCKED_MODULES]:
        del sys.modules[name]


def install_hook(root: str, tripwire: bool) -> None:
    """The audit hook: closes introspection always, and the tripwire when asked."""
    realpath, sep = os.path.realpath, os.sep
    writing_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def inside(path) -> bool:
        try:
            p = realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return p == root or p.startswith(root + sep)

    def hook(event: str, args: tuple) -> None:
        if event == "sys.addaudithook":
            raise RuntimeError("sandbox: no further audit hooks")  # refused silently
        if event == "sys._getframe":
            raise ValueError("sandbox: the call stack above the program is hidden")
        if event == "object.__getattr__" and args[1] in FRAME_ATTRIBUTES:
            raise PermissionError(f"sandbox: {args[1]} is not available")
        if event in INTROSPECTION_EVENTS or event.startswith("ctypes."):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and str(args[0]).split(".")[0] in BLOCKED_MODULES:
            raise ImportError(f"sandbox: module {args[0]} is not available")
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            if isinstance(path, (str, bytes)):
                name = os.fsdecode(path)
                if name.startswith("/proc/") and name.rstrip("/").rsplit("/", 1)[-1] in ("mem", "pagemap"):
                    raise PermissionError(f"sandbox: {name} is not available")
            if tripwire and not isinstance(path, int):
                writes = (mode is not None and any(c in str(mode) for c in "wax+")) or (
                    isinstance(flags, int) and flags & writing_flags)
                if writes and not inside(path):
                    raise PermissionError(f"sandbox: writing outside the working directory: {path}")
        elif tripwire and event in PATH_EVENTS:
            for p in args[:2]:
                if isinstance(p, (str, bytes, os.PathLike)) and not inside(p):
                    raise PermissionError(f"sandbox: {event} outside the working directory: {p}")
        elif tripwire and event.startswith(TRIPWIRE_PREFIXES):
            raise PermissionError(f"sandbox: {event} is not allowed")

    sys.addaudithook(hook)


def main() -> None:
    try:
        orders = read_orders()
        key = orders["key"].encode()
        verdict_fd = int(orders["verdict_fd"])
        set_limits(orders["limits"])
    except (ValueError, KeyError, TypeError, OSError) as exc:
        os.write(2, f"sandbox: unusable orders: {exc}\n".encode())
        os._exit(125)
    make_undumpable()
    import builtins

    write, close, exit_now = os.write, os.close, os._exit
    exc_info, show_exception = sys.exc_info, sys.__excepthook__
    flushes = [s.flush for s in (sys.stdout, sys.stderr) if s is not None]
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        program = compile(orders["program"], "<program>", "exec")
        test = compile(orders["test"], "<test>", "exec") if orders.get("test") else None
    except (SyntaxError, ValueError):
        show_exception(*exc_info())
        exit_now(1)
    root = os.path.realpath(orders["root"])
    tripwire = bool(orders.get("tripwire", True))
    del orders
    install_hook(root, tripwire)
    try:
        exec(program, namespace)
        if test is not None:
            exec(test, namespace)
    except BaseException:  # SystemExit included: an exit is not a pass
        close(verdict_fd)
        key = None
        show_exception(*exc_info())
        for flush in flushes:
            try:
                flush()
            except BaseException:
                pass
        exit_now(1)
    for flush in flushes:
        try:
            flush()
        except BaseException:
            pass
    write(verdict_fd, key)
    exit_now(0)


if __name__ == "__main__":
    main()
