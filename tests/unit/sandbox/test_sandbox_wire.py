"""The wire between the candidate's process and the referee's (``sandbox/plain.py``,
``sandbox/channel.py``), both halves in this process: values cross with their types,
mirrored containers keep identity and carry changes both ways, a set keeps its order,
the program's objects arrive as shadows that never decide a comparison, and what is out
of format or bounds is refused, never a hang."""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import math
import os
import random
import string
import threading

import pytest

from afm.sandbox import channel, harness, plain, referee
from afm.sandbox.plain import Refused, WireError


class Refusal(Exception):
    pass


@pytest.fixture
def wires(monkeypatch):
    """A candidate's and a referee's wire, with the referee's refusal raising here."""
    monkeypatch.setattr(referee, "conclude", lambda verdict, cause="", reason="": (_ for _ in ()).throw(
        Refusal(f"{verdict}: {reason}")))
    a, b = harness.CandidateWire(), referee.RefereeWire()
    monkeypatch.setitem(referee.STATE, "wire", b)
    return a, b


def across(src: plain.Wire, dst: plain.Wire, value):
    """``value`` from ``src`` to ``dst`` as one message would carry it."""
    sync = src.sync_out()
    data = plain.loads(plain.dumps({"s": sync, "v": src.enc(value)}))
    dst.apply_sync(data["s"])
    return dst.dec(data["v"])


VALUES = [None, True, False, 0, -7, 2**62, -(2**62), 2**63, -(3**200), 1.5, -0.0, 1e308, "text", "", "\ud800 é",
          b"\x00\xff", bytearray(b"ab"), [1, [2, [3]]], (1, "a"), (), {1, 2}, frozenset({"x"}),
          {1: "a", "b": [2], (1, 2): None}, 1 + 2j, range(1, 10, 3), slice(1, None, 2), Ellipsis, NotImplemented,
          fractions.Fraction(1, 3), decimal.Decimal("0.10"), datetime.date(2024, 2, 29),
          datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone(datetime.timedelta(hours=2), "X")),
          datetime.time(1, 2), datetime.timedelta(days=1, seconds=2), collections.Counter("aab"),
          collections.OrderedDict(a=1, b=2), collections.deque([1, 2], maxlen=3), [{"k": (1.25, None)}],
          int, collections.Counter, len, math.sqrt, str.lower, math, ValueError("bad", 2)]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:24] for v in VALUES])
def test_values_cross_with_their_types(wires, value) -> None:
    a, b = wires
    for src, dst in ((a, b), (b, a)):
        back = across(src, dst, value)
        assert type(back) is type(value)
        if isinstance(value, BaseException):
            assert back.args == value.args
        elif type(value) is collections.deque:
            assert list(back) == list(value) and back.maxlen == value.maxlen
        elif isinstance(value, (type, type(len), type(math))) or value is NotImplemented or value is Ellipsis \
                or value is str.lower:
            assert back is value
        else:
            assert back == value and repr(back) == repr(value)


def test_non_finite_floats_and_the_sign_of_zero_cross(wires) -> None:
    a, b = wires
    assert math.isnan(across(a, b, float("nan")))
    assert across(a, b, [float("-inf")]) == [float("-inf")]
    assert math.copysign(1, across(a, b, -0.0)) == -1


def test_a_defaultdict_keeps_its_factory_and_an_ordered_dict_its_order(wires) -> None:
    a, b = wires
    dd = collections.defaultdict(list, x=[1])
    back = across(a, b, dd)
    assert back.default_factory is list and back == {"x": [1]}
    od = collections.OrderedDict(a=1, b=2)
    od.move_to_end("a")
    assert list(across(a, b, od)) == ["b", "a"]


def test_mirrors_keep_identity_aliasing_and_carry_changes_both_ways(wires) -> None:
    a, b = wires
    shared = [1]
    pair = across(b, a, [shared, shared])  # the test sends one list twice
    assert pair[0] is pair[1]
    pair[0].append(2)  # the program changes it ...
    assert across(a, b, None) is None and shared == [1, 2]  # ... the next message carries it
    shared.append(3)  # the test changes it ...
    assert across(b, a, None) is None and pair[0] == [1, 2, 3]
    again = across(b, a, shared)  # and the same object crosses as itself
    assert again is pair[0]


def test_a_list_that_contains_itself_crosses(wires) -> None:
    a, b = wires
    loop: list = [1]
    loop.append(loop)
    back = across(a, b, loop)
    assert back[1] is back and back[0] == 1


def test_forgotten_mirrors_are_dropped_on_both_sides(wires) -> None:
    a, b = wires
    across(b, a, [1, 2])  # nothing holds it on either side afterwards
    a.prune()
    b.apply_drops(a.take_drops())
    b.prune()
    assert not a.objs and not b.objs and not b.peer_has


def test_a_set_keeps_its_iteration_order(wires) -> None:
    """The referee rebuilds a set so that it iterates as the program's did (one hash
    seed for both processes): over random sets of strings, all but a few."""
    a, b = wires
    rng = random.Random(0)
    same = 0
    for _ in range(200):
        items = ["".join(rng.choice(string.ascii_lowercase) for _ in range(5)) for _ in range(rng.randint(2, 40))]
        s = set(items)
        same += list(across(a, b, s)) == list(s)
        seq, presized = plain.set_recipe(tuple(s))
        if seq != list(s) or presized:
            assert list(plain.build_set(set, seq, presized)) == list(s)
    assert same >= 180, same


