"""Test shapes and the verdict plain Python gives each (shared by the fast parity test and
the slow sweep).

Every shape is a (program, test) pair written as a benign benchmark would write it; most
come in a passing and a failing form. Plain Python's verdict is the reference: the
program and the test ``exec``'d in one ``__main__`` of a fresh interpreter (trusted code
only, see :func:`python_says`), any exception a failure. The sandbox must give the same
verdict, except where a shape is listed in ``UNJUDGEABLE``: there the program's own code
would decide (its ``__eq__``, its arithmetic), and the sandbox must say ``unjudgeable``
(a counted failure) instead of deciding either way.
"""

from __future__ import annotations

import os
import subprocess
import sys

REFERENCE = "import sys\nsource = sys.stdin.read()\ntry:\n    exec(source, {'__name__': '__main__'})\n" \
            "except BaseException:\n    sys.exit(3)\nsys.exit(0)\n"


def python_says(program: str, test: str, cwd, hash_seed: int | None = None) -> bool:
    """Plain Python's verdict: program then test in one fresh interpreter."""
    env = dict(os.environ)
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = str(hash_seed)
    done = subprocess.run([sys.executable, "-I", "-c", REFERENCE], input=f"{program}\n{test}\n", text=True,
                          capture_output=True, timeout=60, cwd=cwd, env=env)
    return done.returncode == 0


THIRD = "def f(x):\n    return x / 3"
GENERATOR = "def f():\n    return (i for i in range(3))"
RECIPROCAL = "def f(x):\n    return 1 / x"
STACK = ("class Stack:\n    def __init__(self, items=None):\n        self.items = items if items is not None else []\n"
         "    def push(self, x):\n        self.items.append(x)\n    def pop(self):\n        return self.items.pop()\n"
         "    def __len__(self):\n        return len(self.items)\n")
POINT_EQ = ("class P:\n    def __init__(self, x):\n        self.x = x\n    def __eq__(self, o):\n"
            "        return isinstance(o, P) and self.x == o.x\n    __hash__ = None\n")

