"""Inside the sandbox: the referee's process, which runs the test and decides its verdict.

The test (HumanEval's ``check(candidate)``, MBPP's and ``afm synth code``'s assert lines,
anything Python can run) is executed here by the real interpreter, so its semantics are
CPython's. No code of the program is ever here: the program runs in the candidate's
process (``harness.py``), and each name of the program the test uses, each call of one
of its functions, each attribute of one of its objects, is a request over a pipe
(``channel.py``) whose answer arrives as plain data (``plain.py``) or as a *shadow*.

* Plain values, the standard library's value types (Counter, Fraction, deque, ...) and
  mirrored containers arrive as real objects of this process: comparing, hashing, sorting
  and arithmetic on them is this interpreter's own.
* An object that is not plain data stays in the candidate's process; here it is a shadow:
  an instance of a class built from the description of its class (name, bases, which
  special methods it has). Using it (calling it, reading an attribute, ``len``, ``iter``,
  ``bool``, ``str``, ``repr``, an item, a ``with``) is forwarded, so the program answers
  what it would answer in one process. A subclass of a plain type keeps its type
  (``type(x) == float`` is false, ``isinstance`` true) and its value, and its own
  methods are forwarded.
* Nothing the program sent is ever run here as code: once the test starts, compiling at
  run time (``eval``, ``exec``, ``compile``, ``doctest`` on the program's docstrings) is
  refused unless the standard library's own code generators do it (``dataclasses``,
  ``namedtuple``), and so is unpickling anything but the value types, or unmarshalling
  outside the import system. A test that does is unjudgeable: the text may be the
  program's.
* What the program's code must never decide is refused: a comparison, a containment test
  or arithmetic that would run the program's ``__eq__``, ``__lt__``, ``__contains__``,
  ``__add__``, ... (an object equal to everything would pass any test), and a context
  manager of the program swallowing the test's exception. The test is then
  **unjudgeable**: a failure with that cause, counted by every caller, never a pass and
  never judged anywhere else. So are values over the wire's bounds, and a test that uses
  a builtin the program redefined next to another name of the program (``abs = lambda
  v: 0``): the program would decide what the test's words mean.

The verdict goes to the evaluator on a descriptor of its own, written once, after which
this process ends at once (``conclude``): nothing the test catches (``except
BaseException``) can turn a refusal, a program that ended or a broken answer into a
pass.
"""

import builtins
import os
import sys

import afm.sandbox.channel as channel
import afm.sandbox.harness as harness
import afm.sandbox.plain as plain

VERDICT_CAP = 4096
BUILTIN_NAMES = frozenset(dir(builtins))
# Special methods of the program's classes: forwarded (through a builtin, or called as
# they are), refused (the program would judge), or left to the base type.
THROUGH_BUILTIN = {"__len__": "len", "__iter__": "iter", "__next__": "next", "__str__": "str", "__bool__": "bool",
                   "__format__": "format", "__reversed__": "reversed", "__dir__": "dir", "__repr__": "repr"}
CALLED_AS_IS = frozenset({"__getitem__", "__setitem__", "__delitem__", "__missing__", "__int__", "__float__",
                          "__complex__", "__index__", "__abs__", "__neg__", "__pos__", "__invert__", "__round__",
                          "__trunc__", "__floor__", "__ceil__", "__enter__", "__length_hint__", "__bytes__",
                          "__fspath__"})
_ARITHMETIC = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift",
               "and", "or", "xor")
REFUSED = frozenset({"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__",
                     *(f"__{p}{op}__" for op in _ARITHMETIC for p in ("", "r", "i"))})
META_FORWARD = {"__iter__": "iter", "__len__": "len", "__reversed__": "reversed", "__bool__": "bool",
                "__repr__": "repr", "__getitem__": None, "__contains__": None}
