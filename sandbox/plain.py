"""The wire format: how values cross between the two sandboxed processes of a test.

A test runs in two processes, each behind the sandbox's boundary: the *candidate's*
(``harness.py``: the program and nothing else) and the *referee's* (``referee.py``: the
test, run by the real interpreter, with no code of the program). They talk over two pipes
in JSON lines (``channel.py``) and every value in a message is encoded here. This module
uses the standard library only: it is compiled by the evaluator and shipped into both
processes (``isolation.py``), and the evaluator itself never decodes a value of the
program's.

* ``None``, ``bool``, ``str``, finite ``float`` and ints below 2**62 are JSON values;
* immutable values go by value, tagged: ``{"t": [...]}`` tuple, ``{"fs": [...]}``
  frozenset, ``{"b": base64}`` bytes, ``{"i": hex}`` larger ints, ``{"f": "nan"}`` (and
  ``"inf"``, ``"-inf"``), ``{"c": [re, im]}`` complex, ``{"r": [start, stop, step]}``,
  ``{"sl": [...]}`` slice, ``{"E": "Ellipsis"}``, ``{"Q": [n, d]}`` Fraction, ``{"D": text}``
  Decimal, ``{"dt": [kind, ...]}`` date, time, datetime, timedelta and fixed timezones,
  ``{"ty": "module:name"}`` a type of the standard library, ``{"fn": "module:name"}`` one of
  its functions, ``{"mod": name}`` one of its modules, ``{"x": [class, args, text, attrs]}``
  an exception, ``{"view": [kind, dict]}`` a view of a dict;
* mutable containers (list, dict, set, bytearray, deque, Counter, OrderedDict,
  defaultdict) are *mirrored*: one key per object (``{"m": key, "k": kind, "v": content}``
  the first time, ``{"m": key}`` after), both sides keep the object under its key, and
  every message first carries the content of each mirrored object the other side holds
  that changed since the last message (``sync_out``). So identity, aliasing and changes
  made through an argument, in either process, are what one process would see. A side
  forgets an object no one else refers to (``prune``) and says so (``take_drops``);
* anything else stays in the process that made it, as a handle: the harness and the
  referee say what a handle of theirs looks like on the other side (``encode_other``,
  ``decode_other``).

The decoder is strict and bounded: an unknown tag, a malformed value, more than
``MAX_DEPTH`` levels, or a set or dict whose items' hashes collide (a judgement that would
not be bounded in time) is a :class:`WireError` or :class:`Refused`, never a hang.
"""

import binascii
import collections
import itertools
import math
import operator
import sys
import types

MAX_DEPTH = 100
JSON_INT = 1 << 62
MAX_KEY = 24
MAX_NAME = 200
COLLISION_ITEMS = 512  # sets and dicts this large have their items' hashes checked
COLLISION_LIMIT = 64  # more items than this on one hash value: refused
FAST_TYPES = (frozenset({str}), frozenset({bool}), frozenset({type(None)}), frozenset({str, type(None)}))
NONE_TYPE = type(None)
INTS, FLOATS = frozenset({int}), frozenset({float})

KINDS = {list: "l", dict: "d", set: "s", bytearray: "ba", collections.deque: "dq", collections.Counter: "C",
         collections.OrderedDict: "O", collections.defaultdict: "dd"}
KIND_TYPES = {kind: tp for tp, kind in KINDS.items()}
DICT_KINDS = frozenset({"d", "C", "O", "dd"})
# Immutable builtin types whose subclasses carry a plain value (the mutable ones are KINDS).
VALUE_BASES = (bool, int, float, complex, str, bytes, tuple, frozenset)
PLAIN_BASES = (*VALUE_BASES, *KINDS)


class WireError(ValueError):
    """What came over the wire is not a value in this format."""


class Refused(Exception):
    """A value this side will not take in: judging it would not be bounded."""


class TooLarge(Exception):
    """A value this side cannot send within the format's bounds."""


def _stdlib_module(name: str):
    """A module of the standard library, imported here (the wire names only those; this
    runs inside the sandbox, where ``afm.imports`` is not)."""
    __import__(name)
    return sys.modules[name]


def stdlib(module: str) -> bool:
    """A module of the standard library (never ``__main__`` or the program's)."""
    top = module.partition(".")[0]
    return module == "builtins" or (top in sys.stdlib_module_names and not top.startswith("__"))


_RESOLVED: dict = {}


