"""Judge a test outside the program's process: the sandbox runs only the program's side.

The test (HumanEval's ``check(candidate)``, MBPP's and ``afm synth code``'s ``assert``
lines, loops and helpers around them) is interpreted here, in the evaluator, by a small
interpreter (:class:`Interpreter`) that knows plain values and a fixed set of pure,
bounded builtins and modules (``math``, ``random``, ``string``, ``copy``). Whatever needs
the program (a call of one of its functions, a name it defines, an attribute or item of
an object it returned, a builtin the interpreter does not carry) becomes one request to
the sandbox's ``serve`` harness, and comes back as plain data (``plain.py``) or as an
:class:`~afm.sandbox.plain.Opaque` handle. Comparisons, arithmetic, truth tests and the
builtins that judge (``abs``, ``math.isclose``, ``sorted``, ...) always run here, on those
values: the test's expected values never enter the sandbox, and nothing the program
defines (an ``__eq__`` that is always true, a patched ``builtins.abs`` or
``math.isclose``, a forged message on any descriptor, a signal handler, a thread) takes
part in the verdict.

A test with a statement the interpreter does not carry (``try``, ``with``, ``class``,
``raise``, ...), an import of another module, or a private attribute is not split
(:func:`plan` says why); neither is one that, at run time, passes something other than
plain data to the program (a lambda) or goes over the interpreter's budgets. Those run
in the program's process (``harness.py``, ``run`` mode).
"""

from __future__ import annotations

import ast
import copy as copy_module
import math
import random
import string
import time
from collections.abc import Callable, Iterator
from typing import Any

from afm.sandbox import plain
from afm.sandbox.isolation import Boundary
from afm.sandbox.plain import Opaque, PlainDataError
from afm.sandbox.policy import RunResult, SandboxPolicy
from afm.sandbox.process import Sandboxed

MAX_STEPS = 2_000_000  # expressions and statements evaluated here, per test
MAX_LEN = 1_000_000  # items or characters of one value built here
MAX_INT_BITS = 1 << 20
MAX_BUILT = 50_000_000  # items and characters built here, all values together
RESULTS_CAP = 64 << 20  # bytes of results waiting to be read at once
EXIT_GRACE_S = 1.0  # after the verdict, how long the served program may take to end
MODULES = ("math", "random", "string", "copy")


class NotSplittable(Exception):
    """This test (or this step of it) must run in the program's process."""


class TestFailed(Exception):
    """An ``assert`` of the test was false."""


class RemoteRaised(Exception):
    """The program raised while the sandbox served a request."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name, self.message = name, message


class SessionEnded(Exception):
    """The sandboxed process stopped answering (``why``: timeout, output, eof, exited, garbled)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


# -- which tests split ------------------------------------------------------------------

STATEMENTS = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.While, ast.If, ast.Pass,
              ast.Break, ast.Continue, ast.Assert, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Return)
EXPRESSIONS = (ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call,
               ast.keyword, ast.Attribute, ast.Subscript, ast.Slice, ast.List, ast.Tuple, ast.Set, ast.Dict,
               ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension, ast.Lambda,
               ast.arguments, ast.arg, ast.Starred, ast.NamedExpr, ast.JoinedStr, ast.FormattedValue,
               ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.alias, ast.Module)


def plan(test: str) -> tuple[ast.Module | None, str]:
    """The parsed test when the interpreter carries all of it, else (None, why not)."""
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return None, f"does not parse here: {type(exc).__name__}"
    for node in ast.walk(tree):
        if not isinstance(node, STATEMENTS + EXPRESSIONS):
            return None, f"{type(node).__name__} at line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import) and any(a.name not in MODULES for a in node.names):
            return None, f"imports {', '.join(a.name for a in node.names)}"
        if isinstance(node, ast.ImportFrom) and (node.module not in MODULES or node.level):
            return None, f"imports from {node.module}"
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and node.attr != "__name__":
            return None, f"private attribute {node.attr}"
        if isinstance(node, ast.FunctionDef) and (node.decorator_list or node.args.vararg or node.args.kwarg
                                                  or node.args.kwonlyargs):
            return None, f"function {node.name} has decorators or variable arguments"
        if isinstance(node, ast.Lambda) and (node.args.vararg or node.args.kwarg or node.args.kwonlyargs):
            return None, "lambda with variable arguments"
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(not _simple_target(t) for t in targets):
                return None, f"assignment target at line {getattr(node, 'lineno', '?')}"
    return tree, ""


def _simple_target(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_simple_target(e) for e in node.elts)
    return isinstance(node, ast.Subscript)


# -- the sandbox's side ------------------------------------------------------------------