SHAPES: dict[str, tuple[str, str]] = {
    # -- values and their types ------------------------------------------------------------
    "tuple-vs-list": ("def f():\n    return [1, 2]", "assert f() == (1, 2)"),
    "tuple-ok": ("def f():\n    return (1, 2)", "assert f() == (1, 2)"),
    "float-equals-int": ("def f():\n    return 3.0", "assert f() == 3"),
    "bool-is-true": ("def f():\n    return True", "assert f() == 1 and f() is True"),
    "int-is-not-true": ("def f():\n    return 1", "assert f() is True"),
    "none": ("def f():\n    pass", "assert f() is None"),
    "big-int": ("def f(n):\n    return 3 ** n", "assert f(5000) % 1000 == 1 and f(5000) == 3 ** 5000"),
    "negative-big-int": ("def f():\n    return -(2 ** 100)", "assert f() == -(2 ** 100) and f() < 0"),
    "complex": ("def f():\n    return 1 + 2j", "assert f() == complex(1, 2) and f().imag == 2"),
    "bytes": ("def f():\n    return b'ab'", "assert f() == b'ab' and f().decode() == 'ab'"),
    "bytearray-mutable": ("def f():\n    return bytearray(b'ab')", "b = f()\nb[0] = 65\nassert b == b'Ab'"),
    "str-unicode": ("def f():\n    return 'h\\u00e9llo \\U0001f600 \\ud800'", "assert len(f()) == 9 and f()[1] == 'é'"),
    "range": ("def f():\n    return range(1, 10, 2)", "assert f() == range(1, 10, 2) and list(f()) == [1, 3, 5, 7, 9]"),
    "slice-object": ("def f():\n    return slice(1, None, 2)", "assert [0, 1, 2, 3][f()] == [1, 3]"),
    "ellipsis": ("def f():\n    return ...", "assert f() is Ellipsis"),
    "set-and-dict": ("def f():\n    return {3: 'c', 1: 'a'}, {2, 1}",
                     "d, s = f()\nassert d == {1: 'a', 3: 'c'} and s == {1, 2} and sorted(d) == [1, 3]"),
    "dict-order": ("def f():\n    return {'b': 1, 'a': 2}", "assert list(f()) == ['b', 'a']"),
    "dict-order-wrong": ("def f():\n    return {'b': 1, 'a': 2}", "assert list(f()) == ['a', 'b']"),
    "nested-containers": ("def f():\n    return {'k': [(1, {2: frozenset({3})}), None]}",
                          "assert f() == {'k': [(1, {2: frozenset({3})}), None]}"),
    "type-of-result": ("def f():\n    return 1.5", "assert type(f()) == float and type(f()).__name__ == 'float'"),
    "returns-a-type": ("def f():\n    return int", "assert f() is int and f()('3') == 3"),
    "returns-a-builtin": ("def f():\n    return len", "assert f() is len and f()([1, 2]) == 2"),
    "returns-a-module": ("import math\ndef f():\n    return math", "import math\nassert f() is math"),
    # -- floats --------------------------------------------------------------------------------
    "nan-is-not-nan": ("def f():\n    return float('nan')", "assert f() == f()"),
    "nan-identity": ("nan = float('nan')\ndef f():\n    return nan", "x = f()\nassert x != x"),
    "nan-in-list": ("nan = float('nan')\ndef f():\n    return [nan]", "x = f()\nassert x == x"),
    "nan-in-list-fresh": ("def f():\n    return [float('nan')]", "assert f() == f()"),
    "inf": ("def f():\n    return float('inf')", "import math\nassert math.isinf(f()) and f() > 1e308"),
    "negative-zero": ("def f():\n    return -0.0", "import math\nassert f() == 0 and math.copysign(1, f()) == -1"),
    "abs-tolerance": (THIRD, "assert abs(f(1) - 0.3333333) < 1e-6"),
    "isclose": (THIRD, "import math\nassert math.isclose(f(1), 0.33333, rel_tol=1e-3)"),
    "round": (THIRD, "assert round(f(1), 2) == 0.33"),
    "float-repr": ("def f():\n    return 0.1 + 0.2", "assert repr(f()) == '0.30000000000000004'"),
    # -- identity, aliasing, mutation ----------------------------------------------------------
    "returns-its-argument": ("def f(x):\n    return x", "a = [1]\nassert f(a) is a"),
    "returns-a-copy": ("def f(x):\n    return list(x)", "a = [1]\nassert f(a) is a"),
    "aliased-arguments": ("def f(a, b):\n    a.append(1)\n    return b", "x = []\nassert f(x, x) == [1] and x == [1]"),
    "aliased-arguments-is": ("def f(a, b):\n    return a is b", "x = []\nassert f(x, x)"),
    "not-aliased": ("def f(a, b):\n    return a is b", "assert not f([], [])"),
    "mutates-its-argument": ("def f(xs):\n    xs.sort()", "lst = [3, 1, 2]\nf(lst)\nassert lst == [1, 2, 3]"),
    "mutates-nested": ("def f(xs):\n    xs[0].append(9)", "lst = [[1]]\ninner = lst[0]\nf(lst)\nassert inner == [1, 9]"),
    "dict-argument-mutated": ("def f(d):\n    d['k'] = 1", "d = {}\nf(d)\nassert d == {'k': 1}"),
    "set-argument-mutated": ("def f(s):\n    s.discard(2)", "s = {1, 2}\nf(s)\nassert s == {1}"),
    "mutation-through-kwarg": ("def f(*, into):\n    into.append(5)", "out = []\nf(into=out)\nassert out == [5]"),
    "mutation-not-made": ("def f(xs):\n    xs = xs + [1]\n    return xs", "a = []\nf(a)\nassert a == [1]"),
    "kept-and-mutated-later": ("store = []\ndef keep(x):\n    store.append(x)\ndef grow():\n    store[0].append(2)",
                               "a = [1]\nkeep(a)\ngrow()\nassert a == [1, 2]"),
    "test-mutates-after-passing": ("store = []\ndef keep(x):\n    store.append(x)\ndef size():\n    return len(store[0])",
                                   "a = [1]\nkeep(a)\na.append(2)\nassert size() == 2"),
    "same-object-twice": ("CACHE = [1]\ndef f():\n    return CACHE", "assert f() is f()"),
    "global-list-of-program": ("SEEN = []\ndef f(x):\n    SEEN.append(x)", "f(1)\nf(2)\nassert SEEN == [1, 2]"),
    "self-containing-list": ("def f():\n    a = [1]\n    a.append(a)\n    return a", "x = f()\nassert x[1] is x"),
    "deepcopy-of-argument": ("def f(xs):\n    xs.append(1)\n    return len(xs)",
                             "import copy\na = [0]\nassert f(copy.deepcopy(a)) == 2 and a == [0]"),
    # -- subclasses and the standard library -------------------------------------------------
    "float-subclass-type": ("class F(float):\n    pass\ndef f():\n    return F(1.5)", "assert type(f()) == float"),
    "float-subclass-isinstance": ("class F(float):\n    pass\ndef f():\n    return F(1.5)",
                                  "assert isinstance(f(), float) and f() == 1.5 and type(f()).__name__ == 'F'"),
    "str-subclass-method": ("class S(str):\n    def shout(self):\n        return self.upper() + '!'\ndef f():\n"
                            "    return S('hi')", "assert f().shout() == 'HI!' and f() == 'hi' and f().upper() == 'HI'"),
    "list-subclass-methods": ("class L(list):\n    def total(self):\n        return sum(self)\ndef f():\n    return L([1, 2])",
                              "x = f()\nx.append(3)\nassert x.total() == 6 and x == [1, 2, 3] and isinstance(x, list)"),
    "int-enum": ("import enum\nclass C(enum.IntEnum):\n    RED = 1\ndef f():\n    return C.RED",
                 "assert f() == 1 and f().name == 'RED'"),
    "enum-member": ("import enum\nclass C(enum.Enum):\n    RED = 1\n", "assert C.RED.value == 1 and C(1) is C.RED"),
    "enum-iteration": ("import enum\nclass C(enum.Enum):\n    RED = 1\n    BLUE = 2\n",
                       "assert [c.name for c in C] == ['RED', 'BLUE'] and len(C) == 2"),
    "namedtuple": ("import collections\nP = collections.namedtuple('P', 'a b')\ndef f():\n    return P(1, 2)",
                   "assert f() == (1, 2) and f().a == 1 and f()._asdict() == {'a': 1, 'b': 2}"),
    "namedtuple-type": ("import collections\nP = collections.namedtuple('P', 'a b')\ndef f():\n    return P(1, 2)",
                        "assert type(f()) is P and isinstance(f(), P) and isinstance(f(), tuple)"),
    "counter": ("import collections\ndef f(s):\n    return collections.Counter(s)",
                "assert f('aab') == {'a': 2, 'b': 1} and f('aab').most_common(1) == [('a', 2)]"),
    "counter-type": ("import collections\ndef f(s):\n    return collections.Counter(s)",
                     "from collections import Counter\nassert type(f('a')) is Counter and f('ab') == Counter('ba')"),
    "counter-zero-counts": ("import collections\ndef f():\n    return collections.Counter(a=1, b=0)",
                            "import collections\nassert f() == collections.Counter(a=1)"),
    "defaultdict": ("import collections\ndef f():\n    d = collections.defaultdict(list)\n    d['a'].append(1)\n    return d",
                    "d = f()\nd['b'].append(2)\nassert d == {'a': [1], 'b': [2]} and d.default_factory is list"),
    "defaultdict-lambda": ("import collections\ndef f():\n    return collections.defaultdict(lambda: 7)",
                           "d = f()\nassert d['x'] == 7 and dict(d) == {'x': 7}"),
    "ordereddict": ("import collections\ndef f():\n    d = collections.OrderedDict(a=1, b=2)\n    d.move_to_end('a')\n"
                    "    return d", "import collections\nassert list(f()) == ['b', 'a'] and "
                    "f() != collections.OrderedDict(a=1, b=2) and f() == {'a': 1, 'b': 2}"),
    "deque": ("import collections\ndef f():\n    return collections.deque([1, 2], maxlen=3)",
              "d = f()\nd.append(3)\nd.append(4)\nassert list(d) == [2, 3, 4] and d.maxlen == 3"),
    "fraction": ("from fractions import Fraction\ndef f():\n    return Fraction(1, 3)",
                 "from fractions import Fraction\nassert f() == Fraction(2, 6) and f() * 3 == 1"),
    "fraction-via-program-name": ("from fractions import Fraction\ndef f():\n    return Fraction(1, 3)",
                                  "assert f() == Fraction(1, 3) and isinstance(f(), Fraction)"),
    "decimal": ("from decimal import Decimal\ndef f():\n    return Decimal('0.1') + Decimal('0.2')",
                "from decimal import Decimal\nassert f() == Decimal('0.3') and str(f()) == '0.3'"),
    "datetime": ("import datetime\ndef f():\n    return datetime.date(2024, 2, 29) + datetime.timedelta(days=1)",
                 "import datetime\nassert f() == datetime.date(2024, 3, 1) and f().weekday() == 4"),
    "dict-views": ("def f():\n    return {'a': 1}.keys()", "assert f() == {'a'} and 'a' in f()"),
    "program-class-isinstance": ("class A:\n    pass\nclass B(A):\n    pass\ndef f():\n    return B()",
                                 "assert isinstance(f(), A) and isinstance(f(), B) and not isinstance(f(), int)"),
    "program-class-type": ("class A:\n    pass\ndef f():\n    return A()", "assert type(f()) is A and type(f()).__name__ == 'A'"),
    "program-exception-class": ("class Oops(ValueError):\n    pass\ndef f():\n    raise Oops('no')",
                                "try:\n    f()\nexcept Oops as e:\n    assert str(e) == 'no' and isinstance(e, ValueError)"),
    # -- objects of the program ----------------------------------------------------------------
    "object-methods": (STACK, "s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2 and len(s) == 1 and s.items == [1]"),
    "object-attribute-set": (STACK, "s = Stack()\ns.items = [5]\nassert s.pop() == 5"),
    "object-holds-test-list": (STACK, "xs = [1]\ns = Stack(xs)\ns.push(2)\nassert xs == [1, 2]"),
    "object-truthiness": ("class B:\n    def __bool__(self):\n        return False\ndef f():\n    return B()",
                          "assert not f()"),
    "object-falsy-by-len": ("class B:\n    def __len__(self):\n        return 0\ndef f():\n    return B()",
                            "assert f()"),
    "object-len-and-str": ("class B:\n    def __len__(self):\n        return 3\n    def __str__(self):\n"
                           "        return 'bee'\ndef f():\n    return B()", "assert len(f()) == 3 and str(f()) == 'bee'"),
    "object-repr": ("class B:\n    def __repr__(self):\n        return 'B()'\ndef f():\n    return B()",
                    "assert repr(f()) == 'B()' and repr([f()]) == '[B()]'"),
    "object-identity-eq": ("class P:\n    pass\np = P()\ndef f():\n    return p", "assert f() == f() and f() is f()"),
    "object-default-eq-differs": ("class P:\n    pass\ndef f():\n    return P()", "assert f() != f()"),
    "object-in-set": ("class P:\n    pass\np = P()\ndef f():\n    return p", "assert len({f(), f()}) == 1"),
    "object-getitem": ("class G:\n    def __getitem__(self, i):\n        if i > 2:\n            raise IndexError(i)\n"
                       "        return i * 10\ndef f():\n    return G()", "assert list(f()) == [0, 10, 20] and f()[1] == 10"),
    "object-iterator-protocol": ("class It:\n    def __init__(self):\n        self.n = 0\n    def __iter__(self):\n"
                                 "        return self\n    def __next__(self):\n        self.n += 1\n        if self.n > 3:\n"
                                 "            raise StopIteration\n        return self.n\ndef f():\n    return It()",
                                 "assert sum(f()) == 6"),
    "object-context-manager": ("class C:\n    log = []\n    def __enter__(self):\n        C.log.append('in')\n"
                               "        return 5\n    def __exit__(self, *a):\n        C.log.append('out')\n",
                               "with C() as v:\n    assert v == 5\nassert C.log == ['in', 'out']"),
    "object-callable": ("class Add:\n    def __init__(self, n):\n        self.n = n\n    def __call__(self, x):\n"
                        "        return x + self.n\n", "assert Add(2)(3) == 5 and callable(Add(1))"),
    "object-hashable-custom": ("class K:\n    def __hash__(self):\n        return 7\nk = K()\ndef f():\n    return k",
                               "assert hash(f()) == 7 and {f(): 1}[f()] == 1"),
    "object-dunder-dict": ("class P:\n    def __init__(self):\n        self.a = 1\ndef f():\n    return P()",
                           "assert vars(f()) == {'a': 1} and f().__dict__ == {'a': 1}"),
    "property": ("class P:\n    @property\n    def x(self):\n        return 4\n", "assert P().x == 4"),
    "classmethod-staticmethod": ("class P:\n    @classmethod\n    def make(cls):\n        return cls()\n    @staticmethod\n"
                                 "    def two():\n        return 2\n", "assert isinstance(P.make(), P) and P.two() == 2"),
    "class-attribute": ("class P:\n    LIMIT = 3\n", "assert P.LIMIT == 3 and P().LIMIT == 3"),
    "function-attributes": ("def f(x):\n    'doc'\n    return x", "assert f.__name__ == 'f' and f.__doc__ == 'doc'"),
    "dataclass-eq-identical": ("import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int\np = P(1)\ndef f():\n"
                               "    return p", "assert f() is f() and f().x == 1"),
    # -- generators and iterators ----------------------------------------------------------
    "generator-is-not-a-list": (GENERATOR, "assert f() == [0, 1, 2]"),
    "generator-through-list": (GENERATOR, "assert list(f()) == [0, 1, 2]"),
    "generator-next": (GENERATOR, "g = f()\nassert next(g) == 0 and next(g) == 1 and list(g) == [2]"),
    "generator-exhausted": (GENERATOR, "g = f()\nlist(g)\nassert list(g) == []"),
    "generator-send": ("def f():\n    x = yield 1\n    yield x * 2", "g = f()\nassert next(g) == 1 and g.send(5) == 10"),
    "map-through-sorted": ("def f(xs):\n    return map(abs, xs)", "assert sorted(f([-2, 1])) == [1, 2]"),
    "zip-of-program": ("def f():\n    return zip([1, 2], 'ab')", "assert list(f()) == [(1, 'a'), (2, 'b')]"),
    "in-generator": (GENERATOR, "assert 2 in f() and 5 not in f()"),
    "infinite-generator": ("import itertools\ndef f():\n    return itertools.count()",
                           "import itertools\nassert list(itertools.islice(f(), 3)) == [0, 1, 2]"),
    # -- exceptions ----------------------------------------------------------------------------
    "raises": (RECIPROCAL, "assert f(0) == 0"),
    "raises-but-not-used": (RECIPROCAL, "assert True or f(0)"),
    "pytest-raises-like": (RECIPROCAL, "try:\n    f(0)\n    raise AssertionError('no error')\nexcept ZeroDivisionError:\n"
                                       "    pass"),
    "raises-wrong-type": (RECIPROCAL, "try:\n    f(0)\nexcept ValueError:\n    pass"),
    "raises-like-context-manager": (RECIPROCAL,
                                    "class raises:\n    def __init__(self, t):\n        self.t = t\n    def __enter__(self):\n"
                                    "        return self\n    def __exit__(self, et, ev, tb):\n"
                                    "        return et is not None and issubclass(et, self.t)\n"
                                    "with raises(ZeroDivisionError):\n    f(0)\nwith raises(ArithmeticError):\n    f(0)"),
    "raises-nothing-context-manager": (RECIPROCAL,
                                       "class raises:\n    def __enter__(self):\n        return self\n"
                                       "    def __exit__(self, et, ev, tb):\n        if et is None:\n"
                                       "            raise AssertionError('did not raise')\n        return True\n"
                                       "with raises():\n    f(1)"),
    "exception-args": ("def f():\n    raise KeyError('k')", "try:\n    f()\nexcept KeyError as e:\n"
                                                          "    assert e.args == ('k',) and str(e) == \"'k'\""),
    "exception-attributes": ("class E(Exception):\n    def __init__(self, code):\n        super().__init__(code)\n"
                             "        self.code = code\ndef f():\n    raise E(4)",
                             "try:\n    f()\nexcept E as e:\n    assert e.code == 4"),
    "test-expression-raises": ("def f():\n    return 'a'", "assert f() + 1 == 2"),
    "exit-in-call": ("def f():\n    raise SystemExit(0)", "assert f() is None"),
    "exit-caught-by-test": ("def f():\n    raise SystemExit(3)", "try:\n    f()\nexcept SystemExit as e:\n"
                                                                "    assert e.code == 3"),
    "name-error": ("def g():\n    return 1", "assert f() == 1"),
    "unbound-local-in-program": ("def f():\n    x += 1\n    return x", "assert f() == 1"),
    "unbound-local-in-test": ("def f():\n    return 1", "def check():\n    if f() == 2:\n        y = 1\n    return y\n"
                                                     "assert check() == 1"),
    "stop-iteration-in-test": (GENERATOR, "g = f()\nfor _ in range(4):\n    next(g)"),
    "program-raises-at-load": ("raise ValueError('boom')\ndef f():\n    return 1", "assert f() == 1"),
    "program-syntax-error": ("def f(:\n    return 1", "assert f() == 1"),
    "test-syntax-error": ("def f():\n    return 1", "assert f( == 1"),
    # -- HumanEval's and MBPP's shapes ---------------------------------------------------------
    "check-candidate": ("def add(a, b):\n    return a + b",
                        "METADATA = {}\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"
                        "    assert candidate(0, 0) == 0, 'zero'\ncheck(add)"),
    "check-candidate-wrong": ("def add(a, b):\n    return a - b",
                              "def check(candidate):\n    assert candidate(1, 2) == 3\ncheck(add)"),
    "helper-of-the-prompt": ("def enc(s):\n    return s[::-1]\ndef dec(s):\n    return s[::-1]",
                             "import random, string\nrng = random.Random(0)\ndef check(candidate):\n    for _ in range(20):\n"
                             "        s = ''.join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 9)))\n"
                             "        assert candidate(enc(s)) == s\ncheck(dec)"),
    "loop-finds-a-wrong-one": ("def f(x):\n    return x if x != 7 else 0", "for i in range(10):\n    assert f(i) == i"),
    "candidate-named-like-a-builtin": ("def max(xs):\n    return xs[0]", "assert max([1, 3]) == 3"),
    "candidate-named-like-a-builtin-ok": ("def max(xs):\n    r = xs[0]\n    for x in xs:\n        r = x if x > r else r\n"
                                          "    return r", "assert max([1, 3]) == 3 and max([5]) == 5"),
    "candidate-named-sorted": ("def sorted(xs):\n    return list(xs)", "assert sorted([2, 1]) == [1, 2]"),
    "helper-break-continue": ("def f(x):\n    return x", "def first_even(xs):\n    for x in xs:\n        if x % 2:\n"
                              "            continue\n        break\n    else:\n        return None\n    return x\n"
                              "assert first_even([f(1), f(4), 6]) == 4"),
    "break-in-helper-wrong": ("def f(x):\n    return x", "def count(xs):\n    n = 0\n    for x in xs:\n        if x:\n"
                              "            break\n        n += 1\n    return n\nassert count([0, f(1), 0]) == 2"),
    "lambda-in-comprehension": ("def f(x):\n    return x * 2", "fs = [lambda: f(i) for i in range(3)]\n"
                                                              "assert [g() for g in fs] == [4, 4, 4]"),
    "lambda-default-capture": ("def f(x):\n    return x * 2", "fs = [lambda i=i: f(i) for i in range(3)]\n"
                                                              "assert [g() for g in fs] == [0, 2, 4]"),
    "walrus": ("def f():\n    return 4", "assert (v := f()) == 4 and v + 1 == 5"),
    "walrus-in-comprehension": ("def f(x):\n    return x % 3", "assert [y for x in range(5) if (y := f(x))] == [1, 2, 1, 2]\n"
                                                              "assert y == 2"),
    "comprehension-scope": ("def f(x):\n    return [i * i for i in range(x)]",
                            "assert all(v == i * i for i, v in enumerate(f(5)))\nassert {v % 2 for v in f(4)} == {0, 1}"),
    "key-lambda-to-program": ("def f(xs, key):\n    return sorted(xs, key=key)", "assert f([3, 1, 2], key=lambda v: -v) == [3, 2, 1]"),
    "builtin-key-to-program": ("def f(xs, key):\n    return sorted(xs, key=key)", "assert f(['bb', 'a'], key=len) == ['a', 'bb']"),
    "test-object-to-program": ("def f(node):\n    return node.value * 2",
                               "class Node:\n    def __init__(self, v):\n        self.value = v\nassert f(Node(4)) == 8"),
    "test-objects-sorted-by-program": ("def f(items):\n    return sorted(items)",
                                       "class V:\n    def __init__(self, v):\n        self.v = v\n    def __lt__(self, o):\n"
                                       "        return self.v < o.v\nr = f([V(2), V(1)])\nassert [x.v for x in r] == [1, 2]"),
    "callback-calls-program": ("def apply(fn, x):\n    return fn(x)\ndef double(x):\n    return 2 * x",
                               "assert apply(lambda v: double(v) + 1, 3) == 7"),
    "kwargs": ("def f(a, *, b=2):\n    return a * b", "assert f(3, b=4) == 12 and f(3) == 6"),
    "star-args": ("def f(*xs):\n    return sum(xs)", "args = [1, 2, 3]\nassert f(*args) == 6"),
    "star-kwargs": ("def f(**kw):\n    return sorted(kw)", "assert f(**{'b': 1, 'a': 2}) == ['a', 'b']"),
    "nested-calls": ("def f(x):\n    return x + 1", "assert f(f(f(0))) == 3"),
    "string-methods": ("def f(s):\n    return s.upper()", "assert f('ab').lower() == 'ab' and f('a b').split() == ['A', 'B']"),
    "fstring": ("def f():\n    return 3", "assert f'{f()}-{f():03d}' == '3-003'"),
    "isinstance-builtins": ("def f():\n    return [1]", "assert isinstance(f(), list) and not isinstance(f(), tuple)"),
    "print-in-test": ("def f():\n    return 1", "print('checking')\nassert f() == 1"),
    "open-in-the-program": ("open('data.txt', 'w').write('hi')\ndef f():\n    return open('data.txt').read()",
                            "assert f() == 'hi'"),
    "set-order-of-strings": ("def f():\n    return {'apple', 'kiwi', 'fig', 'plum', 'pear', 'lime'}",
                             "def g():\n    return list(f())\nassert list(f()) == g()"),
    "set-order-vs-program": ("def f():\n    return {'apple', 'kiwi', 'fig', 'plum', 'pear', 'lime'}\n"
                             "def order():\n    return list(f())", "assert list(f()) == order()"),
    "random-in-test": ("def f(x):\n    return x", "import random\nrandom.seed(1)\nxs = [random.randint(0, 9) for _ in range(5)]\n"
                                                 "assert [f(x) for x in xs] == xs"),
    "program-global-value": ("LIMIT = 10\ndef f():\n    return LIMIT", "assert f() == LIMIT == 10"),
    "program-method-named-like-a-test-global": ("class C:\n    def check(self):\n        return 1\n"
                                               "def f():\n    return C().check()",
                                               "def check(candidate):\n    assert candidate() == 1\ncheck(f)"),
    "test-redefines-a-name-the-program-does-not-use": ("def check(x):\n    return 0\ndef f():\n    return 1",
                                                      "def check(candidate):\n    assert candidate() == 1\ncheck(f)"),
    "test-imports-what-the-program-imported": ("import math\ndef f():\n    return math.pi",
                                               "import math\nassert f() == math.pi"),
    "match-statement": ("import collections\nP = collections.namedtuple('P', 'x y')\ndef f():\n    return P(1, 2)",
                        "match f():\n    case (1, y):\n        assert y == 2\n    case _:\n        assert False"),
    "deep-recursion-in-program": ("import sys\nsys.setrecursionlimit(5000)\ndef f(n):\n    return 0 if n == 0 else 1 + f(n - 1)",
                                  "assert f(3000) == 3000"),
    "large-list-result": ("def f(n):\n    return list(range(n))", "assert sum(f(200000)) == 199999 * 100000"),
    "many-calls": ("def f(x):\n    return x + 1", "for i in range(2000):\n    assert f(i) == i + 1"),
}

