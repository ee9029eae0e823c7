"""Values that cross the sandbox's wall as plain data, never as objects.

A split test (``judge.py``) sends the program's side arguments and gets back return
values. Both directions use one tagged-JSON format; the harness (``harness.py``, which
runs inside the sandbox and may use the standard library only) has its own copy of the
encoder and decoder, and ``tests/unit/sandbox/test_sandbox_plain.py`` checks the two agree.

* ``None``, ``bool``, ``str``, finite ``float`` and ints up to 64 bits are JSON values;
* lists are JSON arrays; ``{"$tuple": [...]}``, ``{"$set": [...]}``,
  ``{"$frozenset": [...]}``, ``{"$dict": [[k, v], ...]}`` (keys of any plain type, in
  order), ``{"$bytes": hex}``, ``{"$bytearray": hex}``, ``{"$complex": [re, im]}``,
  ``{"$float": "nan" | "inf" | "-inf"}``, ``{"$int": hex}`` (larger ints), ``{"$range":
  [start, stop, step]}``;
* ``{"$ref": n}``: an object that is not plain data stays inside the sandbox; the
  evaluator holds an :class:`Opaque` handle it can pass back (to call it, read an
  attribute, convert it), and judges it by identity only.

The decoder is strict: an unknown tag, a malformed value, more than ``MAX_DEPTH`` levels
or a line over its size cap is a :class:`PlainDataError`, never a crash of the evaluator.
Subclasses of plain types arrive as their base type, so a returned object cannot carry
its own ``__eq__`` into the comparison.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 200
INT_JSON_BITS = 63


class PlainDataError(ValueError):
    """What came over the wall is not plain data in the agreed format."""


class Opaque:
    """A handle to an object that lives in the sandbox (``{"$ref": n}``).

    The evaluator never runs the program's code on it: equal only to itself, always
    true, never ordered, not hashable by value. Operations that need the object itself
    (calling it, reading an attribute or an item, converting it) are sent back to the
    sandbox by the judge."""

    __slots__ = ("ref", "type_name")

    def __init__(self, ref: int, type_name: str = "object") -> None:
        self.ref = ref
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} object in the sandbox>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.ref == self.ref

    def __hash__(self) -> int:
        return hash(("afm-opaque", self.ref))


def encode(value: Any, depth: int = 0) -> Any:
    """Plain ``value`` (evaluator side) as JSON-ready data; :class:`Opaque` handles
    become references. Anything else raises :class:`PlainDataError`."""
    if depth > MAX_DEPTH:
        raise PlainDataError("nested too deeply")
    tp = type(value)
    if value is None or tp in (bool, str):
        return value
    if tp is int:
        return value if value.bit_length() <= INT_JSON_BITS else {"$int": hex(value)}
    if tp is float:
        if math.isfinite(value):
            return value
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if tp is list:
        return [encode(v, depth + 1) for v in value]
    if tp in (tuple, set, frozenset):
        return {f"${tp.__name__}": [encode(v, depth + 1) for v in value]}
    if tp is dict:
        return {"$dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if tp in (bytes, bytearray):
        return {f"${tp.__name__}": value.hex()}
    if tp is complex:
        return {"$complex": [encode(value.real), encode(value.imag)]}
    if tp is range:
        return {"$range": [value.start, value.stop, value.step]}
    if tp is Opaque:
        return {"$ref": value.ref}
    raise PlainDataError(f"{tp.__name__} is not plain data")


def _int(value: Any) -> int:
    if type(value) is not int:
        raise PlainDataError(f"expected an int, got {type(value).__name__}")
    return value


def _float(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    if type(value) is dict and set(value) == {"$float"} and value["$float"] in ("nan", "inf", "-inf"):
        return float(value["$float"])
    raise PlainDataError("expected a float")


def decode(data: Any, depth: int = 0) -> Any:
    """The value ``data`` (parsed JSON) stands for; strict."""
    if depth > MAX_DEPTH:
        raise PlainDataError("nested too deeply")
    tp = type(data)
    if data is None or tp in (bool, str, int, float):
        return data
    if tp is list:
        return [decode(v, depth + 1) for v in data]
    if tp is dict and "$ref" in data and set(data) <= {"$ref", "type"}:
        return Opaque(_int(data["$ref"]), str(data.get("type", "object"))[:100])
    if tp is not dict or len(data) != 1:
        raise PlainDataError(f"not a tagged value: {str(data)[:80]}")
    (tag, body), = data.items()
    try:
        if tag in ("$tuple", "$set", "$frozenset"):
            if type(body) is not list:
                raise PlainDataError(f"{tag} needs a list")
            items = [decode(v, depth + 1) for v in body]
            return {"$tuple": tuple, "$set": set, "$frozenset": frozenset}[tag](items)
        if tag == "$dict":
            if type(body) is not list or not all(type(p) is list and len(p) == 2 for p in body):
                raise PlainDataError("$dict needs [key, value] pairs")
            return {decode(k, depth + 1): decode(v, depth + 1) for k, v in body}
        if tag in ("$bytes", "$bytearray"):
            if type(body) is not str:
                raise PlainDataError(f"{tag} needs hex")
            raw = bytes.fromhex(body)
            return raw if tag == "$bytes" else bytearray(raw)
        if tag == "$int":
            if type(body) is not str:
                raise PlainDataError("$int needs hex")
            return int(body, 16)
        if tag == "$float":
            return _float(data)
        if tag == "$complex":
            if type(body) is not list or len(body) != 2:
                raise PlainDataError("$complex needs [re, im]")
            return complex(_float(body[0]), _float(body[1]))
        if tag == "$range":
            if type(body) is not list or len(body) != 3:
                raise PlainDataError("$range needs [start, stop, step]")
            return range(_int(body[0]), _int(body[1]), _int(body[2]))
    except (TypeError, ValueError) as exc:  # unhashable set items, bad hex, step 0, ...
        if isinstance(exc, PlainDataError):
            raise
        raise PlainDataError(f"{tag}: {exc}") from exc
    raise PlainDataError(f"unknown tag {tag!r}")


def _no_constants(name: str) -> Any:
    raise PlainDataError(f"{name} is not JSON")


def loads(line: bytes | str) -> Any:
    """Parse one line of the protocol (JSON, no NaN/Infinity literals) without decoding."""
    try:
        return json.loads(line, parse_constant=_no_constants)
    except RecursionError as exc:
        raise PlainDataError("nested too deeply") from exc
    except ValueError as exc:
        if isinstance(exc, PlainDataError):
            raise
        raise PlainDataError(f"not JSON: {exc}") from exc


def dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), allow_nan=False).encode() + b"\n"