INSTANCE_DUNDERS = frozenset({"__dict__", "__name__", "__qualname__", "__wrapped__", "__annotations__",
                              "__self__", "__func__", "__dataclass_fields__", "__match_args__", "__defaults__",
                              "__kwdefaults__", "__slots__", "__members__"})
CLASS_DUNDERS = frozenset({"__match_args__", "__annotations__", "__members__", "__dataclass_fields__",
                           "__dataclass_params__", "__wrapped__", "__abstractmethods__"})
CALLBACK_DUNDERS = frozenset({"__getitem__", "__setitem__", "__delitem__", "__contains__", "__eq__", "__ne__",
                              "__lt__", "__le__", "__gt__", "__ge__", "__neg__", "__pos__", "__invert__",
                              "__index__", "__int__", "__float__", "__enter__", "__exit__",
                              *(f"__{p}{op}__" for op in _ARITHMETIC for p in ("", "r"))})
CALLBACK_BUILTINS = {"len": len, "iter": iter, "next": next, "repr": repr, "str": str, "hash": hash,
                     "bool": bool, "format": format, "dir": dir, "reversed": reversed, "abs": abs}
VALUE_TYPES = {t.__name__: t for t in plain.VALUE_BASES}

STATE = {"verdict_fd": -1, "channel": None, "wire": None, "names": None, "test": ""}
FROM_PROGRAM: dict = {}  # id(exception) -> exception, for every exception the program raised
HASHES: dict = {}  # id(shadow) -> its hash, as the program computed it
LOCAL_NAMES: dict = {}  # shadow class -> the names its instances answer here
PROGRAM_NAMES_USED: dict = {}  # name -> whether it shadows a builtin


def conclude(verdict: str, cause: str = "", reason: str = "") -> None:
    """Write the verdict and end this process now (never returns)."""
    harness.flush_output()
    link = STATE["channel"]
    message = {"verdict": verdict, "cause": cause[:100], "reason": reason[:500],
               "requests": link.requests if link is not None else 0}
    line = plain.dumps(message) + b"\n"
    if len(line) > VERDICT_CAP:  # escaped characters: the reason in ASCII, shorter
        message["reason"] = reason.encode("ascii", "replace").decode("ascii")[:500]
        line = plain.dumps(message) + b"\n"
    try:
        os.write(STATE["verdict_fd"], line)
    finally:
        os._exit(0)


def refuse(why: str) -> None:
    conclude("unjudgeable", "unjudgeable", why)


def request(op: str, args: tuple = (), kwargs: dict | None = None):
    return STATE["channel"].request(op, args, kwargs)


def on_channel_failure(kind: str, detail: str) -> None:
    if kind == "closed":
        conclude("failed", "ended", "the program ended before the test finished")
    if kind == "garbled":
        conclude("failed", "garbled", f"the program's answers were out of format ({detail})")
    refuse(detail)


# -- shadows: the program's objects as this process sees them -----------------------------

class Remote:
    """What every shadow of an object of the program has."""

    __slots__ = ()

    def __setattr__(self, name, value):
        request("setattr", (self, name, value))

    def __delattr__(self, name):
        request("delattr", (self, name))

    def __repr__(self):
        return request("builtin", ("repr", self))

    def __dir__(self):
        return request("builtin", ("dir", self))

    def __copy__(self):
        return request("builtin", ("copy", self))

    def __deepcopy__(self, memo):
        return request("builtin", ("deepcopy", self))

    def __reduce_ex__(self, protocol):
        refuse(f"the test pickles an object of the program ({type(self).__name__})")


class Valued(Remote):
    """A shadow of an instance of a subclass of a plain type: the value is here, the
    attributes its type does not have are the program's."""

    __slots__ = ()

    def __getattr__(self, name):  # only what the base type does not answer
        if name.startswith("__") and name.endswith("__") and name not in INSTANCE_DUNDERS:
            raise AttributeError(name)
        return request("getattr", (self, name))