# Shapes where the program's own code would decide (the sandbox refuses to let it).
UNJUDGEABLE = {
    "object-eq": (POINT_EQ + "def f():\n    return P(1)", "assert f() == P(1)"),
    "object-eq-wrong": (POINT_EQ + "def f():\n    return P(2)", "assert f() == P(1)"),
    "str-subclass-eq": ("class S(str):\n    def __eq__(self, o):\n        return True\n    __hash__ = str.__hash__\n"
                        "def f():\n    return S('x')", "assert f() == 'x'"),
    "object-add": ("class V:\n    def __init__(self, v):\n        self.v = v\n    def __add__(self, o):\n"
                   "        return V(self.v + o)\ndef f():\n    return V(1)", "assert (f() + 1).v == 2"),
    "object-contains": ("class Bag:\n    def __contains__(self, x):\n        return x == 1\ndef f():\n    return Bag()",
                        "assert 1 in f()"),
    "dataclass-eq": ("import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int\ndef f():\n    return P(1)",
                     "assert f() == P(1)"),
    "object-lt-sort": ("class V:\n    def __init__(self, v):\n        self.v = v\n    def __lt__(self, o):\n"
                       "        return self.v < o.v\ndef f():\n    return [V(2), V(1)]", "assert [v.v for v in sorted(f())] == [1, 2]"),
    "builtin-redefined-next-to-candidate": ("abs = lambda v: 0\ndef f(x):\n    return 2.5",
                                            "assert abs(f(1) - 2.5) < 1e-9"),
    "test-redefines-a-name-the-program-uses": ("def helper():\n    return 1\ndef f():\n    return helper()",
                                               "def helper():\n    return 2\nassert helper() == 2 and f() == 1"),
    "test-defines-a-global-the-program-reads": ("def f():\n    return LIMIT * 2", "LIMIT = 3\nassert f() == 6"),
    "test-evals-the-program-s-repr": ("def to_repr(x):\n    return repr(x)", "assert eval(to_repr([1, 2])) == [1, 2]"),
    "test-runs-the-program-s-doctests": ("def f(x):\n    \"\"\"\n    >>> f(2)\n    4\n    \"\"\"\n    return x * 2",
                                         "import doctest\nassert doctest.run_docstring_examples(f, {'f': f}) is None"),
    "test-interrupts-a-call-and-goes-on": ("import time\ndef slow():\n    time.sleep(5)\ndef f():\n    return 1",
                                           "import signal\ndef boom(*a):\n    raise TimeoutError\n"
                                           "signal.signal(signal.SIGALRM, boom)\nsignal.setitimer(signal.ITIMER_REAL, 0.5)\n"
                                           "try:\n    slow()\nexcept TimeoutError:\n    pass\nassert f() == 1"),
    "test-calls-the-program-from-a-thread": ("def f():\n    return 1",
                                             "import threading\nout = []\nt = threading.Thread(target=lambda: out.append(f()))\n"
                                             "t.start()\nt.join()\nassert out == [1]"),
    "context-manager-swallows": ("class Quiet:\n    def __enter__(self):\n        return self\n"
                                 "    def __exit__(self, *a):\n        return True\n", "with Quiet():\n    assert False"),
}