def resolve(name: str):
    """``module:qualname`` of the standard library, imported here (AttributeError,
    ImportError or WireError when it names nothing there)."""
    found = _RESOLVED.get(name)
    if found is not None:
        return found
    if type(name) is not str or len(name) > MAX_NAME or ":" not in name:
        raise WireError("a name needs module:qualname")
    module, _, qual = name.partition(":")
    if not stdlib(module) or "<" in qual:
        raise WireError(f"{module} is not a module of the standard library")
    value = _stdlib_module(module)
    for part in qual.split("."):
        value = getattr(value, part)
    _RESOLVED[name] = value
    return value


def _named(value, module: str, qual: str) -> str | None:
    if not (isinstance(module, str) and isinstance(qual, str)) or not stdlib(module) or "<" in qual:
        return None
    name = f"{module}:{qual}"
    try:
        return name if resolve(name) is value else None
    except (ImportError, AttributeError, WireError, TypeError, ValueError):
        return None


_TYPE_NAMES: dict = {}


def type_name(tp: type) -> str | None:
    """The ``module:qualname`` a type of the standard library is found under, else None."""
    try:
        return _TYPE_NAMES[tp]
    except (KeyError, TypeError):
        pass
    name = _named(tp, type.__getattribute__(tp, "__module__"), type.__getattribute__(tp, "__qualname__"))
    if name is None:  # builtin types only the types module names (NoneType, GeneratorType, ...)
        found = [k for k, v in vars(types).items() if v is tp and not k.startswith("_")]
        name = f"types:{found[0]}" if found else None
    if tp.__module__ == "builtins" or name is not None:
        _TYPE_NAMES[tp] = name
    return name


# What the program's process may name by value (``ty``, ``fn``, ``mod``): the referee turns a
# name into its own real object, which the test may then call with values the program
# chose (HumanEval/38: ``candidate(encode_cyclic(s))``), so only what cannot run code,
# import, or reach a descriptor from any argument: pure functions, value types, the
# exceptions, modules whose attributes the test names itself. Anything else of the
# program's crosses as a handle, and calling it runs it in the program's process.
SAFE_MODULES = frozenset({"math", "cmath", "string", "itertools", "functools", "operator", "collections", "heapq",
                          "bisect", "statistics", "fractions", "decimal", "datetime", "copy", "random", "re", "enum",
                          "numbers", "typing", "dataclasses", "unicodedata", "textwrap", "calendar", "array"})
SAFE_BUILTIN_FUNCTIONS = frozenset({"abs", "all", "any", "ascii", "bin", "callable", "chr", "divmod", "format", "hash",
                                    "hex", "id", "isinstance", "issubclass", "iter", "len", "max", "min", "next",
                                    "oct", "ord", "pow", "repr", "round", "sorted", "sum"})
SAFE_BUILTIN_TYPES = frozenset({"bool", "int", "float", "complex", "str", "bytes", "bytearray", "list", "tuple",
                                "dict", "set", "frozenset", "range", "slice", "object", "type", "map", "filter", "zip",
                                "enumerate", "reversed", "property", "staticmethod", "classmethod"})
SAFE_FUNCTION_MODULES = frozenset({"math", "cmath", "heapq", "bisect", "statistics", "unicodedata"})
SAFE_TYPE_MODULES = frozenset({"collections", "fractions", "decimal", "_decimal", "datetime", "itertools", "enum",
                               "numbers"})
SAFE_NAMES = frozenset({"functools:reduce", "functools:cmp_to_key", "copy:copy", "copy:deepcopy", "string:capwords",
                        "types:NoneType", "types:EllipsisType", "types:NotImplementedType", "types:SimpleNamespace",
                        "types:MappingProxyType", "types:GeneratorType", "types:FunctionType", "types:MethodType",
                        "types:BuiltinFunctionType", *(f"operator:{n}" for n in (
                            "lt le eq ne ge gt not_ truth is_ is_not abs add and_ floordiv index inv invert lshift "
                            "mod mul matmul neg or_ pos pow rshift sub truediv xor concat contains countOf getitem "
                            "indexOf").split())})


def program_may_name(name: str) -> bool:
    """May the program's process send ``name`` (a module, or ``module:qualname``) by value?"""
    if ":" not in name:
        return name in SAFE_MODULES
    if name in SAFE_NAMES:
        return True
    module, _, qual = name.partition(":")
    if module == "builtins":
        owner, _, method = qual.partition(".")
        if method:  # a method of a value type, looked up on its instances: str.lower, list.index
            # (not str.format: its fields reach the attributes of whatever it is given)
            return owner in SAFE_BUILTIN_TYPES and not method.startswith("_") and "format" not in method
        if qual in SAFE_BUILTIN_FUNCTIONS or qual in SAFE_BUILTIN_TYPES:
            return True
        import builtins

        found = getattr(builtins, qual, None)
        return isinstance(found, type) and issubclass(found, BaseException)
    if module in SAFE_FUNCTION_MODULES:
        return True
    if module in SAFE_TYPE_MODULES:
        try:
            return isinstance(resolve(name), type)
        except (ImportError, AttributeError, WireError, TypeError, ValueError):
            return False
    return False