class Remote:
    """Requests to the ``serve`` harness and their answers, in order."""

    def __init__(self, box: Sandboxed) -> None:
        self.box = box
        self.next_id = 0
        self.loaded: dict | None = None
        self.replies: dict[int, dict] = {}
        self.waiting: int | None = None

    def _take_lines(self) -> None:
        buffer = self.box.channel
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                return
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            try:
                message = plain.loads(line)
            except PlainDataError as exc:
                raise SessionEnded("garbled") from exc
            if type(message) is not dict:
                raise SessionEnded("garbled")
            if self.loaded is None:
                self.loaded = message
            elif message.get("i") == self.waiting and self.waiting not in self.replies:
                self.replies[self.waiting] = message

    def wait_loaded(self) -> dict:
        def ready() -> bool:
            self._take_lines()
            return self.loaded is not None

        why = self.box.pump(until=ready)
        if why != "until":
            raise SessionEnded(why)
        return self.loaded

    def ask(self, request: dict) -> Any:
        """Send ``request``; its value (plain data or an Opaque handle)."""
        rid = self.next_id
        self.next_id += 1
        self.waiting = rid
        try:
            line = plain.dumps({**request, "i": rid})
        except (TypeError, ValueError) as exc:
            raise NotSplittable(f"cannot send {request.get('op')}: {exc}") from exc
        self.box.send(line)

        def answered() -> bool:
            self._take_lines()
            return rid in self.replies

        why = self.box.pump(until=answered)
        if why != "until":
            raise SessionEnded(why)
        reply = self.replies.pop(rid)
        if "raised" in reply:
            raise RemoteRaised(str(reply["raised"])[:100], str(reply.get("message", ""))[:500])
        if "value" not in reply:
            raise SessionEnded("garbled")
        try:
            return plain.decode(reply["value"]), reply.get("after") or []
        except PlainDataError as exc:
            raise SessionEnded("garbled") from exc


def _send(value: Any) -> Any:
    try:
        return plain.encode(value)
    except PlainDataError as exc:
        raise NotSplittable(f"the test passes {type(value).__name__} to the program, not plain data") from exc


# -- values the interpreter makes ---------------------------------------------------------

class Namespace:
    """An imported module as the test sees it: only the names listed."""

    def __init__(self, name: str, members: dict[str, Any]) -> None:
        self.name, self.members = name, members

    def __repr__(self) -> str:
        return f"<module {self.name}>"


class LocalFunction:
    """A ``def`` or ``lambda`` of the test, run by the interpreter."""

    def __init__(self, interp: Interpreter, node: ast.FunctionDef | ast.Lambda, scope: Scope,
                 defaults: list[Any]) -> None:
        self.interp, self.node, self.scope, self.defaults = interp, node, scope, defaults

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.interp.call_local(self, list(args), kwargs)


class Scope:
    def __init__(self, parent: Scope | None) -> None:
        self.names: dict[str, Any] = {}
        self.parent = parent

    def find(self, name: str) -> tuple[bool, Any]:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return True, scope.names[name]
            scope = scope.parent
        return False, None


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


SAFE_METHODS: dict[type, frozenset[str]] = {
    str: frozenset("lower upper strip lstrip rstrip split rsplit join replace startswith endswith find rfind index "
                   "rindex count isdigit isalpha isalnum isspace islower isupper isnumeric isdecimal istitle title "
                   "capitalize swapcase zfill center ljust rjust splitlines partition rpartition encode casefold "
                   "removeprefix removesuffix expandtabs isascii isidentifier".split()),
    list: frozenset("append extend insert pop remove index count sort reverse copy clear".split()),
    tuple: frozenset("index count".split()),
    dict: frozenset("get keys values items copy update pop setdefault clear popitem".split()),
    set: frozenset("add remove discard union intersection difference symmetric_difference issubset issuperset "
                   "isdisjoint copy update pop clear intersection_update difference_update".split()),
    frozenset: frozenset("union intersection difference symmetric_difference issubset issuperset isdisjoint copy"
                         .split()),
    bytes: frozenset("decode hex startswith endswith find count split strip".split()),
    int: frozenset("bit_length real imag conjugate numerator denominator".split()),
    float: frozenset("is_integer real imag conjugate hex".split()),
    complex: frozenset("real imag conjugate".split()),
    bool: frozenset("real imag".split()),
}
WIDTH_METHODS = frozenset({"zfill", "center", "ljust", "rjust", "expandtabs"})
SHIPPED_BUILTINS = frozenset({"len", "list", "tuple", "set", "frozenset", "sorted", "str", "repr", "int", "float",
                              "abs", "round", "sum", "min", "max", "any", "all", "dict", "next", "iter", "reversed",
                              "enumerate", "format", "hash", "complex"})