# The fast tier's share (tests/integration/sandbox/test_split_parity.py): one or two of each
# kind; the slow tier (tests/slow/sandbox/test_parity_sweep.py) runs every shape, under
# several hash seeds, behind both boundaries.
FAST = ("tuple-vs-list", "float-equals-int", "big-int", "bytes", "set-and-dict", "dict-order-wrong",
        "type-of-result", "nan-in-list", "negative-zero", "abs-tolerance", "returns-its-argument", "aliased-arguments",
        "mutates-its-argument", "mutation-through-kwarg", "kept-and-mutated-later", "same-object-twice",
        "float-subclass-type", "str-subclass-method", "list-subclass-methods", "int-enum", "enum-iteration",
        "namedtuple-type", "counter-zero-counts", "defaultdict", "ordereddict", "deque", "fraction", "decimal",
        "datetime", "program-class-isinstance", "program-exception-class", "object-methods", "object-truthiness",
        "object-context-manager", "object-default-eq-differs", "generator-next", "generator-send",
        "infinite-generator", "pytest-raises-like", "raises-like-context-manager", "exception-attributes",
        "exit-caught-by-test", "unbound-local-in-test", "program-raises-at-load", "test-syntax-error",
        "check-candidate", "helper-of-the-prompt", "candidate-named-like-a-builtin", "break-in-helper-wrong",
        "lambda-in-comprehension", "walrus-in-comprehension", "key-lambda-to-program", "test-object-to-program",
        "test-objects-sorted-by-program", "callback-calls-program", "set-order-vs-program",
        "test-redefines-a-name-the-program-does-not-use", "match-statement", "many-calls",
        "test-captures-what-the-program-prints", "test-feeds-stdin")

