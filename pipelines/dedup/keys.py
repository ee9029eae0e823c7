"""Graph node keys of de-duplication: sorting them picks the document to keep.

A node is ``<rank><16 hex of descending quality><id>\\x1f<content-hash prefix>``, so the
smallest node of a component is the accepted-corpus document if there is one (rank 0),
else the highest ``quality_score``, ties broken by id. The content-hash suffix keeps two
documents that share an id but not a text apart. Every dedup step compares nodes as
plain strings; nothing else is needed to decide which copy wins.
"""

from __future__ import annotations

import math
import struct

_ACCEPTED, _NEW = "0", "1"
_RANK_WIDTH = 1 + 16  # rank char + 16 hex digits of quality
_SEP = "\x1f"  # between doc id and content-hash prefix in a key
_MASK64 = (1 << 64) - 1


def quality_hex(quality: float | None) -> str:
    """16 hex digits that sort ascending as quality descends (None/NaN sort last)."""
    try:
        value = float(quality)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan  # missing or unusable scores rank last
    if value != value:
        return "f" * 16
    bits = struct.unpack(">Q", struct.pack(">d", value))[0]
    ordered = (bits ^ (1 << 63)) if bits >> 63 == 0 else (~bits & _MASK64)
    return f"{_MASK64 - ordered:016x}"


def doc_key(doc_id: str, content: bytes) -> str:
    """The join key of a document: its id plus a content-hash prefix."""
    return f"{doc_id}{_SEP}{content[:8].hex()}"


def node_key(key: str, quality: float | None, accepted: bool = False) -> str:
    """Graph node: sorts accepted first, then by quality descending, then by id."""
    if accepted:
        return _ACCEPTED + "0" * 16 + key
    return _NEW + quality_hex(quality) + key


def node_to_key(node: str) -> str:
    return node[_RANK_WIDTH:]


def key_to_id(key: str) -> str:
    return key.rsplit(_SEP, 1)[0]


def node_to_id(node: str) -> str:
    return key_to_id(node_to_key(node))


def is_accepted(node: str) -> bool:
    return node[0] == _ACCEPTED
