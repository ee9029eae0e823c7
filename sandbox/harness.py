"""The code that runs inside the sandbox, around the untrusted program (stdlib only).

Started as ``python -I -S -B -c <this file>``. The first line on stdin is its orders
(JSON). Two modes:

``serve`` (a split test, ``judge.py``): run the program, then answer requests, one JSON
line each on stdin (call a function of the program, read a name, an attribute or an
item, convert with a builtin), with plain data on the results descriptor. Nothing here
is a secret: the test and its expected values never enter this process, the evaluator
compares the values it gets back, so whatever the program writes anywhere can only be a
(wrong or right) value.

``run`` (a test that cannot be split, or a program alone): run the program then the test
in one namespace, and report a pass by writing a random key to the verdict descriptor.
The key is never in a frame or object the program can reach: a *keeper* thread, started
before the program, holds it in its own locals (signal handlers run only in the main
thread, so no handler is ever handed the keeper's frame, and ``sys._current_frames`` is
refused to everyone else). When pulled, the keeper writes the key only if the main
thread is inside :func:`finish` called straight from :func:`run`'s own frame, which
happens only after the test returned. Pulling it from anywhere else, writing to any
descriptor, exiting with any status, patching any global of this module, emptying any
table (the audit hook's rules are closure constants) gives nothing. Routes to raw memory
(``ctypes`` and the interpreter's test modules, also through ``_imp``, creating code
objects, ``/proc/*/mem``) and to the garbage collector's lists are refused by the audit
hook, which also keeps the optional *tripwire* (no sockets, processes or writes outside
the working directory; the kernel namespaces of ``launcher.py`` are the boundary).

Exit codes: 0 after a pass (or a served session), 1 after a failure, 125 when the orders
are unusable.
"""

import os
import sys

# Tag names of the plain-data format (sandbox/plain.py has the evaluator's side).
INT_JSON_BITS = 63
MAX_DEPTH = 200
MAX_ITEMS = 1_000_000