SHAPES.update({
    "test-captures-what-the-program-prints": (
        "def greet(name):\n    print('hello', name)\n",
        "import contextlib, io\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    greet('ada')\n"
        "assert buf.getvalue() == 'hello ada\\n'"),
    "test-captures-wrong-output": (
        "def greet(name):\n    print('hi', name)\n",
        "import contextlib, io\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    greet('ada')\n"
        "assert buf.getvalue() == 'hello ada\\n'"),
    "test-feeds-stdin": (
        "def main():\n    n = int(input())\n    xs = list(map(int, input().split()))\n    return n == len(xs) and sum(xs)\n",
        "import io, sys\nsys.stdin = io.StringIO('3\\n1 2 3\\n')\nassert main() == 6"),
    "test-feeds-stdin-lines": (
        "import sys\ndef main():\n    return [line.strip() for line in sys.stdin]\n",
        "import io, sys\nsys.stdin = io.StringIO('a\\nb\\n')\nassert main() == ['a', 'b']"),
    "program-stderr-captured": (
        "import sys\ndef warn():\n    print('careful', file=sys.stderr)\n",
        "import contextlib, io\nbuf = io.StringIO()\nwith contextlib.redirect_stderr(buf):\n    warn()\n"
        "assert buf.getvalue() == 'careful\\n'"),
})