class Opaque(Remote):
    """A shadow of an object that is not plain data: every attribute is the program's."""

    __slots__ = ()

    def __getattribute__(self, name):
        if name in LOCAL_NAMES.get(type(self), ()):
            return object.__getattribute__(self, name)
        return request("getattr", (self, name))


def _through_builtin(name: str, op: str):
    def method(self, *args):
        return request("builtin", (op, self, *args))
    method.__name__ = name
    return method


def _as_is(name: str):
    def method(self, *args):
        return request("dunder", (self, name, *args))
    method.__name__ = name
    return method


def _refused(name: str):
    def method(self, *args):
        if name in ("__eq__", "__ne__") and args and args[0] is self:
            return request("dunder", (self, name, *args))  # the object against itself
        refuse(f"the test would let the program's own {type(self).__name__}.{name} decide "
               f"(a comparison, a containment test or arithmetic on one of its objects)")
    method.__name__ = name
    return method


def _method(name: str):
    def method(self, *args, **kwargs):
        return request("method", (self, name, *args), kwargs)
    method.__name__ = name
    return method


def _call(self, *args, **kwargs):
    return request("call", (self, *args), kwargs)


def _hash(self):
    found = HASHES.get(id(self))
    if found is None:
        found = HASHES[id(self)] = request("builtin", ("hash", self))
    return found


def _exit(self, exc_type, exc, traceback):
    result = request("dunder", (self, "__exit__", exc_type, exc, None))
    if exc_type is not None and result:
        refuse(f"a context manager of the program ({type(self).__name__}) would swallow the test's "
               f"{exc_type.__name__}")
    return result


class ShadowMeta(type):
    """The metaclass of every shadow class: calling one builds the object in the program."""

    def __call__(cls, *args, **kwargs):
        if id(cls) not in STATE["wire"].class_ref:
            refuse(f"the test subclasses {cls.__mro__[1].__name__}, a class of the program")
        return request("call", (cls, *args), kwargs)

    def __getattr__(cls, name):
        if (name.startswith("__") and name.endswith("__") and name not in CLASS_DUNDERS) \
                or id(cls) not in STATE["wire"].class_ref:
            raise AttributeError(name)
        return request("getattr", (cls, name))

    def __setattr__(cls, name, value):
        if id(cls) in STATE["wire"].class_ref and not name.startswith("_abc_"):
            request("setattr", (cls, name, value))
        else:
            type.__setattr__(cls, name, value)


def _meta_for(name: str, dunders) -> type:
    ns = {}
    for dunder in dunders:
        if dunder not in META_FORWARD:
            continue
        if dunder == "__contains__":
            ns[dunder] = _refused(dunder)
        elif META_FORWARD[dunder] is None:
            ns[dunder] = _as_is(dunder)
        else:
            ns[dunder] = _through_builtin(dunder, META_FORWARD[dunder])
    return type(f"{name}Type", (ShadowMeta,), ns) if ns else ShadowMeta


def _allowed_base(value) -> bool:
    if not isinstance(value, type):
        return False
    if value in plain.PLAIN_BASES or value is object:
        return value is not bool
    if isinstance(value, ShadowMeta):
        return True
    return issubclass(value, BaseException) and value.__module__ == "builtins"


