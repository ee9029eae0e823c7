"""The plain-data format both sides of the sandbox's wall speak: the evaluator's strict
decoder (``sandbox/plain.py``) reads what the harness's encoder writes and refuses
anything else; subclasses arrive as their base type, objects as opaque handles."""

from __future__ import annotations

import collections
import enum
import json
import math

import pytest

from afm.sandbox import harness, plain
from afm.sandbox.plain import Opaque, PlainDataError

VALUES = [None, True, False, 0, -7, 2**63, -(3**200), 1.5, -0.0, "text", "", b"\x00\xff", bytearray(b"ab"),
          [1, [2, [3]]], (1, "a"), (), {1, 2}, frozenset({"x"}), {1: "a", "b": [2], (1, 2): None},
          1 + 2j, range(1, 10, 3), [{"k": (1.25, None)}]]


def _over_the_wall(value, refs=None):
    """harness.encode (inside) -> JSON line -> plain.decode (evaluator)."""
    line = json.dumps(harness.encode(value, {} if refs is None else refs)).encode()
    return plain.decode(plain.loads(line))


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:20] for v in VALUES])
def test_plain_values_cross_unchanged(value) -> None:
    back = _over_the_wall(value)
    assert back == value and type(back) is type(value)
    sent = harness.decode(json.loads(plain.dumps(plain.encode(value))), {})  # evaluator -> harness
    assert sent == value and type(sent) is type(value)


def test_non_finite_floats_cross() -> None:
    assert math.isnan(_over_the_wall(float("nan")))
    assert _over_the_wall(float("-inf")) == float("-inf")


def test_subclasses_arrive_as_their_base_type() -> None:
    class Yes(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    class Color(enum.IntEnum):
        RED = 1

    point = collections.namedtuple("P", "x y")(1, 2)
    for value, expected in [(Yes("x"), "x"), (Color.RED, 1), (point, (1, 2)),
                            (collections.OrderedDict(a=1), {"a": 1}), (collections.Counter("aa"), {"a": 2})]:
        back = _over_the_wall(value)
        assert back == expected and type(back) is type(expected)
    assert _over_the_wall(Yes("x")) != "y"


def test_objects_stay_inside_as_handles() -> None:
    refs: dict = {}
    gen = (i for i in range(3))
    back = _over_the_wall([gen, object()], refs)
    assert all(isinstance(b, Opaque) for b in back) and refs[back[0].ref] is gen
    assert back[0] == back[0] and back[0] != back[1] and bool(back[0])
    with pytest.raises(TypeError):
        back[0] < back[1]  # noqa: B015 - the comparison itself is the point
    assert plain.encode(back[0]) == {"$ref": back[0].ref}


@pytest.mark.parametrize("line", [
    b'{"$eval": "x"}', b"NaN", b'[1, Infinity]', b'{"$set": [[1]]}', b'{"$bytes": "zz"}', b'{"$tuple": 1}',
    b'{"$int": 5}', b'{"$range": [0, 1, 0]}', b'{"a": 1, "b": 2}', b'{"$dict": [[1]]}', b"[" * 5000 + b"]" * 5000,
    b"not json",
])
def test_the_decoder_refuses_what_is_not_plain_data(line: bytes) -> None:
    with pytest.raises(PlainDataError):
        plain.decode(plain.loads(line))


def test_the_evaluator_sends_only_plain_data() -> None:
    with pytest.raises(PlainDataError, match="function"):
        plain.encode([lambda: 1])
    with pytest.raises(PlainDataError, match="nested"):
        value: list = []
        node = value
        for _ in range(plain.MAX_DEPTH + 5):
            node.append([])
            node = node[0]
        plain.encode(value)