@pytest.mark.parametrize("data", [
    {"zz": 1}, ["bare", "array"], {"b": "!!"}, {"t": 1}, {"i": 5}, {"r": [0, 1, 0]}, {"f": "NaN"},
    {"m": "b9"}, {"m": "a1", "k": "zz", "v": []}, {"fs": [[1]]}, {"ty": "os:system"}, {"ty": "__main__:X"},
    {"mod": "not_a_module_of_python"}, {"Q": [1, 0]}, {"x": [{"ty": "builtins:int"}, [], "", {}]},
    {"back": 12345},
])
def test_the_decoder_refuses_what_is_out_of_format(wires, data) -> None:
    _, b = wires
    with pytest.raises(WireError):
        b.dec(data)


def test_values_nested_too_deeply_are_refused_both_ways(wires) -> None:
    a, b = wires
    value: list = []
    node = value
    for _ in range(plain.MAX_DEPTH + 5):
        node.append([])
        node = node[0]
    with pytest.raises(plain.TooLarge):
        a.enc(value)
    with pytest.raises(WireError):
        plain.loads(b"[" * 100_000 + b"]" * 100_000)


def test_colliding_hashes_are_refused_not_built(wires) -> None:
    _, b = wires
    p = 2**61 - 1
    with pytest.raises(Refused):
        b.dec({"fs": [{"i": format(i * p, "x")} for i in range(1, 2000)]})


@pytest.mark.parametrize("line", [b"NaN", b"[1,", b"{}{}", b"[Infinity]", b"\xff", b'{"a":1}x'])
def test_lines_that_are_not_one_json_value_are_refused(line: bytes) -> None:
    with pytest.raises(WireError):
        plain.loads(line)


# -- shadows ---------------------------------------------------------------------------

PROGRAM = """
class Base:
    def hello(self):
        return "hi"
class Point(Base):
    def __init__(self, x):
        self.x = x
    def __eq__(self, other):
        return True
    __hash__ = None
    def __len__(self):
        return 3
class Up(str):
    def shout(self):
        return self.upper() + "!"
class Cool(float):
    pass
"""


def _program() -> dict:
    namespace: dict = {}
    exec(PROGRAM, namespace)
    return namespace


def test_objects_of_the_program_arrive_as_shadows_of_their_class(wires) -> None:
    a, b = wires
    ns = _program()
    point, up, cool = across(a, b, [ns["Point"](1), ns["Up"]("x"), ns["Cool"](1.5)])
    assert type(point).__name__ == "Point" and [c.__name__ for c in type(point).__mro__[:2]] == ["Point", "Base"]
    assert type(up) is not str and isinstance(up, str) and up == "x" and up.upper() == "X"
    assert type(cool) is not float and isinstance(cool, float) and cool == 1.5 and type(cool).__name__ == "Cool"
    assert across(a, b, ns["Point"]) is type(point)  # the class itself, sent later, is the same class


def test_a_shadow_never_lets_the_program_decide_a_comparison(wires) -> None:
    a, b = wires
    point = across(a, b, _program()["Point"](1))
    with pytest.raises(Refusal, match="unjudgeable.*Point.__eq__"):
        point == 1  # noqa: B015 - the comparison is the point
    with pytest.raises(TypeError):
        hash(point)  # __hash__ = None: unhashable, as in the program


def test_the_test_s_objects_reach_the_program_only_by_their_public_face() -> None:
    class Secret:
        expected = [1, 2]
        _hidden = "key"

    with pytest.raises(AttributeError, match="cannot reach"):
        referee.answer_callback("getattr", [Secret(), "_hidden"], {})
    with pytest.raises(AttributeError, match="cannot reach"):
        referee.answer_callback("getattr", [lambda: 1, "__globals__"], {})
    with pytest.raises(TypeError):
        referee.answer_callback("dunder", [Secret(), "__reduce_ex__", 2], {})
    assert referee.answer_callback("getattr", [Secret(), "expected"], {}) == [1, 2]


# -- the channel -----------------------------------------------------------------------

class Failed(Exception):
    pass


def _fail(kind: str, detail: str):
    raise Failed(kind, detail)


def _pair(cap: int = 1 << 20):
    """The referee's end here, the candidate's served from a thread."""
    to_b_r, to_b_w = os.pipe()
    to_a_r, to_a_w = os.pipe()
    ns = _program()
    ns["double"] = lambda x: 2 * x
    a_wire = harness.CandidateWire()
    done = []

    def serve():
        link = channel.Channel(to_a_r, to_b_w, a_wire, harness._answer(ns), _fail, cap)
        harness.CHANNEL[0] = link
        try:
            link.serve()
        except Failed as exc:
            done.append(exc.args[0])
        finally:
            os.close(to_b_w)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    b_wire = referee.RefereeWire()
    link = channel.Channel(to_b_r, to_a_w, b_wire, referee.answer_callback, _fail, cap, strict=True)
    return link, b_wire, thread, done, (to_b_r, to_a_w)


def test_requests_and_answers_with_calls_back_into_the_test(monkeypatch) -> None:
    link, wire, thread, done, fds = _pair()
    monkeypatch.setitem(referee.STATE, "channel", link)
    monkeypatch.setitem(referee.STATE, "wire", wire)
    double = link.request("global", ("double",))
    assert double(21) == 42
    with pytest.raises(NameError):
        link.request("global", ("missing",))
    assert link.request("call", (double, [3, 1])) == [3, 1, 3, 1]
    point = link.request("global", ("Point",))(5)  # built in the program, a shadow here
    assert len(point) == 3 and point.x == 5 and point.hello() == "hi"
    os.close(fds[1])  # the test ends: the candidate sees the pipe close
    thread.join(10)
    assert done == ["closed"]
    os.close(fds[0])


def test_a_message_over_the_cap_stops_the_conversation() -> None:
    link, wire, thread, done, fds = _pair(cap=4096)
    with pytest.raises(Failed, match="too-large"):
        link.request("call", (lambda: None, "x" * 10_000))
    for fd in fds:
        os.close(fd)
    thread.join(10)