class RefereeWire(plain.Wire):
    """The referee's half of the wire: the program's objects come in as shadows, the
    test's objects go out as handles (``{"o": n}``) the candidate can only ask about."""

    side = "b"
    strict_names = True

    def __init__(self) -> None:
        super().__init__()
        self.foreign: dict = {}  # ref -> shadow of an object of the program
        self.ref_of: dict = {}  # id(shadow) -> ref
        self.classes: dict = {}  # ref -> shadow class
        self.class_ref: dict = {}  # id(shadow class) -> ref
        self.plain_of: dict = {}  # shadow class -> its plain base (or None)
        self.exception_text: dict = {}  # id(exception) -> str() as the program gave it
        self.handles: dict = {}  # ref -> object of the test the candidate holds a handle to
        self.handle_of: dict = {}
        self.refs = iter(range(1, 1 << 62))

    # -- the test's objects, out --------------------------------------------------------
    def encode_other(self, value, depth: int):
        ref = self.ref_of.get(id(value))
        if ref is None:
            ref = self.class_ref.get(id(value))
        if ref is not None:
            return {"back": ref}
        if isinstance(value, BaseException):
            return self.enc_exception(value, depth)
        ref = self.handle_of.get(id(value))
        if ref is None:
            ref = next(self.refs)
            self.handles[ref] = value
            self.handle_of[id(value)] = ref
        out = {"o": ref, "tn": type(value).__name__[:100]}
        if isinstance(value, type) and issubclass(value, BaseException):
            out["tn"] = value.__name__[:100]
            out["xb"] = next(c.__name__ for c in value.__mro__ if c.__module__ == "builtins")
        return out

    # -- the program's objects, in -------------------------------------------------------
    def decode_other(self, data: dict, depth: int):
        if "back" in data and len(data) == 1:
            ref = data["back"]
            if type(ref) is not int or ref not in self.handles:
                raise plain.WireError("a handle this side never gave")
            return self.handles[ref]
        if "C" in data:
            return self.shadow_class(data, depth)
        if "o" in data:
            return self.shadow(data, depth)
        raise plain.WireError(f"not a value: {str(data)[:80]}")

    def shadow(self, data: dict, depth: int):
        ref = data["o"]
        if type(ref) is not int:
            raise plain.WireError("a handle is a number")
        found = self.foreign.get(ref)
        if found is not None:
            if "m" in data:
                self.dec_mirror(data, found, depth)
            return found
        cls = self.dec(data.get("c"), depth + 1)
        if id(cls) not in self.class_ref:
            raise plain.WireError("a handle's class must be a class of the program")
        base = self.plain_of.get(cls)
        if base in plain.KINDS:
            if "m" not in data:
                raise plain.WireError("a container's shadow needs its content")
            obj = base.__new__(cls)
            if base is plain.KIND_TYPES["dq"]:
                mx = data.get("mx")
                base.__init__(obj, (), mx if type(mx) is int and mx >= 0 else None)
            self.keep(ref, obj)
            self.dec_mirror(data, obj, depth)
        elif base is not None:
            value = self.dec(data.get("v"), depth + 1)
            if type(value) is not base:
                raise plain.WireError(f"a {base.__name__} subclass needs a {base.__name__} value")
            obj = base.__new__(cls, value)
            self.keep(ref, obj)
        else:
            obj = object.__new__(cls)
            self.keep(ref, obj)
        if type(data.get("h")) is int:
            HASHES[id(obj)] = data["h"]
        return obj

    def keep(self, ref: int, obj) -> None:
        self.foreign[ref] = obj
        self.ref_of[id(obj)] = ref

    def shadow_class(self, data: dict, depth: int):
        ref = data["C"]
        if type(ref) is not int:
            raise plain.WireError("a class handle is a number")
        found = self.classes.get(ref)
        if found is not None:
            return found
        desc = data.get("d")
        if type(desc) is not dict:
            raise plain.WireError("a class is described the first time it is sent")
        cls = self.build_class(desc, depth)
        self.classes[ref] = cls
        self.class_ref[id(cls)] = ref
        return cls

    def build_class(self, desc: dict, depth: int) -> type:
        def text(key: str) -> str:
            value = desc.get(key)
            return value[: plain.MAX_NAME] if type(value) is str else "?"

        def names(key: str, cap: int) -> list:
            value = desc.get(key)
            if type(value) is not list:
                return []
            return [n for n in value[:cap] if type(n) is str and n.isidentifier()]

        name = text("name") if text("name").isidentifier() else "ProgramObject"
        bases = [b for b in (self.dec(b, depth + 1) for b in (desc.get("bases") or [])[:20]) if _allowed_base(b)]
        bases = [b for b in bases if b is not object]
        kind = desc.get("plain")
        base = plain.KIND_TYPES.get(kind) or VALUE_TYPES.get(kind) if type(kind) is str else None
        if base is bool:
            base = int
        exception = any(issubclass(b, BaseException) for b in bases)
        if base is not None and not any(issubclass(b, base) for b in bases):
            bases.append(base)
        ns = {"__module__": text("mod"), "__qualname__": text("qual"), "__slots__": (),
              "__doc__": desc.get("doc") if type(desc.get("doc")) is str else None}
        dunders = {d for d in names("dunders", 300) if d.startswith("__") and d.endswith("__")}
        if exception:
            if "__str__" in dunders:
                ns["__str__"] = lambda exc: self.exception_text.get(id(exc), "")
            del ns["__slots__"]
            meta, mixins = type, []
        else:
            for dunder in dunders:
                if dunder in THROUGH_BUILTIN:
                    ns[dunder] = _through_builtin(dunder, THROUGH_BUILTIN[dunder])
                elif dunder in CALLED_AS_IS:
                    ns[dunder] = _as_is(dunder)
                elif dunder in REFUSED:
                    ns[dunder] = _refused(dunder)
                elif dunder == "__call__":
                    ns[dunder] = _call
                elif dunder == "__exit__":
                    ns[dunder] = _exit
            hash_kind = desc.get("hash")
            if hash_kind == "none":
                ns["__hash__"] = None
            elif hash_kind == "custom":
                ns["__hash__"] = _hash
            elif "__eq__" in ns:  # keep the inherited hash (a class with __eq__ alone gets none)
                ns["__hash__"] = (base or object).__hash__
            for method in names("methods", 1000):
                if method not in ns and not method.startswith("__"):
                    ns[method] = _method(method)
            mixin = Valued if base is not None else Opaque
            mixins = [] if any(issubclass(b, Remote) for b in bases) else [mixin]
            meta = _meta_for(name, names("meta", 100))
        cls = None
        for attempt in (bases + mixins, ([base] if base else []) + mixins, mixins or [Exception]):
            try:
                cls = meta(name, tuple(attempt), dict(ns))
                break
            except TypeError:
                continue
        if cls is None:
            raise plain.WireError(f"cannot build a class like {name}")
        self.plain_of[cls] = base if not exception else None
        if not exception:
            own = {k for k, v in ns.items() if callable(v)}
            LOCAL_NAMES[cls] = frozenset({"__class__", *own}).union(*(LOCAL_NAMES.get(b, ()) for b in cls.__mro__[1:]))
        return cls

    # -- exceptions the program raised --------------------------------------------------
    def make_exception(self, cls: type, args: tuple, text: str) -> BaseException:
        if isinstance(cls, ShadowMeta) or id(cls) in self.class_ref:
            exc = BaseException.__new__(cls, *args)
            exc.args = args
        else:
            exc = super().make_exception(cls, args, text)
        self.exception_text[id(exc)] = text
        FROM_PROGRAM[id(exc)] = exc
        return exc