FUNCTION_TYPES = (types.BuiltinFunctionType, types.FunctionType, types.MethodDescriptorType,
                  types.WrapperDescriptorType, types.ClassMethodDescriptorType)


def function_name(fn) -> str | None:
    """``module:qualname`` of a function (or a method of a type) of the standard library."""
    owner = getattr(fn, "__objclass__", None)
    if isinstance(owner, type):
        module = owner.__module__
    elif type(fn) is types.BuiltinFunctionType and isinstance(fn.__self__, types.ModuleType):
        module = fn.__self__.__name__
    elif type(fn) is types.BuiltinFunctionType and fn.__self__ is not None:
        return None  # a bound method of some object
    else:
        module = getattr(fn, "__module__", None)
    return _named(fn, module, getattr(fn, "__qualname__", None))


# -- the shallow content of a mirrored container, by its base type's own methods --------

def items_of(obj, kind: str):
    if kind == "l":
        return tuple(list.__iter__(obj))
    if kind == "dq":
        return tuple(collections.deque.__iter__(obj))
    if kind == "s":
        return tuple(set.__iter__(obj))
    if kind == "ba":
        return bytes(obj)
    pairs = collections.OrderedDict.items(obj) if kind == "O" else dict.items(obj)
    flat = tuple(itertools.chain.from_iterable(pairs))
    if kind == "dd":
        flat += (obj.default_factory,)
    return flat


def same(a, b) -> bool:
    """Did the content stay the same (the same objects, in the same order)?"""
    if type(a) is bytes:
        return a == b
    return len(a) == len(b) and all(map(operator.is_, a, b))


def refill(obj, kind: str, items) -> None:
    """Replace the content of ``obj`` in place (its identity is what matters)."""
    if kind == "l":
        list.__setitem__(obj, slice(None), items)
    elif kind == "dq":
        collections.deque.clear(obj)
        collections.deque.extend(obj, items)
    elif kind == "s":
        set.clear(obj)
        set.update(obj, items)
    elif kind == "ba":
        bytearray.__setitem__(obj, slice(None), items)
    elif kind == "O":
        collections.OrderedDict.clear(obj)
        collections.OrderedDict.update(obj, items)
    else:
        dict.clear(obj)
        dict.update(obj, items)


SET_SEARCH_ITEMS = 5000  # larger sets go in iteration order, unchecked
SET_SEARCH_BUILDS = 200