class LineReader:
    """Lines from a descriptor, read in chunks (stdin carries orders, then requests)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer = fd, b""

    def line(self):
        while b"\n" not in self.buffer:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                rest, self.buffer = self.buffer, b""
                return rest or None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


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
    for name in [m for m in sys.modules if m.split(".")[0] in ("ctypes", "_ctypes")]:
        del sys.modules[name]


def install_hook(root: str, tripwire: bool, keeper: int | None) -> None:
    """The audit hook. Its rules live in this closure (no module global can change
    them) and the hook function is referenced by nothing a program can reach."""
    import _imp
    import _thread
    from importlib.machinery import ModuleSpec

    get_ident, realpath, fsdecode, sep = _thread.get_ident, os.path.realpath, os.fsdecode, os.sep
    raw_memory = frozenset({
        "ctypes", "_ctypes", "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
        "_testsinglephase", "_testimportmultiple", "_testclinic", "_xxtestfuzz", "_xxsubinterpreters",
    })
    processes = frozenset({"_posixsubprocess", "_posixshmem", "_multiprocessing"})
    blocked_modules = raw_memory | processes if tripwire else raw_memory
    refused = frozenset({
        "sys._current_exceptions", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
        "sys.settrace", "sys.setprofile", "sys._settraceallthreads", "sys._setprofileallthreads",
        "sys.monitoring.register_callback", "code.__new__", "sys.addaudithook",
    })
    tripwire_prefixes = (
        "socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
        "os.forkpty", "pty.", "os.kill", "os.killpg", "shutil.rmtree", "os.chmod", "os.chown",
        "os.link", "os.symlink",
    )
    path_events = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.truncate", "os.utime")
    writing_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    loaders = {"create_builtin": _imp.create_builtin, "create_dynamic": _imp.create_dynamic}

    def inside(path) -> bool:
        try:
            p = realpath(fsdecode(path))
        except (TypeError, ValueError):
            return False
        return p == root or p.startswith(root + sep)

    def raw_memory_path(path) -> bool:
        try:
            p = realpath(fsdecode(path))
        except (TypeError, ValueError):
            return True
        return p.startswith("/proc/") and p.rstrip("/").rsplit("/", 1)[-1] in ("mem", "pagemap", "environ")

    def load(kind: str, args: tuple) -> None:
        """``_imp.create_*`` behind the guards below: a fresh spec of exact strings."""
        spec, rest, out = args
        name, origin = getattr(spec, "name", None), getattr(spec, "origin", None)
        if type(name) is not str or not (origin is None or type(origin) is str):
            raise ImportError("sandbox: a module spec needs a plain name")
        if name.split(".")[0] in blocked_modules:
            raise ImportError(f"sandbox: module {name} is not available")
        out.append(loaders[kind](ModuleSpec(name, None, origin=origin), *rest))

    def hook(event: str, args: tuple) -> None:
        if event in refused:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "sys._current_frames":
            if get_ident() != keeper:
                raise PermissionError("sandbox: sys._current_frames is not allowed")
            return
        if event.startswith("afm.load."):
            load(event[9:], args)
            return
        if event == "object.__setattr__" and args[1] == "__code__":
            raise PermissionError("sandbox: replacing a function's code is not allowed")
        if event.startswith("ctypes."):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and str(args[0]).split(".")[0] in blocked_modules:
            raise ImportError(f"sandbox: module {args[0]} is not available")
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            if isinstance(path, (str, bytes)) and raw_memory_path(path):
                raise PermissionError(f"sandbox: {fsdecode(path)} is not available")
            if tripwire and not isinstance(path, int):
                writes = (mode is not None and any(c in str(mode) for c in "wax+")) or (
                    isinstance(flags, int) and flags & writing_flags)
                if writes and not inside(path):
                    raise PermissionError(f"sandbox: writing outside the working directory: {path}")
        elif tripwire and event in path_events:
            for p in args[:2]:
                if isinstance(p, (str, bytes, os.PathLike)) and not inside(p):
                    raise PermissionError(f"sandbox: {event} outside the working directory: {p}")
        elif tripwire and event.startswith(tripwire_prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")

    sys.addaudithook(hook)
    for kind in loaders:  # the originals now live only in the hook's closure
        setattr(_imp, kind, _load_guard(kind))
    for name in [m for m in sys.modules if m.split(".")[0] in blocked_modules]:
        del sys.modules[name]


def _load_guard(kind: str):
    audit = sys.audit

    def guard(spec, *rest):
        out = []
        audit("afm.load." + kind, spec, rest, out)
        return out[0]

    return guard


def keeper(key: bytes, fd: int, pulled: int, answer: int, owner, finish_code, finish_line: int, main: int,
           frames, read, write) -> None:
    """Holds the key (its own locals, another thread). Each pull: write the key only
    when the main thread is inside ``finish`` called by ``owner`` (``run``'s frame) from
    the one line of ``run`` that calls it, after the test returned."""
    try:
        while read(pulled, 1):
            frame = frames().get(main)
            while frame is not None and not (frame.f_code is finish_code and frame.f_back is owner
                                             and owner.f_lineno == finish_line):
                frame = frame.f_back
            if frame is not None:
                write(fd, key)
                write(answer, b"k")
                return
    except BaseException:
        pass


def finish(pull: int, answer: int, write, read) -> None:
    """The verdict step: ask the keeper, wait for its answer."""
    write(pull, b"p")
    read(answer, 1)


def call_line(function, name: str) -> int:
    """The last line on which ``function`` names the global ``name`` (``run`` calls
    ``finish`` once, at its end)."""
    import dis

    line, found = 0, 0
    for ins in dis.get_instructions(function):
        positions = getattr(ins, "positions", None)
        line = (positions.lineno if positions is not None and positions.lineno else ins.starts_line) or line
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval == name:
            found = line
    if not found:
        raise ValueError(f"{function.__name__} does not call {name}")
    return found


def run(orders: dict, stdin: LineReader) -> None:
    """Program then test in one namespace; the keeper's key only after both returned.
    Everything this frame calls once the program has run is a local taken before, so no
    global the program rebinds (a ``functools.partial`` of ``finish``, say) runs here."""
    import _thread

    write, read, exit_now, flush_all = os.write, os.read, os._exit, _flush
    exc_info, show_exception, run_code, base_exception = sys.exc_info, sys.__excepthook__, exec, BaseException
    flushes = [s.flush for s in (sys.stdout, sys.stderr) if s is not None]
    pull_r, pull_w = os.pipe()
    answer_r, answer_w = os.pipe()
    key, verdict_fd = orders.pop("key").encode(), int(orders.pop("verdict_fd"))
    finish_line = int(orders.pop("finish_line", 0)) or call_line(run, "finish")  # the evaluator knows it
    keeper_id = _thread.start_new_thread(keeper, (key, verdict_fd, pull_r, answer_w, sys._getframe(),
                                                  finish.__code__, finish_line, _thread.get_ident(),
                                                  sys._current_frames, read, write))
    del key
    namespace = _main_namespace()
    try:
        program = compile(orders["program"], "<program>", "exec")
        test = compile(orders["test"], "<test>", "exec") if orders.get("test") else None
    except (SyntaxError, ValueError):
        show_exception(*exc_info())
        exit_now(1)
    install_hook(os.path.realpath(orders["root"]), bool(orders.get("tripwire", True)), keeper_id)
    orders.clear()
    try:
        run_code(program, namespace)
        if test is not None:
            run_code(test, namespace)
    except base_exception:  # SystemExit included: an exit is not a pass
        show_exception(*exc_info())
        flush_all(flushes)
        exit_now(1)
    flush_all(flushes)
    finish(pull_w, answer_r, write, read)
    exit_now(0)


def _flush(flushes: list) -> None:
    for flush in flushes:
        try:
            flush()
        except BaseException:
            pass


def _main_namespace() -> dict:
    """A fresh ``__main__`` module for the program (this file's globals are not it)."""
    import builtins
    import types

    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    return module.__dict__


# -- serve: a split test's calls, plain data out ------------------------------------------

PLAIN_BASES = (bool, int, float, str, bytes, bytearray, complex, list, tuple, dict, set, frozenset, range)


def encode(value, refs: dict, depth: int = 0):
    """Plain data stays data (subclasses as their base type); anything else stays here
    and goes out as a reference."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    if value is None:
        return None
    base = next((b for b in PLAIN_BASES if isinstance(value, b)), None)
    if base is bool:
        return value
    if base is int:
        v = int.__index__(value)
        return v if v.bit_length() <= INT_JSON_BITS else {"$int": hex(v)}
    if base is float:
        v = float.__float__(value)
        if v != v or v in (float("inf"), float("-inf")):
            return {"$float": "nan" if v != v else ("inf" if v > 0 else "-inf")}
        return v
    if base is str:
        return str.__str__(value)
    if base in (bytes, bytearray):
        return {"$" + base.__name__: base.hex(value)}
    if base is complex:
        v = complex.__complex__(value) if type(value) is not complex else value
        return {"$complex": [encode(v.real, refs), encode(v.imag, refs)]}
    if base is range:
        return {"$range": [value.start, value.stop, value.step]}
    if base is list:
        return [encode(v, refs, depth + 1) for v in list.__getitem__(value, slice(None))]
    if base is tuple:
        return {"$tuple": [encode(v, refs, depth + 1) for v in tuple.__getitem__(value, slice(None))]}
    if base in (set, frozenset):
        return {"$" + base.__name__: [encode(v, refs, depth + 1) for v in base.copy(value)]}
    if base is dict:
        return {"$dict": [[encode(k, refs, depth + 1), encode(v, refs, depth + 1)]
                          for k, v in dict.items(value)]}
    ref = len(refs) + 1
    refs[ref] = value
    return {"$ref": ref, "type": type(value).__name__[:100]}


def decode(data, refs: dict, depth: int = 0):
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    if isinstance(data, list):
        return [decode(v, refs, depth + 1) for v in data]
    if not isinstance(data, dict):
        return data
    if "$ref" in data:
        return refs[data["$ref"]]
    (tag, body), = data.items()
    if tag in ("$tuple", "$set", "$frozenset"):
        items = [decode(v, refs, depth + 1) for v in body]
        return {"$tuple": tuple, "$set": set, "$frozenset": frozenset}[tag](items)
    if tag == "$dict":
        return {decode(k, refs, depth + 1): decode(v, refs, depth + 1) for k, v in body}
    if tag == "$bytes":
        return bytes.fromhex(body)
    if tag == "$bytearray":
        return bytearray.fromhex(body)
    if tag == "$int":
        return int(body, 16)
    if tag == "$float":
        return float(body)
    if tag == "$complex":
        return complex(decode(body[0], refs), decode(body[1], refs))
    if tag == "$range":
        return range(*body)
    raise ValueError(f"unknown tag {tag}")


def perform(request: dict, namespace: dict, refs: dict):
    """One request of the judge: the value it asks for (may raise: reported as such)."""
    import builtins

    op = request["op"]
    if op == "name":
        name = request["name"]
        if name in namespace:
            return namespace[name], ()
        return getattr(builtins, name), ()
    if op == "attr":
        return getattr(decode(request["of"], refs), request["name"]), ()
    if op == "item":
        return decode(request["of"], refs)[decode(request["key"], refs)], ()
    if op == "call":
        target = request["f"]
        if isinstance(target, str):  # a name of the program (or a builtin)
            fn = namespace[target] if target in namespace else getattr(builtins, target)
        elif isinstance(target, dict) and "$builtin" in target:
            fn = getattr(builtins, target["$builtin"])
        else:
            fn = decode(target, refs)
        args = [decode(a, refs) for a in request["args"]]
        kwargs = {k: decode(v, refs) for k, v in request["kwargs"].items()}
        return fn(*args, **kwargs), args
    raise ValueError(f"unknown request {op}")


def describe(exc: BaseException) -> dict:
    try:
        message = str(exc)[:500]
    except BaseException:
        message = ""
    return {"raised": type(exc).__name__[:100], "message": message}


def serve(orders: dict, stdin: LineReader) -> None:
    import json

    write, exit_now, dumps, loads = os.write, os._exit, json.dumps, json.loads
    show_exception, exc_info = sys.__excepthook__, sys.exc_info
    flushes = [s.flush for s in (sys.stdout, sys.stderr) if s is not None]
    results = int(orders["results_fd"])
    namespace = _main_namespace()
    install_hook(os.path.realpath(orders["root"]), bool(orders.get("tripwire", True)), None)

    def send(message: dict) -> None:
        _flush(flushes)
        write(results, dumps(message, separators=(",", ":")).encode() + b"\n")

    try:
        exec(compile(orders["program"], "<program>", "exec"), namespace)
    except BaseException as exc:  # noqa: BLE001 - reported, then the session ends
        show_exception(*exc_info())
        send({"loaded": False, **describe(exc)})
        exit_now(1)
    send({"loaded": True})
    refs: dict = {}
    while True:
        line = stdin.line()
        if line is None:
            _flush(flushes)
            exit_now(0)
        request = loads(line)
        reply = {"i": request["i"]}
        try:
            value, args = perform(request, namespace, refs)
            reply["value"] = encode(value, refs)
            mutable = [i for i, a in enumerate(args) if isinstance(a, (list, dict, set, bytearray))]
            if mutable:
                reply["after"] = [[i, encode(args[i], refs)] for i in mutable]
        except BaseException as exc:  # noqa: BLE001 - the program's exception is the answer
            reply = {"i": request["i"], **describe(exc)}
        send(reply)


def main() -> None:
    stdin = LineReader(0)
    try:
        import json

        orders = json.loads(stdin.line() or b"")
        set_limits(orders["limits"])
        mode = orders["mode"]
        if mode not in ("run", "serve"):
            raise ValueError(f"unknown mode {mode}")
    except (ValueError, KeyError, TypeError, OSError) as exc:
        os.write(2, f"sandbox: unusable orders: {exc}\n".encode())
        os._exit(125)
    if mode == "run":  # nothing more comes on stdin: the program gets /dev/null
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    make_undumpable()
    (run if mode == "run" else serve)(orders, stdin)


if __name__ == "__main__":
    main()