# -- the test's namespace -----------------------------------------------------------------

class TestGlobals(dict):
    """The test's globals: a name it does not define is looked up in the program's, then
    in the builtins (what one shared ``__main__`` would do)."""

    def __missing__(self, name):
        known = STATE["names"]
        if type(name) is not str or (name in BUILTIN_NAMES and (known is None or name not in known)):
            raise KeyError(name)
        if known is not None and name not in known and name.startswith("__"):
            raise KeyError(name)
        try:
            value = request("global", (name,))
        except NameError:
            raise KeyError(name) from None
        shadows = name in BUILTIN_NAMES and value is not getattr(builtins, name)
        PROGRAM_NAMES_USED[name] = shadows
        if len(PROGRAM_NAMES_USED) > 1 and any(PROGRAM_NAMES_USED.values()):
            redefined = sorted(n for n, s in PROGRAM_NAMES_USED.items() if s)
            refuse(f"the program redefines {', '.join(redefined)}, which the test uses next to the "
                   f"program's {', '.join(sorted(n for n in PROGRAM_NAMES_USED if n not in redefined))}")
        return value

    def __setitem__(self, name, value):
        """The test binds a name: in one shared ``__main__`` the program's code would now
        see the test's value. Not emulated (the program would reach the test's data), so a
        name the program's code reads as a global makes the test unjudgeable (unless it is
        bound to what the program has under it: the same module, type or function)."""
        dict.__setitem__(self, name, value)
        if type(name) is not str or name in REBOUND or name.startswith("__"):
            return
        REBOUND.add(name)
        known = STATE["names"]
        if known is None or name in known:
            try:
                program_value = request("global", (name,))
            except NameError:
                program_value = None
            if program_value is value:
                return
            if isinstance(value, type(sys)) and isinstance(program_value, Opaque) and \
                    request("getattr", (program_value, "__name__")) == value.__name__:
                return  # the same module of the standard library, imported by both
        if request("references", (name,)):
            refuse(f"the test binds {name}, which the program's code reads as a global")