def _prefix(a: list, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x is not y:
            break
        n += 1
    return n


def set_recipe(items: tuple) -> tuple[list, bool]:
    """A sequence, and whether to insert it presized (through a dict), that builds a set
    iterating in the order of ``items`` (a set's iteration order) in any process with
    the same hash seed: the program and the test see one order, as in one process.
    Found by a short search checked here; when none is found, the iteration order."""
    target = list(items)
    if len(target) < 2 or len(target) > SET_SEARCH_ITEMS:
        return target, False
    builds = 0
    for presized in (False, True):
        seq = list(target)
        got = list(set(dict.fromkeys(seq)) if presized else set(seq))
        best = _prefix(got, target)
        builds += 1
        while best < len(target) and builds < SET_SEARCH_BUILDS:
            want, other = target[best], got[best]
            rest_w = [x for x in seq if x is not want]
            rest_o = [x for x in seq if x is not other]
            swapped = list(seq)
            i, j = swapped.index(want), swapped.index(other)
            swapped[i], swapped[j] = other, want
            candidates = [rest_w[:rest_w.index(other)] + [want] + rest_w[rest_w.index(other):],
                          rest_o + [other], [want] + rest_w, rest_w + [want], [other] + rest_o, swapped]
            scored = []
            for cand in candidates:
                built = list(set(dict.fromkeys(cand)) if presized else set(cand))
                builds += 1
                scored.append((_prefix(built, target), cand, built))
            score, cand, built = max(scored, key=lambda t: t[0])
            if score <= best:
                break
            best, seq, got = score, cand, built
        if best == len(target):
            return seq, presized
    return target, False


def build_set(kind: type, items: list, presized: bool):
    return kind(dict.fromkeys(items)) if presized else kind(items)


def check_hashes(items) -> None:
    """A large set or dict whose items share a hash would take quadratic time to build
    (or to look up in): refused, as the judgement would not be bounded."""
    if len(items) >= COLLISION_ITEMS:
        top = collections.Counter(map(hash, items)).most_common(1)
        if top and top[0][1] > COLLISION_LIMIT:
            raise Refused(f"{top[0][1]} items of one set or dict share a hash")


def _b64(data) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _unb64(text) -> bytes:
    if type(text) is not str:
        raise WireError("expected base64 text")
    try:
        return binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (ValueError, UnicodeError, binascii.Error) as exc:
        raise WireError(f"bad base64: {exc}") from None


# -- JSON lines, without the json package (it imports re: a fifth of a start-up) --------

class _ScanContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict = {}

    @staticmethod
    def parse_constant(name):
        raise WireError(f"{name} is not JSON")


def _no_default(value):
    raise TypeError(f"{type(value).__name__} is not JSON")


try:
    import _json

    _SCAN = _json.make_scanner(_ScanContext())
    _ENCODE = _json.make_encoder(None, _no_default, _json.encode_basestring_ascii, None, ":", ",", False, False,
                                 False)

    def dumps(value) -> bytes:
        """One JSON value, ASCII, compact, no NaN (TypeError/ValueError otherwise)."""
        return "".join(_ENCODE(value, 0)).encode("ascii")

    def loads(data: bytes):
        """One JSON value (WireError when it is not exactly one)."""
        try:
            text = data.decode("ascii")
            value, end = _SCAN(text, 0)
        except (StopIteration, SystemError):  # SystemError: the scanner's error path needs json.decoder
            raise WireError("not JSON") from None
        except (UnicodeError, ValueError, RecursionError) as exc:
            raise WireError(f"not JSON: {type(exc).__name__}") from None
        finally:
            _ScanContext.memo.clear()
        if end != len(text):
            raise WireError("more than one JSON value on a line")
        return value
except ImportError:  # an interpreter without the C accelerator
    import json

    def dumps(value) -> bytes:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("ascii")

    def loads(data: bytes):
        try:
            return json.loads(data, parse_constant=_ScanContext.parse_constant)
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, WireError):
                raise
            raise WireError(f"not JSON: {type(exc).__name__}") from None


def _float_tag(v: float) -> dict:
    return {"f": "nan" if v != v else ("inf" if v > 0 else "-inf")}