def _random_members(rng: random.Random) -> dict[str, Any]:
    return {name: getattr(rng, name) for name in ("random", "randint", "randrange", "choice", "choices", "shuffle",
                                                  "sample", "uniform", "seed", "gauss", "getrandbits")}


class Interpreter:
    """Runs a split test (see the module docstring); ``remote`` answers for the program."""

    def __init__(self, remote: Remote, deadline: float) -> None:
        self.remote, self.deadline = remote, deadline
        self.steps = 0
        self.built = 0
        self.module = Scope(None)
        self.rng = random.Random()
        self.builtins = self._builtins()

    # -- budgets ----------------------------------------------------------------------
    def tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise NotSplittable(f"the test takes more than {MAX_STEPS} steps to judge here")
        if self.steps % 1024 == 0 and time.perf_counter() > self.deadline:
            raise SessionEnded("timeout")

    def sized(self, value: Any) -> Any:
        if isinstance(value, (str, bytes, bytearray, list, tuple, dict, set, frozenset)):
            n = len(value)
            if n > MAX_LEN:
                raise NotSplittable(f"a value of {n} items is too large to judge here")
            self.built += n
            if self.built > MAX_BUILT:
                raise NotSplittable("the test builds too much to judge here")
        elif type(value) is int and value.bit_length() > MAX_INT_BITS:
            raise NotSplittable("an integer too large to judge here")
        return value

    # -- statements ---------------------------------------------------------------------
    def run(self, tree: ast.Module) -> None:
        self.block(tree.body, self.module)

    def block(self, body: list[ast.stmt], scope: Scope) -> None:
        for stmt in body:
            self.stmt(stmt, scope)

    def stmt(self, node: ast.stmt, scope: Scope) -> None:
        self.tick()
        if isinstance(node, ast.Expr):
            self.eval(node.value, scope)
        elif isinstance(node, ast.Assert):
            if not self.truth(self.eval(node.test, scope)):
                raise TestFailed(f"line {node.lineno}: assert {ast.unparse(node.test)[:200]}")
        elif isinstance(node, ast.Assign):
            value = self.eval(node.value, scope)
            for target in node.targets:
                self.assign(target, value, scope)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.eval(node.value, scope), scope)
        elif isinstance(node, ast.AugAssign):
            current = self.eval(_load(node.target), scope)
            self.assign(node.target, self.binop(node.op, current, self.eval(node.value, scope)), scope)
        elif isinstance(node, ast.If):
            self.block(node.body if self.truth(self.eval(node.test, scope)) else node.orelse, scope)
        elif isinstance(node, ast.For):
            self.loop_for(node, scope)
        elif isinstance(node, ast.While):
            self.loop_while(node, scope)
        elif isinstance(node, ast.Pass):
            pass
        elif isinstance(node, ast.Break):
            raise _Break
        elif isinstance(node, ast.Continue):
            raise _Continue
        elif isinstance(node, ast.Return):
            raise _Return(None if node.value is None else self.eval(node.value, scope))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.import_(node, scope)
        elif isinstance(node, ast.FunctionDef):
            defaults = [self.eval(d, scope) for d in node.args.defaults]
            scope.names[node.name] = LocalFunction(self, node, scope, defaults)
        else:  # plan() refused these already
            raise NotSplittable(type(node).__name__)

    def loop_for(self, node: ast.For, scope: Scope) -> None:
        for item in self.iterate(self.eval(node.iter, scope)):
            self.assign(node.target, item, scope)
            if not self.loop_pass(node, scope):
                return
        self.block(node.orelse, scope)

    def loop_while(self, node: ast.While, scope: Scope) -> None:
        while self.truth(self.eval(node.test, scope)):
            if not self.loop_pass(node, scope):
                return
        self.block(node.orelse, scope)

    def loop_pass(self, node: ast.For | ast.While, scope: Scope) -> bool:
        """One pass of a loop's body; False when it broke out (its ``else`` is skipped)."""
        try:
            self.block(node.body, scope)
        except _Break:
            return False
        except _Continue:
            pass
        return True

    def import_(self, node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                scope.names[alias.asname or alias.name] = self.module_named(alias.name)
            return
        module = self.module_named(node.module or "")
        for alias in node.names:
            if alias.name == "*" or alias.name not in module.members:
                raise NotSplittable(f"from {module.name} import {alias.name}")
            scope.names[alias.asname or alias.name] = module.members[alias.name]

    def module_named(self, name: str) -> Namespace:
        if name == "math":
            return Namespace("math", self.math_members())
        if name == "random":
            members = _random_members(self.rng)  # one generator per test, as the module's own
            members["Random"] = lambda seed=None: Namespace("random.Random", _random_members(random.Random(seed)))
            return Namespace("random", members)
        if name == "string":
            return Namespace("string", {n: getattr(string, n) for n in (
                "ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits", "octdigits",
                "punctuation", "printable", "whitespace")})
        if name == "copy":
            return Namespace("copy", {"copy": copy_module.copy, "deepcopy": self.deepcopy})
        raise NotSplittable(f"module {name}")

    def deepcopy(self, value: Any) -> Any:
        try:
            return copy_module.deepcopy(value)
        except Exception as exc:  # an Opaque handle, say: it stays in the sandbox
            raise NotSplittable(f"deepcopy of {type(value).__name__}") from exc

    def math_members(self) -> dict[str, Any]:
        def bounded(fn: Callable, limit: int) -> Callable:
            def call(*args: Any) -> Any:
                if any(type(a) is int and abs(a) > limit for a in args):
                    raise NotSplittable(f"math.{fn.__name__} of a number too large to judge here")
                return fn(*args)
            return call

        names = ("isclose fabs sqrt floor ceil trunc log log2 log10 exp sin cos tan asin acos atan atan2 hypot "
                 "degrees radians isnan isinf isfinite copysign gcd lcm isqrt fsum modf frexp ldexp fmod dist "
                 "remainder cbrt exp2 expm1 log1p sinh cosh tanh asinh acosh atanh erf erfc gamma lgamma").split()
        members: dict[str, Any] = {n: getattr(math, n) for n in names if hasattr(math, n)}
        members.update(pi=math.pi, e=math.e, tau=math.tau, inf=math.inf, nan=math.nan,
                       factorial=bounded(math.factorial, 20_000), comb=bounded(math.comb, 100_000),
                       perm=bounded(math.perm, 100_000), pow=math.pow,
                       prod=lambda it, start=1: math.prod(self.materialize(it, 100_000), start=start))
        return members

    # -- assignment ---------------------------------------------------------------------
    def assign(self, target: ast.expr, value: Any, scope: Scope) -> None:
        if isinstance(target, ast.Name):
            scope.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self.materialize(value)
            if len(items) != len(target.elts):
                raise ValueError(f"expected {len(target.elts)} values to unpack, got {len(items)}")
            for t, v in zip(target.elts, items):
                self.assign(t, v, scope)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value, scope)
            if isinstance(container, Opaque):
                raise NotSplittable("assigning into an object of the program")
            container[self.eval(target.slice, scope)] = value
            self.sized(container)
        else:
            raise NotSplittable(f"assignment to {type(target).__name__}")

    # -- expressions --------------------------------------------------------------------
    def truth(self, value: Any) -> bool:
        return bool(value)  # Opaque handles are simply true: the program's __bool__ never runs

    def eval(self, node: ast.expr, scope: Scope) -> Any:
        self.tick()
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is None:
            raise NotSplittable(type(node).__name__)
        return method(node, scope)

    def e_Constant(self, node: ast.Constant, scope: Scope) -> Any:
        return node.value

    def e_Name(self, node: ast.Name, scope: Scope) -> Any:
        found, value = scope.find(node.id)
        if found:
            return value
        if node.id in self.builtins:
            return self.builtins[node.id]
        value, _ = self.remote.ask({"op": "name", "name": node.id})  # a name of the program
        return value

    def e_NamedExpr(self, node: ast.NamedExpr, scope: Scope) -> Any:
        value = self.eval(node.value, scope)
        scope.names[node.target.id] = value
        return value

    def e_BinOp(self, node: ast.BinOp, scope: Scope) -> Any:
        return self.binop(node.op, self.eval(node.left, scope), self.eval(node.right, scope))

    def binop(self, op: ast.operator, a: Any, b: Any) -> Any:
        if isinstance(op, ast.Mult):
            for seq, n in ((a, b), (b, a)):
                if isinstance(seq, (str, bytes, list, tuple)) and type(n) is int and len(seq) * max(n, 0) > MAX_LEN:
                    raise NotSplittable("a repeated sequence too large to judge here")
            if type(a) is int and type(b) is int and a.bit_length() + b.bit_length() > MAX_INT_BITS:
                raise NotSplittable("a product too large to judge here")
        if isinstance(op, ast.Pow) and type(a) is int and type(b) is int and b > 0 \
                and a.bit_length() * b > MAX_INT_BITS:
            raise NotSplittable("a power too large to judge here")
        if isinstance(op, ast.LShift) and type(b) is int and b > MAX_INT_BITS:
            raise NotSplittable("a shift too large to judge here")
        if isinstance(op, ast.Mod) and isinstance(a, (str, bytes)):
            raise NotSplittable("%-formatting")
        return self.sized(BINOPS[type(op)](a, b))

    def e_UnaryOp(self, node: ast.UnaryOp, scope: Scope) -> Any:
        value = self.eval(node.operand, scope)
        if isinstance(node.op, ast.Not):
            return not self.truth(value)
        return {ast.USub: lambda v: -v, ast.UAdd: lambda v: +v, ast.Invert: lambda v: ~v}[type(node.op)](value)

    def e_BoolOp(self, node: ast.BoolOp, scope: Scope) -> Any:
        value = None
        for operand in node.values:
            value = self.eval(operand, scope)
            if self.truth(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def e_Compare(self, node: ast.Compare, scope: Scope) -> Any:
        left = self.eval(node.left, scope)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, scope)
            if not self.truth(COMPARISONS[type(op)](left, right)):
                return False
            left = right
        return True

    def e_IfExp(self, node: ast.IfExp, scope: Scope) -> Any:
        return self.eval(node.body if self.truth(self.eval(node.test, scope)) else node.orelse, scope)

    def e_List(self, node: ast.List, scope: Scope) -> Any:
        return self.sized(self.elements(node.elts, scope))

    def e_Tuple(self, node: ast.Tuple, scope: Scope) -> Any:
        return tuple(self.sized(self.elements(node.elts, scope)))

    def e_Set(self, node: ast.Set, scope: Scope) -> Any:
        return self.sized(set(self.elements(node.elts, scope)))

    def e_Dict(self, node: ast.Dict, scope: Scope) -> Any:
        out: dict = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                out.update(self.eval(v, scope))
            else:
                out[self.eval(k, scope)] = self.eval(v, scope)
        return self.sized(out)

    def elements(self, nodes: list[ast.expr], scope: Scope) -> list[Any]:
        out: list[Any] = []
        for n in nodes:
            if isinstance(n, ast.Starred):
                out.extend(self.materialize(self.eval(n.value, scope)))
            else:
                out.append(self.eval(n, scope))
        return out

    def e_JoinedStr(self, node: ast.JoinedStr, scope: Scope) -> Any:
        return self.sized("".join(str(self.eval(v, scope)) for v in node.values))

    def e_FormattedValue(self, node: ast.FormattedValue, scope: Scope) -> Any:
        value = self.eval(node.value, scope)
        spec = self.eval(node.format_spec, scope) if node.format_spec is not None else ""
        if any(int(d) > MAX_LEN for d in "".join(c if c.isdigit() else " " for c in spec).split()):
            raise NotSplittable("a format width too large to judge here")
        if isinstance(value, Opaque):
            return self.ship_builtin("format", [value, spec])
        if node.conversion == ord("r"):
            value = repr(value)
        elif node.conversion == ord("s"):
            value = str(value)
        elif node.conversion == ord("a"):
            value = ascii(value)
        return format(value, spec)

    def e_Attribute(self, node: ast.Attribute, scope: Scope) -> Any:
        return self.attribute(self.eval(node.value, scope), node.attr)

    def attribute(self, obj: Any, name: str) -> Any:
        if isinstance(obj, Opaque):
            value, _ = self.remote.ask({"op": "attr", "of": _send(obj), "name": name})
            return value
        if isinstance(obj, Namespace):
            if name not in obj.members:
                raise NotSplittable(f"{obj.name}.{name}")
            return obj.members[name]
        if isinstance(obj, type) and name == "__name__":
            return obj.__name__
        allowed = SAFE_METHODS.get(type(obj), frozenset())
        if name not in allowed:
            raise NotSplittable(f"{type(obj).__name__}.{name}")
        value = getattr(obj, name)
        if name in WIDTH_METHODS or name in ("replace", "join"):
            return self.guarded_method(obj, name, value)
        return value

    def guarded_method(self, obj: Any, name: str, method: Callable) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            if name in WIDTH_METHODS and any(type(a) is int and a > MAX_LEN for a in args):
                raise NotSplittable(f"{name} width too large to judge here")
            if name == "replace" and len(args) >= 2 and isinstance(args[1], (str, bytes)):
                grow = obj.count(args[0]) * max(0, len(args[1]) - len(args[0])) if args[0] else \
                    (len(obj) + 1) * len(args[1])
                if len(obj) + grow > MAX_LEN:
                    raise NotSplittable("a replacement too large to judge here")
            if name == "join" and args:
                parts = self.materialize(args[0])
                if sum(len(p) for p in parts if isinstance(p, (str, bytes))) + len(obj) * len(parts) > MAX_LEN:
                    raise NotSplittable("a joined string too large to judge here")
                args = (parts, *args[1:])
            return self.sized(method(*args, **kwargs))
        return call

    def e_Subscript(self, node: ast.Subscript, scope: Scope) -> Any:
        obj = self.eval(node.value, scope)
        key = self.eval(node.slice, scope)
        if isinstance(obj, Opaque):
            value, _ = self.remote.ask({"op": "item", "of": _send(obj), "key": _send(key)})
            return value
        if isinstance(obj, (Namespace, LocalFunction)) or callable(obj):
            raise NotSplittable("subscript of a non-value")
        return obj[key]

    def e_Slice(self, node: ast.Slice, scope: Scope) -> Any:
        return slice(*(None if n is None else self.eval(n, scope) for n in (node.lower, node.upper, node.step)))

    def e_Starred(self, node: ast.Starred, scope: Scope) -> Any:
        raise NotSplittable("a starred expression here")

    def e_Lambda(self, node: ast.Lambda, scope: Scope) -> Any:
        return LocalFunction(self, node, scope, [self.eval(d, scope) for d in node.args.defaults])

    # comprehensions: a scope of their own, generators evaluated lazily
    def comprehension(self, generators: list[ast.comprehension], scope: Scope) -> Iterator[Scope]:
        def level(i: int, outer: Scope) -> Iterator[Scope]:
            gen = generators[i]
            for item in self.iterate(self.eval(gen.iter, outer)):
                inner = Scope(outer)
                self.assign(gen.target, item, inner)
                if all(self.truth(self.eval(cond, inner)) for cond in gen.ifs):
                    if i + 1 == len(generators):
                        yield inner
                    else:
                        yield from level(i + 1, inner)
        return level(0, scope)

    def e_ListComp(self, node: ast.ListComp, scope: Scope) -> Any:
        out = []
        for inner in self.comprehension(node.generators, scope):
            out.append(self.eval(node.elt, inner))
            self.sized(out) if len(out) % 4096 == 0 else None
        return self.sized(out)

    def e_SetComp(self, node: ast.SetComp, scope: Scope) -> Any:
        return self.sized({self.eval(node.elt, inner) for inner in self.comprehension(node.generators, scope)})

    def e_DictComp(self, node: ast.DictComp, scope: Scope) -> Any:
        return self.sized({self.eval(node.key, inner): self.eval(node.value, inner)
                           for inner in self.comprehension(node.generators, scope)})

    def e_GeneratorExp(self, node: ast.GeneratorExp, scope: Scope) -> Any:
        return (self.eval(node.elt, inner) for inner in self.comprehension(node.generators, scope))

    # calls
    def e_Call(self, node: ast.Call, scope: Scope) -> Any:
        if isinstance(node.func, ast.Name) and not scope.find(node.func.id)[0] and node.func.id not in self.builtins:
            args, kwargs = self.arguments(node, scope)  # a function of the program, called by name
            return self.remote_call(node.func.id, args, kwargs)
        fn = self.eval(node.func, scope)
        args, kwargs = self.arguments(node, scope)
        return self.call(fn, args, kwargs)

    def arguments(self, node: ast.Call, scope: Scope) -> tuple[list[Any], dict[str, Any]]:
        args = self.elements(node.args, scope)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.eval(kw.value, scope))
            else:
                kwargs[kw.arg] = self.eval(kw.value, scope)
        return args, kwargs

    def call(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if isinstance(fn, Opaque):
            return self.remote_call(fn, args, kwargs)
        if isinstance(fn, LocalFunction):
            return self.call_local(fn, args, kwargs)
        if isinstance(fn, Namespace):
            raise NotSplittable(f"calling {fn.name}")
        if not callable(fn):
            raise TypeError(f"'{type(fn).__name__}' object is not callable")
        name = self.builtin_names.get(id(fn))
        if name in SHIPPED_BUILTINS and any(isinstance(a, Opaque) for a in args):
            return self.ship_builtin(name, args, kwargs)  # converting the program's object is its business
        if name in ("list", "tuple", "set", "frozenset", "dict") and args and not isinstance(args[0], (dict, Opaque)):
            args = [self.materialize(args[0]), *args[1:]]
        return self.sized(fn(*args, **kwargs))

    def remote_call(self, target: str | Opaque, args: list[Any], kwargs: dict[str, Any]) -> Any:
        request = {"op": "call", "f": target if isinstance(target, str) else _send(target),
                   "args": [_send(a) for a in args], "kwargs": {k: _send(v) for k, v in kwargs.items()}}
        value, after = self.remote.ask(request)
        for index, data in after:  # the program changed a list, dict or set it was given
            if type(index) is int and 0 <= index < len(args):
                _update(args[index], plain.decode(data))
        return value

    def ship_builtin(self, name: str, args: list[Any], kwargs: dict[str, Any] | None = None) -> Any:
        value, _ = self.remote.ask({"op": "call", "f": {"$builtin": name}, "args": [_send(a) for a in args],
                                    "kwargs": {k: _send(v) for k, v in (kwargs or {}).items()}})
        return value

    def call_local(self, fn: LocalFunction, args: list[Any], kwargs: dict[str, Any]) -> Any:
        params = fn.node.args
        names = [a.arg for a in params.posonlyargs + params.args]
        if len(args) > len(names):
            raise TypeError(f"{getattr(fn.node, 'name', 'lambda')}() takes {len(names)} arguments")
        local = Scope(fn.scope)
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in bound:
                raise TypeError(f"unexpected argument {k}")
            bound[k] = v
        first_default = len(names) - len(fn.defaults)
        for i, name in enumerate(names):
            if name not in bound:
                if i < first_default:
                    raise TypeError(f"missing argument {name}")
                bound[name] = fn.defaults[i - first_default]
        local.names.update(bound)
        if isinstance(fn.node, ast.Lambda):
            return self.eval(fn.node.body, local)
        try:
            self.block(fn.node.body, local)
        except _Return as ret:
            return ret.value
        return None

    # iteration
    def iterate(self, value: Any) -> Iterator[Any]:
        if isinstance(value, Opaque):
            value = self.ship_builtin("list", [value])
        if isinstance(value, (Namespace, LocalFunction)):
            raise TypeError(f"'{type(value).__name__}' object is not iterable")
        for item in value:
            self.tick()
            yield item

    def materialize(self, value: Any, limit: int = MAX_LEN) -> list[Any]:
        out = []
        for item in self.iterate(value):
            out.append(item)
            if len(out) > limit:
                raise NotSplittable("an iterable too long to judge here")
        self.sized(out)
        return out

    # builtins carried here (pure and bounded); on a program's object, some are sent back
    def _builtins(self) -> dict[str, Any]:
        def keyed(fn: Callable) -> Callable:
            def call(*args: Any, key: Any = None, **kw: Any) -> Any:
                if len(args) == 1:
                    args = (self.materialize(args[0]),)
                return fn(*args, key=self.python_callable(key) if key is not None else None, **kw)
            return call

        def bounded_range(*args: Any) -> range:
            r = range(*args)
            if len(r) > MAX_LEN:
                raise NotSplittable(f"a range of {len(r)} items is too large to judge here")
            return r

        def bounded_pow(a: Any, b: Any, mod: Any = None) -> Any:
            if mod is None and type(a) is int and type(b) is int and b > 0 and a.bit_length() * b > MAX_INT_BITS:
                raise NotSplittable("a power too large to judge here")
            return pow(a, b, mod)

        def local_map(fn: Any, *its: Any) -> Iterator[Any]:
            call = self.python_callable(fn)
            return (call(*items) for items in zip(*(self.iterate(i) for i in its)))

        def local_filter(fn: Any, it: Any) -> Iterator[Any]:
            call = self.python_callable(fn) if fn is not None else bool
            return (x for x in self.iterate(it) if self.truth(call(x)))

        local: dict[str, Any] = {
            "abs": abs, "chr": chr, "ord": ord, "divmod": divmod, "hex": hex, "bin": bin, "oct": oct,
            "round": round, "pow": bounded_pow, "range": bounded_range, "isinstance": isinstance, "type": type,
            "print": lambda *a, **k: None, "repr": repr, "ascii": ascii, "len": len,
            "sum": lambda it=(), *rest: sum(self.materialize(it), *rest),
            "any": lambda it: any(self.truth(x) for x in self.iterate(it)),
            "all": lambda it: all(self.truth(x) for x in self.iterate(it)),
            "sorted": keyed(sorted), "min": keyed(min), "max": keyed(max),
            "reversed": lambda s: list(reversed(self.materialize(s))),
            "enumerate": lambda it, start=0: enumerate(self.iterate(it), start),
            "zip": lambda *its: zip(*(self.iterate(i) for i in its)), "map": local_map, "filter": local_filter,
            "next": next, "iter": lambda it: iter(self.iterate(it)), "format": format, "hash": hash,
        }
        # the plain types themselves (isinstance needs them); their inputs are bounded already
        local.update({t.__name__: t for t in (int, float, str, bool, list, tuple, dict, set, frozenset, bytes,
                                               complex)})
        self.builtin_names = {id(v): k for k, v in local.items()}
        return local

    def python_callable(self, fn: Any) -> Callable:
        if isinstance(fn, Opaque):
            return lambda *a, **k: self.remote_call(fn, list(a), k)
        if isinstance(fn, LocalFunction) or callable(fn):
            return fn
        raise TypeError(f"'{type(fn).__name__}' object is not callable")


def _update(target: Any, new: Any) -> None:
    if isinstance(target, (list, bytearray)) and isinstance(new, type(target)):
        target[:] = new
    elif isinstance(target, (dict, set)) and isinstance(new, type(target)):
        target.clear()
        target.update(new)


def _load(target: ast.expr) -> ast.expr:
    clone = copy_module.copy(target)
    clone.ctx = ast.Load()
    return clone


def _contains(a: Any, b: Any) -> bool:
    return a in b


BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b, ast.BitAnd: lambda a, b: a & b,
}
COMPARISONS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b, ast.In: _contains,
    ast.NotIn: lambda a, b: not _contains(a, b),
}