REBOUND: set = set()


# -- requests of the candidate on the test's objects --------------------------------------

def _public(name) -> str:
    if type(name) is not str or name.startswith("_"):
        raise AttributeError(f"sandbox: the program cannot reach {name!r} of the test's objects")
    return name


def answer_callback(op: str, args: list, kwargs: dict):
    """The program uses an object the test gave it (a ``key=`` function, an object of a
    test class): only its public face, as one process would let it."""
    if op == "call":
        return args[0](*args[1:], **kwargs)
    if op == "method":
        return getattr(args[0], _public(args[1]))(*args[2:], **kwargs)
    if op == "getattr":
        return getattr(args[0], _public(args[1]))
    if op == "setattr":
        return setattr(args[0], _public(args[1]), args[2])
    if op == "delattr":
        return delattr(args[0], _public(args[1]))
    if op == "dunder" and args[1] in CALLBACK_DUNDERS:
        return getattr(type(args[0]), args[1])(args[0], *args[2:])
    if op == "builtin" and args and args[0] in CALLBACK_BUILTINS:
        return CALLBACK_BUILTINS[args[0]](*args[1:])
    if op == "stdin" and len(args) == 2 and args[0] in ("readline", "read", "readlines") and type(args[1]) is int:
        return getattr(sys.stdin, args[0])(args[1])
    raise TypeError(f"sandbox: the program cannot {op} the test's objects")


# -- the verdict ----------------------------------------------------------------------------

def cause_of(exc: BaseException) -> str:
    name = type(exc).__name__
    if FROM_PROGRAM.get(id(exc)) is exc:
        if isinstance(exc, SystemExit):
            return "exited"
        if isinstance(exc, (PermissionError, ImportError)) and str(exc).startswith("sandbox:"):
            return "blocked"
        return f"error:{name}"
    if isinstance(exc, AssertionError):
        return "assertion"
    return f"error:{name}"


def describe_failure(exc: BaseException) -> str:
    name = type(exc).__name__
    line = ""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<test>":
            line = f"line {tb.tb_lineno}"
            source = STATE["test"].splitlines()
            if 0 < tb.tb_lineno <= len(source):
                line += ": " + source[tb.tb_lineno - 1].strip()[:200]
        tb = tb.tb_next
    try:
        message = str(exc)[:300]
    except Exception:  # noqa: BLE001
        message = ""
    if isinstance(exc, AssertionError) and FROM_PROGRAM.get(id(exc)) is not exc:
        return f"assertion failed ({line}{': ' + message if message else ''})"
    who = "the program" if FROM_PROGRAM.get(id(exc)) is exc else "the test"
    return f"{who} raised {name}{': ' + message if message else ''}{f' ({line})' if line else ''}"


