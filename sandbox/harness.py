"""Inside the sandbox: what every sandboxed process does first, and the candidate's process.

Every sandboxed process of afm starts as ``python -I -S -B -c <isolation.BOOT>``, reads
its orders (one JSON line on stdin, with this module and its siblings as compiled code)
and calls the ``main`` of the module the orders name: this one for the program, the
referee's (``referee.py``) for a test. :func:`prepare` is the part both share: resource
limits, stdin closed after the orders, no ptrace or ``/proc/<pid>/mem`` for its children,
and the audit hook.

The candidate's process runs the program in a fresh ``__main__`` and then, for a test,
answers the referee's requests (``channel.py``: call this function, read that attribute,
...) until the referee is done; its values go out as plain data or handles
(:class:`CandidateWire`). Nothing here decides a verdict and nothing here is a secret: the
test and its expected values never enter this process, so whatever the program does in
it (patch this module, write on any descriptor, read every frame) can only change the
values the referee receives, which it judges as the values they are. Without a test
(``serve`` false) it reports, on the evaluator's channel, that the program ran to its end.

The audit hook keeps the optional *tripwire* (no sockets, processes, ``ctypes`` or
writes outside the working directory, early and with a clear message; the kernel
namespaces of ``launcher.py`` are the boundary). On the weak path it is all there is, so
it also closes the ``*at`` routes past a path check: no directory can be opened as a
descriptor (the origin of every ``dir_fd``), calls that take one are refused, the working
directory cannot change, ``/proc/*/mem`` cannot be opened, and ``mkfifo``/``mknod`` (which
raise no audit event) are removed.

Exit codes: 0 after the program ran (or a served session), 1 when it raised, 125 when the
orders are unusable.
"""

import builtins
import os
import sys
import types

import afm.sandbox.channel as channel
import afm.sandbox.plain as plain

TRIPWIRE_PREFIXES = (
    "socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "pty.", "os.kill", "os.killpg", "shutil.rmtree", "os.chmod", "os.chown", "os.link", "os.symlink",
)
PATH_EVENTS = {"os.remove": 1, "os.rename": 2, "os.rmdir": 1, "os.mkdir": 1, "os.truncate": 1, "os.utime": 1,
               "sqlite3.connect": 1}
DIR_FD_EVENTS = {"os.mkdir": (2,), "os.rmdir": (1,), "os.remove": (1,), "os.rename": (2, 3), "os.utime": (3,),
                 "os.chmod": (2,), "os.chown": (3,), "os.link": (2, 3), "os.symlink": (2,)}
RAW_MEMORY_MODULES = frozenset({"ctypes", "_ctypes", "_testcapi", "_testinternalcapi", "_testbuffer",
                                "_testmultiphase", "_testsinglephase", "_testimportmultiple", "_testclinic",
                                "_xxtestfuzz", "_xxsubinterpreters"})
PROCESS_MODULES = frozenset({"_posixsubprocess", "_posixshmem", "_multiprocessing"})
METHOD_TYPES = (types.FunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)


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