# -- one split run -----------------------------------------------------------------------

def run_split(boundary: Boundary, program: str, test: str, policy: SandboxPolicy) -> tuple[RunResult | None, str]:
    """Judge ``test`` here against ``program`` served by the sandbox. (None, why) when
    the test must run in the program's process instead."""
    tree, why = plan(test)
    if tree is None:
        return None, why
    box = Sandboxed(boundary, policy, channel_cap=RESULTS_CAP)
    if not box.start({"mode": "serve", "program": program}):
        box.end()
        return RunResult("error", None, "", box.start_error, box.seconds(), box.layers(), "could not start",
                         judged="outside"), ""
    remote = Remote(box)
    status, reason, cause = "passed", "", ""
    try:
        loaded = remote.wait_loaded()
        if not loaded.get("loaded"):
            raise RemoteRaised(str(loaded.get("raised", "?"))[:100], str(loaded.get("message", ""))[:500])
        Interpreter(remote, box.deadline).run(tree)
    except NotSplittable as exc:
        box.end()
        return None, str(exc)
    except TestFailed as exc:
        status, reason, cause = "failed", f"assertion failed ({exc})", "assertion"
    except RemoteRaised as exc:
        status, reason, cause = "failed", f"the program raised {exc.name}: {exc.message}"[:300], _raised(exc)
    except SessionEnded as exc:
        status, reason, cause = _ended(exc.why, box)
    except (_Break, _Continue, _Return):
        status, reason, cause = "failed", "the test has break, continue or return outside a loop/function", "error"
    except RecursionError:
        return _fallback(box, "the test recurses too deeply to judge here")
    except Exception as exc:  # noqa: BLE001 - the test's own expression raised (TypeError, ...)
        status, reason, cause = "failed", f"the test raised {type(exc).__name__}: {exc}"[:300], \
            f"error:{type(exc).__name__}"
    if box.ended is None:  # the harness ends on its own when stdin closes; a hang is killed soon
        box.close_stdin()
        box.deadline = min(box.deadline, time.perf_counter() + EXIT_GRACE_S)
        box.pump()
    rc = box.end()
    if cause in ("exited", "timeout") and reason != "over the wall-clock limit" and box.memory_exceeded:
        status, reason, cause = "failed", "over the run's memory limit", "memory"
    elif box.memory_exceeded and status != "passed":
        reason += "; a process of the run was killed over the run's memory limit"
    return RunResult(status, rc, box.out.text(), box.err.text(), box.seconds(), box.layers(), reason,
                     judged="outside", cause=cause), ""


def _fallback(box: Sandboxed, why: str) -> tuple[None, str]:
    box.end()
    return None, why


def _raised(exc: RemoteRaised) -> str:
    if exc.name == "SystemExit":
        return "exited"
    if exc.name in ("PermissionError", "ImportError") and exc.message.startswith("sandbox:"):
        return "blocked"
    return f"error:{exc.name}"


def _ended(why: str, box: Sandboxed) -> tuple[str, str, str]:
    if why == "timeout":
        return "timeout", "over the wall-clock limit", "timeout"
    if why == "output":
        return "failed", "over the output limit", "output"
    if why == "garbled":
        return "failed", "the results channel was written over", "garbled"
    rc = box.proc.poll() if box.proc is not None else None
    if rc == 125 and "sandbox:" in box.err.text():
        return "error", "sandbox setup failed", "setup"
    if rc is not None and rc in (-9, -24, 128 + 9, 128 + 24):
        return "timeout", "over the CPU limit", "timeout"
    return "failed", "exited before the test finished", "exited"