def relay_printed(message: dict) -> None:
    """What the program printed, into the test's streams when the test captures them
    (else it is already in the program's own output)."""
    for key, stream, original in (("po", sys.stdout, ORIGINAL[0]), ("pe", sys.stderr, ORIGINAL[1])):
        text = message.get(key)
        if type(text) is str and text and stream is not original:
            stream.write(text)


ORIGINAL: list = [None, None]


# Standard-library modules whose code generation at run time cannot carry the program's
# text as code: a dataclass's methods and a namedtuple's __new__ are built from names
# checked as identifiers, ast.parse builds a tree and runs nothing (and the import system).
# Not typing: a string annotation (a ForwardRef) is evaluated, and a program's function
# can carry any string as one.
GENERATORS = ("dataclasses.py", "collections/__init__.py", "enum.py", "ast.py")
SAFE_UNPICKLE = frozenset({("copyreg", "_reconstructor"), ("copyreg", "__newobj__"), ("copyreg", "__newobj_ex__")})


def guard_run_time_code():
    """No text becomes code here while the test runs (see the module docstring). Installed
    before the tripwire (which refuses later hooks); returns its switch (``[armed]``:
    disarmed again to print a traceback, whose display parses the lines it shows)."""
    armed = [False]
    stdlib = os.path.dirname(os.__file__)
    allowed = frozenset(os.path.join(stdlib, name) for name in GENERATORS)
    getframe, refuse_ = sys._getframe, refuse

    def caller() -> str:
        frame = getframe(2)
        return frame.f_code.co_filename if frame is not None else ""

    def hook(event: str, args: tuple) -> None:
        if not armed[0]:
            return
        if event == "compile":
            where = caller()
            if where in allowed or where.startswith("<frozen importlib"):
                return
            refuse_("the test compiles code at run time (eval, exec, compile, doctest): its text may be the "
                    "program's, and would run here")
        elif event == "pickle.find_class":
            module, name = str(args[0]), str(args[1])
            if (module, name) not in SAFE_UNPICKLE and not plain.program_may_name(f"{module}:{name}"):
                refuse_(f"the test unpickles {module}.{name}: unpickled data may be the program's, and would run here")
        elif event in ("marshal.loads", "marshal.load") and not caller().startswith("<frozen importlib"):
            refuse_("the test unmarshals data at run time")
        elif event == "code.__new__":
            refuse_("the test builds a code object at run time")

    sys.addaudithook(hook)
    return armed


def main(orders: dict) -> None:
    guard = guard_run_time_code()
    harness.prepare(orders)
    ORIGINAL[:] = [sys.stdout, sys.stderr]
    STATE["verdict_fd"] = int(orders["verdict_fd"])
    STATE["test"] = test = orders.pop("test")
    try:
        code = compile(test, "<test>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
        sys.__excepthook__(type(exc), exc, exc.__traceback__)
        conclude("failed", f"error:{type(exc).__name__}", f"the test does not compile: {exc}")
    wire = STATE["wire"] = RefereeWire()
    link = STATE["channel"] = channel.Channel(int(orders["from_candidate"]), int(orders["to_candidate"]), wire,
                                              answer_callback, on_channel_failure, int(orders["max_message_bytes"]),
                                              strict=True, inbound=relay_printed)
    ready = link.receive()
    if "ready" not in ready:
        conclude("failed", "garbled", "the program's process did not start as it should")
    if not ready["ready"]:
        exc = ready.get("e")
        if isinstance(exc, BaseException):
            conclude("failed", cause_of(exc), describe_failure(exc))
        conclude("failed", "error", "the program raised")
    names = ready.get("names")
    STATE["names"] = frozenset(n for n in names if type(n) is str) if type(names) is list else None
    namespace = TestGlobals(__name__="__main__", __builtins__=builtins)
    guard[0] = True
    try:
        exec(code, namespace)
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: any exception fails the test
        guard[0] = False
        sys.__excepthook__(type(exc), exc, exc.__traceback__)
        conclude("failed", cause_of(exc), describe_failure(exc))
    conclude("passed")