def install_hook(root: str, tripwire: bool) -> None:
    """The audit hook (its rules live in this closure; no module global changes them)."""
    if not tripwire:
        return
    import _imp
    from importlib.machinery import ModuleSpec

    realpath, fsdecode, isdir, sep = os.path.realpath, os.fsdecode, os.path.isdir, os.sep
    blocked = RAW_MEMORY_MODULES | PROCESS_MODULES
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    loaders = {"create_builtin": _imp.create_builtin, "create_dynamic": _imp.create_dynamic}

    def resolved(path) -> str | None:
        try:
            return realpath(fsdecode(path))
        except (TypeError, ValueError, OSError):
            return None

    def inside(path) -> bool:
        p = resolved(path)
        return p is not None and (p == root or p.startswith(root + sep))

    def raw_memory(p: str | None) -> bool:
        return p is None or (p.startswith("/proc/") and p.rstrip("/").rsplit("/", 1)[-1] in ("mem", "pagemap",
                                                                                            "environ"))

    def load(kind: str, args: tuple) -> None:
        """``_imp.create_*`` behind the guards below: a fresh spec of exact strings."""
        spec, rest, out = args
        name, origin = getattr(spec, "name", None), getattr(spec, "origin", None)
        if type(name) is not str or not (origin is None or type(origin) is str):
            raise ImportError("sandbox: a module spec needs a plain name")
        if name.split(".")[0] in blocked or name == "posix":
            raise ImportError(f"sandbox: module {name} is not available")
        out.append(loaders[kind](ModuleSpec(name, None, origin=origin), *rest))

    def hook(event: str, args: tuple) -> None:
        if event.startswith("afm.load."):
            load(event[9:], args)
            return
        if event.startswith("ctypes.") or event == "sys.addaudithook":
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and str(args[0]).split(".")[0] in blocked:
            raise ImportError(f"sandbox: module {args[0]} is not available")
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            if isinstance(path, int):
                return
            p = resolved(path)
            if raw_memory(p):
                raise PermissionError(f"sandbox: {fsdecode(path)} is not available")
            writes = (mode is not None and any(c in str(mode) for c in "wax+")) or (
                isinstance(flags, int) and flags & writing)
            if not writes and isdir(p):
                # a directory as a descriptor: the start of every dir_fd route (opened to
                # write, a directory gives EISDIR, or with O_TMPFILE a file, as for
                # tempfile.TemporaryFile)
                raise PermissionError(f"sandbox: opening a directory is not allowed: {fsdecode(path)}")
            if writes and not inside(path):
                raise PermissionError(f"sandbox: writing outside the working directory: {fsdecode(path)}")
            return
        if event == "os.chdir":
            raise PermissionError("sandbox: changing the working directory is not allowed")
        for i in DIR_FD_EVENTS.get(event, ()):
            if i < len(args) and isinstance(args[i], int) and args[i] != -1:
                raise PermissionError(f"sandbox: {event} relative to a directory descriptor is not allowed")
        if event in PATH_EVENTS:
            for p in args[:PATH_EVENTS[event]]:
                if isinstance(p, (str, bytes, os.PathLike)) and not inside(p):
                    raise PermissionError(f"sandbox: {event} outside the working directory: {p}")
        elif event.startswith(TRIPWIRE_PREFIXES):
            raise PermissionError(f"sandbox: {event} is not allowed")

    sys.addaudithook(hook)
    for kind in loaders:  # the originals now live only in the hook's closure
        setattr(_imp, kind, _load_guard(kind))
    for name in [m for m in sys.modules if m.split(".")[0] in blocked]:
        del sys.modules[name]
    for module in (os, sys.modules.get("posix")):  # no audit event: a FIFO or device anywhere
        for name in ("mkfifo", "mknod"):
            if module is not None and hasattr(module, name):
                delattr(module, name)


def _load_guard(kind: str):
    audit = sys.audit

    def guard(spec, *rest):
        out = []
        audit("afm.load." + kind, spec, rest, out)
        return out[0]

    return guard


def prepare(orders: dict) -> None:
    """Limits, stdin, dumpability and the audit hook: before any code of the orders runs."""
    set_limits(orders["limits"])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the orders were all stdin had to say
    os.close(devnull)
    make_undumpable()
    install_hook(os.path.realpath(orders["root"]), bool(orders.get("tripwire", True)))


def flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:  # noqa: BLE001 - the program may have replaced or closed them
            pass