class Wire:
    """One side's half of the wire: its mirrors and how it encodes and decodes."""

    side = "?"  # prefix of the keys of the mirrors this side creates

    def __init__(self) -> None:
        self.objs: dict = {}  # key -> mirrored object
        self.kinds: dict = {}  # key -> kind
        self.keys: dict = {}  # id(object) -> key
        self.snaps: dict = {}  # key -> content when last sent or received
        self.peer_has: set = set()  # keys the other side holds
        self.drops: list = []  # keys this side forgot, to tell the other side
        self.counter = itertools.count(1)
        self.encoders = {tuple: Wire._tuple, frozenset: Wire._frozenset, bytes: Wire._bytes,
                         complex: Wire._complex, range: Wire._range, slice: Wire._slice,
                         types.EllipsisType: Wire._singleton, types.NotImplementedType: Wire._singleton}
        self.tags = {"t": Wire._d_tuple, "fs": Wire._d_frozenset, "b": Wire._d_bytes, "i": Wire._d_int,
                     "f": Wire._d_float, "c": Wire._d_complex, "r": Wire._d_range, "sl": Wire._d_slice,
                     "E": Wire._d_singleton, "Q": Wire._d_fraction, "D": Wire._d_decimal, "dt": Wire._d_datetime,
                     "ty": Wire._d_type, "fn": Wire._d_function, "mod": Wire._d_module, "x": Wire._d_exception,
                     "view": Wire._d_view}

    # -- hooks the harness and the referee fill in --------------------------------------
    strict_names = False  # the referee: names from the program only as program_may_name allows

    def may_name(self, name: str) -> bool:
        """Send this type, function or module by name (else as a handle)?"""
        return True

    def encode_other(self, value, depth: int):
        raise TooLarge(f"{type(value).__name__} cannot be sent")

    def decode_other(self, data: dict, depth: int):
        raise WireError(f"not a value: {str(data)[:80]}")

    def exception_class(self, data, depth: int):
        """The class an exception of the other side is raised as here."""
        cls = self.dec(data, depth)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return cls
        raise WireError("an exception needs an exception class")

    # -- encoding ----------------------------------------------------------------------
    def enc(self, value, depth: int = 0):
        tp = type(value)
        if tp is str or tp is bool or value is None:
            return value
        if tp is int:
            return value if -JSON_INT < value < JSON_INT else {"i": format(value, "x")}
        if tp is float:
            return value if value - value == 0 else _float_tag(value)
        if depth > MAX_DEPTH:
            raise TooLarge(f"nested more than {MAX_DEPTH} levels deep")
        kind = KINDS.get(tp)
        if kind is not None:
            return self.enc_mirror(value, kind, depth)
        fn = self.encoders.get(tp)
        if fn is None:
            fn = self._stdlib_encoder(tp)
        if fn is not None:
            return fn(self, value, depth)
        if tp is type or isinstance(value, type):
            name = type_name(value)
            if name is not None and self.may_name(name):
                return {"ty": name}
        elif isinstance(value, FUNCTION_TYPES):
            name = function_name(value)
            if name is not None and self.may_name(name):
                return {"fn": name}
        elif tp is types.ModuleType:
            name = getattr(value, "__name__", None)
            if isinstance(name, str) and stdlib(name) and sys.modules.get(name) is value and self.may_name(name):
                return {"mod": name}
        elif isinstance(value, BaseException) and tp.__module__ == "builtins":
            return self.enc_exception(value, depth)
        return self.encode_other(value, depth)

    def _stdlib_encoder(self, tp: type):
        module = getattr(tp, "__module__", None)
        if module not in ("fractions", "decimal", "datetime", "_decimal", "_pydecimal", "builtins"):
            return None
        found = None
        if module == "fractions" and tp is getattr(sys.modules.get("fractions"), "Fraction", None):
            found = Wire._fraction
        elif module in ("decimal", "_decimal", "_pydecimal") and \
                tp is getattr(sys.modules.get("decimal"), "Decimal", None):
            found = Wire._decimal
        elif module == "datetime" and "datetime" in sys.modules:
            dt = sys.modules["datetime"]
            found = {dt.date: Wire._date, dt.datetime: Wire._datetime, dt.time: Wire._time,
                     dt.timedelta: Wire._timedelta, dt.timezone: Wire._timezone}.get(tp)
        elif module == "builtins" and tp in (type({}.keys()), type({}.values()), type({}.items())):
            found = Wire._view
        if found is not None:
            self.encoders[tp] = found
        return found

    def enc_seq(self, items, depth: int) -> list:
        kinds = frozenset(map(type, items))
        if kinds in FAST_TYPES:
            return list(items)
        if kinds == INTS and -JSON_INT < min(items) and max(items) < JSON_INT:
            return list(items)
        if kinds == FLOATS and all(map(math.isfinite, items)):
            return list(items)
        return [self.enc(v, depth + 1) for v in items]

    def enc_mirror(self, obj, kind: str, depth: int, extra: dict | None = None) -> dict:
        key = self.keys.get(id(obj))
        if key is not None and key in self.peer_has:
            return {"m": key, **(extra or {})}
        if key is None:
            key = f"{self.side}{next(self.counter)}"
            self.register(key, obj, kind)
        self.peer_has.add(key)
        snap = items_of(obj, kind)
        self.snaps[key] = snap
        out = {"m": key, "k": kind, **(extra or {}), "v": self.content(snap, kind, depth)}
        if kind == "s" and type(out["v"]) is tuple:
            out["v"], out["p"] = out["v"]
        if kind == "dq":
            out["mx"] = obj.maxlen
        elif kind == "dd":
            out["df"] = self.enc(obj.default_factory, depth + 1)
        return out

    def content(self, snap, kind: str, depth: int):
        """A container's content on the wire (a set's: its items and whether to presize)."""
        if kind == "ba":
            return _b64(snap)
        if kind == "dd":
            snap = snap[:-1]
        if kind == "s":
            seq, presized = set_recipe(snap)
            return self.enc_seq(seq, depth), int(presized)
        return self.enc_seq(snap, depth)

    def register(self, key: str, obj, kind: str) -> None:
        self.objs[key] = obj
        self.kinds[key] = kind
        self.keys[id(obj)] = key

    def enc_exception(self, exc: BaseException, depth: int) -> dict:
        args = []
        raw = BaseException.args.__get__(exc, type(exc))
        for a in raw if type(raw) is tuple else ():
            try:
                args.append(self.enc(a, depth + 1))
            except (TooLarge, RecursionError):
                args.append(repr(a)[:1000])
        attrs = {}
        try:
            own = object.__getattribute__(exc, "__dict__")
        except AttributeError:
            own = {}
        for name, value in list(dict.items(own))[:50] if isinstance(own, dict) else ():
            if isinstance(name, str) and not name.startswith("__"):
                try:
                    attrs[name[:MAX_NAME]] = self.enc(value, depth + 1)
                except (TooLarge, RecursionError):
                    pass
        try:
            text = str(exc)[:2000]
        except BaseException:  # noqa: BLE001 - a __str__ that raises
            text = ""
        return {"x": [self.enc_class_of_exception(type(exc), depth), args, text, attrs]}

    def enc_class_of_exception(self, cls: type, depth: int):
        return self.enc(cls, depth + 1)

    def _tuple(self, v, depth):
        return {"t": self.enc_seq(tuple.__getitem__(v, slice(None)), depth)}

    def _frozenset(self, v, depth):
        seq, presized = set_recipe(tuple(frozenset.__iter__(v)))
        return {"fs": self.enc_seq(seq, depth), **({"p": 1} if presized else {})}

    def _bytes(self, v, depth):
        return {"b": _b64(v)}

    def _complex(self, v, depth):
        return {"c": [self.enc(v.real), self.enc(v.imag)]}

    def _range(self, v, depth):
        return {"r": [self.enc(v.start), self.enc(v.stop), self.enc(v.step)]}

    def _slice(self, v, depth):
        return {"sl": [self.enc(v.start, depth + 1), self.enc(v.stop, depth + 1), self.enc(v.step, depth + 1)]}

    def _singleton(self, v, depth):
        return {"E": "Ellipsis" if v is Ellipsis else "NotImplemented"}

    def _fraction(self, v, depth):
        return {"Q": [self.enc(v.numerator), self.enc(v.denominator)]}

    def _decimal(self, v, depth):
        return {"D": str(v)}

    def _date(self, v, depth):
        return {"dt": ["date", v.year, v.month, v.day]}

    def _datetime(self, v, depth):
        return {"dt": ["datetime", v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond,
                       self._tz(v.tzinfo), v.fold]}

    def _time(self, v, depth):
        return {"dt": ["time", v.hour, v.minute, v.second, v.microsecond, self._tz(v.tzinfo), v.fold]}

    def _timedelta(self, v, depth):
        return {"dt": ["timedelta", v.days, v.seconds, v.microseconds]}

    def _timezone(self, v, depth):
        return {"dt": ["timezone", self._tz(v)]}

    def _tz(self, tz):
        if tz is None:
            return None
        dt = sys.modules["datetime"]
        if type(tz) is not dt.timezone:
            raise TooLarge("a time zone other than a fixed offset")
        offset = tz.utcoffset(None)
        name = tz.tzname(None)
        default = dt.timezone(offset).tzname(None)
        return [offset.days, offset.seconds, offset.microseconds, None if name == default else name]

    def _view(self, v, depth):
        import gc

        owners = [o for o in gc.get_referents(v) if isinstance(o, dict)]
        if len(owners) != 1:
            raise TooLarge("a view whose dict is not found")
        kind = {type({}.keys()): "keys", type({}.values()): "values"}.get(type(v), "items")
        return {"view": [kind, self.enc(owners[0], depth + 1)]}

    # -- messages: what changed, what was forgotten --------------------------------------
    def sync_out(self) -> list:
        """[key, content] for each mirrored object the other side holds that changed
        since it last saw it (encoded before the message's payload)."""
        out = []
        for key in [k for k in self.peer_has if k in self.objs]:
            kind = self.kinds[key]
            snap = items_of(self.objs[key], kind)
            if not same(snap, self.snaps[key]):
                self.snaps[key] = snap
                entry = [key, self.content(snap, kind, 0)]
                if kind == "dd":
                    entry.append(self.enc(snap[-1], 1))
                elif kind == "s":
                    entry = [key, *entry[1]]
                out.append(entry)
        return out

    def prune(self) -> None:
        """Forget mirrored objects nothing but this table refers to: neither side's code
        can reach them any more."""
        for key in list(self.objs):
            if sys.getrefcount(self.objs[key]) <= 2:  # the table and getrefcount's argument
                obj = self.objs.pop(key)
                del self.kinds[key], self.snaps[key]
                self.keys.pop(id(obj), None)
                if key in self.peer_has:
                    self.drops.append(key)
                    self.peer_has.discard(key)

    def take_drops(self) -> list:
        out, self.drops = self.drops, []
        return out

    def apply_sync(self, entries, depth: int = 0) -> None:
        if type(entries) is not list:
            raise WireError("sync needs a list")
        for entry in entries:
            if type(entry) is not list or len(entry) not in (2, 3) or entry[0] not in self.objs:
                raise WireError("a sync entry names no mirrored object")
            key = entry[0]
            obj, kind = self.objs[key], self.kinds[key]
            self.fill(obj, kind, entry[1], depth, presized=len(entry) == 3 and entry[2] == 1)
            if kind == "dd":
                obj.default_factory = self.dec(entry[2], depth + 1) if len(entry) == 3 else None
            self.snaps[key] = items_of(obj, kind)

    def apply_drops(self, keys) -> None:
        if type(keys) is not list:
            raise WireError("drops need a list")
        for key in keys:
            self.peer_has.discard(key)

    # -- decoding ------------------------------------------------------------------------
    def dec(self, data, depth: int = 0):
        tp = type(data)
        if tp is str or tp is int or tp is float or tp is bool or data is None:
            return data
        if depth > MAX_DEPTH:
            raise WireError(f"nested more than {MAX_DEPTH} levels deep")
        if tp is not dict:
            raise WireError("a bare array is not a value")
        if "m" in data and "o" not in data:
            return self.dec_mirror(data, None, depth)
        if "fs" in data and data.get("p") == 1 and len(data) == 2:
            try:
                return self._d_frozenset(data["fs"], depth, presized=True)
            except TypeError as exc:
                raise WireError(f"fs: {exc}"[:200]) from None
        if len(data) == 1:
            (tag, body), = data.items()
            fn = self.tags.get(tag)
            if fn is not None:
                try:
                    return fn(self, body, depth)
                except (TypeError, ValueError, OverflowError, ArithmeticError, AttributeError, ImportError) as exc:
                    if isinstance(exc, WireError):
                        raise
                    raise WireError(f"{tag}: {exc}"[:200]) from None
        return self.decode_other(data, depth)

    def dec_seq(self, data, depth: int) -> list:
        if type(data) is not list:
            raise WireError("expected an array")
        kinds = frozenset(map(type, data))
        if kinds <= {str, int, float, bool, NONE_TYPE}:
            return data
        return [self.dec(v, depth + 1) for v in data]

    def dec_mirror(self, data: dict, made, depth: int):
        """A mirrored object: the known one (its content replaced when sent), or a new
        one (``made``: an object the caller built for it, e.g. a referee's shadow)."""
        key = data["m"]
        if type(key) is not str or not 0 < len(key) <= MAX_KEY:
            raise WireError("a mirror needs a short key")
        obj = self.objs.get(key)
        if "v" not in data:
            if obj is None:
                raise WireError(f"mirror {key} is unknown here")
            return obj
        kind = data.get("k")
        if kind not in KIND_TYPES:
            raise WireError(f"unknown kind {kind!r}")
        if obj is None:
            obj = made
            if obj is None:
                if kind == "dq":
                    mx = data.get("mx")
                    if mx is not None and (type(mx) is not int or mx < 0):
                        raise WireError("a deque's maxlen")
                    obj = collections.deque(maxlen=mx)
                else:
                    obj = KIND_TYPES[kind]()
            self.register(key, obj, kind)
        elif self.kinds[key] != kind:
            raise WireError(f"mirror {key} changed kind")
        self.peer_has.add(key)
        self.fill(obj, kind, data["v"], depth, presized=data.get("p") == 1)
        if kind == "dd":
            obj.default_factory = self.dec(data.get("df"), depth + 1)
        self.snaps[key] = items_of(obj, kind)
        return obj

    def fill(self, obj, kind: str, content, depth: int, presized: bool = False) -> None:
        if kind == "ba":
            refill(obj, kind, _unb64(content))
            return
        items = self.dec_seq(content, depth)
        try:
            if kind in DICT_KINDS:
                if len(items) % 2:
                    raise WireError("a dict needs key, value pairs")
                keys = items[0::2]
                check_hashes(keys)
                refill(obj, kind, zip(keys, items[1::2]))
            else:
                if kind == "s":
                    check_hashes(items)
                    set.clear(obj)
                    set.update(obj, dict.fromkeys(items) if presized else items)
                else:
                    refill(obj, kind, items)
        except TypeError as exc:  # an unhashable key or item
            raise WireError(f"{kind}: {exc}"[:200]) from None

    def _d_tuple(self, body, depth):
        return tuple(self.dec_seq(body, depth))

    def _d_frozenset(self, body, depth, presized: bool = False):
        items = self.dec_seq(body, depth)
        check_hashes(items)
        return build_set(frozenset, items, presized)

    def _d_bytes(self, body, depth):
        return _unb64(body)

    def _d_int(self, body, depth):
        if type(body) is not str:
            raise WireError("a big int needs hex")
        return int(body, 16)

    def _d_float(self, body, depth):
        if body not in ("nan", "inf", "-inf"):
            raise WireError("a float tag is nan, inf or -inf")
        return float(body)

    def _number(self, data, depth):
        value = self.dec(data, depth + 1)
        if type(value) not in (int, float):
            raise WireError("expected a number")
        return value

    def _integer(self, data, depth):
        value = self.dec(data, depth + 1)
        if type(value) is not int:
            raise WireError("expected an int")
        return value

    def _pair(self, body, n: int) -> list:
        if type(body) is not list or len(body) != n:
            raise WireError(f"expected {n} parts")
        return body

    def _d_complex(self, body, depth):
        re, im = self._pair(body, 2)
        return complex(self._number(re, depth), self._number(im, depth))

    def _d_range(self, body, depth):
        return range(*(self._integer(v, depth) for v in self._pair(body, 3)))

    def _d_slice(self, body, depth):
        return slice(*(self.dec(v, depth + 1) for v in self._pair(body, 3)))

    def _d_singleton(self, body, depth):
        if body not in ("Ellipsis", "NotImplemented"):
            raise WireError("unknown singleton")
        return Ellipsis if body == "Ellipsis" else NotImplemented

    def _d_fraction(self, body, depth):
        import fractions

        n, d = (self._integer(v, depth) for v in self._pair(body, 2))
        if d <= 0:
            raise WireError("a fraction's denominator must be positive")
        return fractions.Fraction(n, d, _normalize=False)  # normalised by the sender: no gcd here

    def _d_decimal(self, body, depth):
        import decimal

        if type(body) is not str or len(body) > 100_000:
            raise WireError("a decimal needs its text")
        return decimal.Decimal(body)

    def _d_datetime(self, body, depth):
        import datetime as dt

        if type(body) is not list or not body or not all(type(v) in (int, str, list, NONE_TYPE) for v in body):
            raise WireError("bad date or time")
        kind, *parts = body
        if kind == "date":
            return dt.date(*parts)
        if kind == "datetime":
            *fields, tz, fold = parts
            return dt.datetime(*fields, tzinfo=self._d_tz(tz), fold=fold)
        if kind == "time":
            *fields, tz, fold = parts
            return dt.time(*fields, tzinfo=self._d_tz(tz), fold=fold)
        if kind == "timedelta":
            return dt.timedelta(*parts)
        if kind == "timezone" and len(parts) == 1 and parts[0] is not None:
            return self._d_tz(parts[0])
        raise WireError(f"unknown date or time kind {kind!r}")

    def _d_tz(self, tz):
        import datetime as dt

        if tz is None:
            return None
        days, seconds, micros, name = self._pair(tz, 4)
        offset = dt.timedelta(days, seconds, micros)
        return dt.timezone(offset) if name is None else dt.timezone(offset, name)

    def _checked(self, name):
        if self.strict_names and not (type(name) is str and program_may_name(name)):
            raise WireError(f"{str(name)[:100]} may not be sent by name")
        return name

    def _d_type(self, body, depth):
        value = resolve(self._checked(body))
        if not isinstance(value, type):
            raise WireError(f"{body} is not a type")
        return value

    def _d_function(self, body, depth):
        value = resolve(self._checked(body))
        if not callable(value):
            raise WireError(f"{body} is not a function")
        return value

    def _d_module(self, body, depth):
        if type(body) is not str or len(body) > MAX_NAME or not stdlib(self._checked(body)):
            raise WireError("not a module of the standard library")
        return _stdlib_module(body)

    def _d_exception(self, body, depth):
        cls_data, args, text, attrs = self._pair(body, 4)
        cls = self.exception_class(cls_data, depth + 1)
        args = tuple(self.dec_seq(args, depth))
        if type(text) is not str or type(attrs) is not dict:
            raise WireError("bad exception")
        exc = self.make_exception(cls, args, text)
        for name, value in attrs.items():
            if name.startswith("_"):
                raise WireError("an exception's attributes are public")
            try:
                setattr(exc, name, self.dec(value, depth + 1))
            except (AttributeError, TypeError):
                pass
        return exc

    def make_exception(self, cls: type, args: tuple, text: str) -> BaseException:
        try:
            exc = cls(*args)
        except Exception:  # noqa: BLE001 - a constructor that wants other arguments
            exc = cls.__new__(cls)
        exc.args = args
        return exc

    def _d_view(self, body, depth):
        kind, owner = self._pair(body, 2)
        mapping = self.dec(owner, depth + 1)
        if not isinstance(mapping, dict) or kind not in ("keys", "values", "items"):
            raise WireError("a view needs a dict")
        return getattr(dict, kind)(mapping)