def fresh_main() -> dict:
    """A fresh ``__main__`` module for the code to run in (this file's globals are not it)."""
    module = type(sys)("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    return module.__dict__


# -- the candidate's process ---------------------------------------------------------------

class RemoteB:
    """A handle to an object of the test (a ``key=`` function, an object of the test's
    class): every use is a request to the referee. Its private attributes stay there."""

    __slots__ = ("_ref", "__weakref__")

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return CHANNEL[0].request("getattr", (self, name))

    def __setattr__(self, name, value):
        if name.startswith("_"):
            raise AttributeError(name)
        CHANNEL[0].request("setattr", (self, name, value))

    def __delattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        CHANNEL[0].request("delattr", (self, name))

    def __call__(self, *args, **kwargs):
        return CHANNEL[0].request("call", (self, *args), kwargs)

    def __repr__(self):
        return CHANNEL[0].request("builtin", ("repr", self))


def _builtin(name: str):
    def method(self, *args):
        return CHANNEL[0].request("builtin", (name, self, *args))
    return method


def _dunder(name: str):
    def method(self, *args):
        return CHANNEL[0].request("dunder", (self, name, *args))
    return method


for _name, _op in (("__len__", "len"), ("__iter__", "iter"), ("__next__", "next"), ("__str__", "str"),
                   ("__hash__", "hash"), ("__bool__", "bool"), ("__format__", "format"), ("__dir__", "dir"),
                   ("__reversed__", "reversed"), ("__abs__", "abs")):
    setattr(RemoteB, _name, _builtin(_op))
for _name in ("__getitem__", "__setitem__", "__delitem__", "__contains__", "__eq__", "__ne__", "__lt__", "__le__",
              "__gt__", "__ge__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__",
              "__rpow__", "__neg__", "__pos__", "__invert__", "__index__", "__int__", "__float__", "__enter__",
              "__exit__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__"):
    setattr(RemoteB, _name, _dunder(_name))

class Tee:
    """The program's ``sys.stdout``/``sys.stderr`` while a test runs: written as usual, and
    a copy (up to ``cap`` characters) sent with the next message, so that a test that
    captures what the program prints (``contextlib.redirect_stdout``) sees it."""

    def __init__(self, stream, cap: int) -> None:
        self._stream, self._copy, self._cap = stream, [], cap

    def write(self, text):
        n = self._stream.write(text)
        if self._cap > 0 and isinstance(text, str):
            self._copy.append(text[: self._cap])
            self._cap -= len(text)
        return n

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def take(self) -> str:
        out, self._copy = "".join(self._copy), []
        return out

    def __getattr__(self, name):
        return getattr(self._stream, name)


class RemoteStdin:
    """The program's ``sys.stdin`` while a test runs: read from the test's ``sys.stdin``
    (an ``io.StringIO`` the test set, or nothing), as in one process."""

    encoding, errors, closed, newlines = "utf-8", "strict", False, None

    def readline(self, size=-1):
        return CHANNEL[0].request("stdin", ("readline", size))

    def read(self, size=-1):
        return CHANNEL[0].request("stdin", ("read", size))

    def readlines(self, hint=-1):
        return CHANNEL[0].request("stdin", ("readlines", hint))

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def isatty(self):
        return False

    def readable(self):
        return True

    def close(self):
        pass

    def fileno(self):
        raise OSError("sandbox: the test's stdin has no descriptor here")


CHANNEL: list = [None]
BUILTIN_OPS = {"len": len, "iter": iter, "next": next, "repr": repr, "str": str, "hash": hash, "bool": bool,
               "format": format, "dir": dir, "reversed": reversed, "abs": abs}


class CandidateWire(plain.Wire):
    """The candidate's half of the wire: its objects go out as handles with their class
    described (what the referee's shadows need), the test's come in as :class:`RemoteB`."""

    side = "a"

    def may_name(self, name: str) -> bool:
        return plain.program_may_name(name)

    def __init__(self) -> None:
        super().__init__()
        self.handles: dict = {}  # ref -> object of the program the referee holds a handle to
        self.handle_of: dict = {}  # id(object) -> ref
        self.described: set = set()
        self.remote: dict = {}  # ref -> RemoteB
        self.exception_classes: dict = {}
        self.refs = iter(range(1, 1 << 62))

    def handle(self, value) -> int:
        ref = self.handle_of.get(id(value))
        if ref is None:
            ref = next(self.refs)
            self.handles[ref] = value
            self.handle_of[id(value)] = ref
        return ref

    def encode_other(self, value, depth: int):
        if type(value) is RemoteB:
            return {"back": object.__getattribute__(value, "_ref")}
        if isinstance(value, type):
            return self.enc_class(value, depth)
        if isinstance(value, BaseException):
            return self.enc_exception(value, depth)
        cls = type(value)
        out = {"o": self.handle(value), "c": self.enc_class(cls, depth)}
        base = next((b for b in type.__getattribute__(cls, "__mro__") if b in plain.KINDS or b in plain.VALUE_BASES),
                    None)
        hash_kind = self.hash_kind(cls, base)
        if hash_kind == "custom":
            try:
                out["h"] = hash(value)
            except Exception:  # noqa: BLE001 - the referee will ask, and see the exception
                pass
        if base in plain.KINDS:
            return self.enc_mirror(value, plain.KINDS[base], depth, extra=out)
        if base is not None:
            out["v"] = self.enc(self.base_value(value, base), depth + 1)
        return out

    @staticmethod
    def base_value(value, base):
        """The plain value inside an instance of a subclass (none of the subclass's code runs)."""
        if base is int:
            return int.__index__(value)
        if base is float:
            return float.__float__(value)
        if base is complex:
            return complex.__complex__(value)
        if base is str:
            return str.__str__(value)
        if base is bytes:
            return bytes.__bytes__(value)
        if base is tuple:
            return tuple.__getitem__(value, slice(None))
        return frozenset(frozenset.__iter__(value))

    @staticmethod
    def hash_kind(cls, base) -> str:
        for klass in type.__getattribute__(cls, "__mro__"):
            if "__hash__" in klass.__dict__:
                found = klass.__dict__["__hash__"]
                if found is None:
                    return "none"
                if klass is object or klass is base or (base is not None and klass in base.__mro__):
                    return "default"
                return "custom"
        return "default"

    def enc_class(self, cls, depth: int) -> dict:
        ref = self.handle(cls)
        if ref in self.described:
            return {"C": ref}
        self.described.add(ref)
        return {"C": ref, "d": self.describe(cls, depth)}

    def enc_base(self, cls, depth: int):
        name = plain.type_name(cls)
        return {"ty": name} if name is not None and self.may_name(name) else self.enc_class(cls, depth + 1)

    def describe(self, cls, depth: int) -> dict:
        """What the referee needs to build a class that behaves as this one's instances
        should behave there: name, bases, which special methods it defines, its methods."""
        if depth > plain.MAX_DEPTH:
            raise plain.TooLarge("classes nested too deeply")
        get = type.__getattribute__
        mro = get(cls, "__mro__")
        base = next((b for b in mro if b in plain.KINDS or b in plain.VALUE_BASES), None)
        skip = set(base.__mro__) if base is not None else {object}
        dunders, methods = set(), set()
        for klass in mro:
            if klass in skip:
                continue
            for name, attr in list(klass.__dict__.items()):
                if type(name) is not str or len(name) > plain.MAX_NAME:
                    continue
                if name.startswith("__") and name.endswith("__"):
                    dunders.add(name)
                elif isinstance(attr, METHOD_TYPES):  # looked up on an instance, always a method
                    methods.add(name)
        meta = type(cls)
        meta_dunders = {name for klass in meta.__mro__ if klass not in (type, object)
                        for name in list(klass.__dict__) if type(name) is str and name.startswith("__")}
        doc = get(cls, "__doc__") if "__doc__" in cls.__dict__ else None
        return {"name": str(get(cls, "__name__"))[:plain.MAX_NAME],
                "qual": str(get(cls, "__qualname__"))[:plain.MAX_NAME],
                "mod": str(get(cls, "__module__"))[:plain.MAX_NAME],
                "bases": [self.enc_base(b, depth) for b in get(cls, "__bases__")],
                "plain": plain.KINDS.get(base) or (base.__name__ if base is not None else None),
                "dunders": sorted(dunders)[:300], "methods": sorted(methods)[:1000],
                "meta": sorted(meta_dunders)[:100], "hash": self.hash_kind(cls, base),
                "doc": doc[:2000] if isinstance(doc, str) else None}

    def enc_class_of_exception(self, cls, depth: int):
        name = plain.type_name(cls)
        return {"ty": name} if name is not None and self.may_name(name) else self.enc_class(cls, depth + 1)

    def decode_other(self, data: dict, depth: int):
        if "back" in data and len(data) == 1:
            found = self.handles.get(data["back"])
            if found is None and data["back"] not in self.handles:
                raise plain.WireError("a handle this side never gave")
            return found
        if "o" in data:
            ref = data["o"]
            proxy = self.remote.get(ref)
            if proxy is None:
                proxy = object.__new__(RemoteB)
                object.__setattr__(proxy, "_ref", ref)
                self.remote[ref] = proxy
            return proxy
        return super().decode_other(data, depth)

    def exception_class(self, data, depth: int):
        if type(data) is dict and "o" in data:  # an exception class of the test
            key = (data.get("tn"), data.get("xb"))
            cls = self.exception_classes.get(key)
            if cls is None:
                base = getattr(builtins, str(data.get("xb")), Exception)
                base = base if isinstance(base, type) and issubclass(base, BaseException) else Exception
                cls = self.exception_classes[key] = type(str(data.get("tn") or "TestError"), (base,), {})
            return cls
        return super().exception_class(data, depth)


def _answer(namespace: dict):
    """The candidate's side of each request of the referee (``referee.py`` asks)."""
    import copy

    def answer(op: str, args: list, kwargs: dict):
        try:
            return perform(op, args, kwargs)
        finally:
            flush_output()

    def perform(op: str, args: list, kwargs: dict):
        if op == "call":
            return args[0](*args[1:], **kwargs)
        if op == "method":
            return getattr(args[0], args[1])(*args[2:], **kwargs)
        if op == "dunder":
            return getattr(type(args[0]), args[1])(args[0], *args[2:])
        if op == "getattr":
            return getattr(args[0], args[1])
        if op == "setattr":
            return setattr(args[0], args[1], args[2])
        if op == "delattr":
            return delattr(args[0], args[1])
        if op == "builtin":
            if args[0] == "copy":
                return copy.copy(args[1])
            if args[0] == "deepcopy":
                return copy.deepcopy(args[1])
            return BUILTIN_OPS[args[0]](*args[1:])
        if op == "global":
            name = args[0]
            if name in namespace:
                return namespace[name]
            raise NameError(name)
        if op == "references":
            return name_in_code(namespace, args[0])
        raise ValueError(f"sandbox: unknown request {op}")

    return answer


def name_in_code(namespace: dict, name: str) -> bool:
    """Does any code of the program (its functions, its classes' methods, what they nest)
    read or write ``name`` as a global?"""
    import dis

    globals_ops = {"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_NAME"}
    seen, todo = set(), []
    for value in list(namespace.values()):
        todo.append(value)
        if isinstance(value, type):
            todo.extend(list(value.__dict__.values()))
    while todo:
        item = todo.pop()
        item = getattr(item, "__func__", item)
        code = getattr(item, "__code__", item) if not isinstance(item, type) else None
        if not isinstance(code, types.CodeType) or id(code) in seen:
            continue
        seen.add(id(code))
        if name in code.co_names and any(ins.opname in globals_ops and ins.argval == name
                                         for ins in dis.get_instructions(code)):
            return True
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return False


def program_names(namespace: dict) -> list | None:
    names = [k for k in list(namespace) if type(k) is str and not k.startswith("__")]
    return names if len(names) <= 10_000 else None


def main(orders: dict) -> None:
    """The candidate's process: the program, then (for a test) the referee's requests."""
    prepare(orders)
    namespace = fresh_main()
    serve = bool(orders.get("serve"))
    to_referee = int(orders["to_referee"])
    if serve:
        copy_cap = int(orders["max_message_bytes"]) // 8
        sys.stdout, sys.stderr = Tee(sys.stdout, copy_cap), Tee(sys.stderr, copy_cap)
        sys.stdin = RemoteStdin()
    try:
        code = compile(orders.pop("program"), "<program>", "exec", dont_inherit=True)
        exec(code, namespace)
        loaded = None
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: an exit is not a pass
        sys.__excepthook__(type(exc), exc, exc.__traceback__)
        loaded = BaseException.with_traceback(exc, None)
    flush_output()
    if not serve:  # a program alone: say it ran to its end, on the evaluator's channel
        os.write(to_referee, b'{"ready":true}\n' if loaded is None else b'{"ready":false}\n')
        os._exit(0 if loaded is None else 1)
    wire = CandidateWire()

    def fail(kind: str, detail: str) -> None:
        flush_output()
        os._exit(0 if kind == "closed" else 1)

    cap = int(orders["max_message_bytes"])
    out, err = sys.stdout, sys.stderr

    def printed() -> dict:
        found = {}
        for key, stream in (("po", out), ("pe", err)):
            text = stream.take() if isinstance(stream, Tee) else ""
            if text:
                found[key] = text
        return found

    link = channel.Channel(int(orders["from_referee"]), to_referee, wire, _answer(namespace), fail, cap,
                           outbound=printed)
    CHANNEL[0] = link
    if loaded is not None:
        link.send({"ready": False}, lambda: {"e": wire.enc_exception(loaded, 1)})
        flush_output()
        os._exit(1)
    link.send({"ready": True}, lambda: {"names": program_names(namespace)})
    link.serve()
