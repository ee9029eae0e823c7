"""ISA-L and zlib read damaged multi-member gzip the same way: the reader picks ISA-L where
it is installed (faster) and zlib elsewhere, and a file must give the same records either way."""

from __future__ import annotations

import gzip
import io
import random
import zlib

import pytest

from afm.readers import byte_stream
from afm.readers.byte_stream import Damage, iter_events

isal_zlib = pytest.importorskip("isal.isal_zlib", reason="isal is a curation dependency")


def _members(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [gzip.compress(b"WARC/1.1\r\n" + bytes(rng.randrange(256) for _ in range(rng.randrange(10, 5000))))
            for _ in range(n)]


def _damaged_files() -> dict[str, bytes]:
    parts = _members(6, 0)
    flipped = bytearray(parts[2])
    flipped[len(flipped) // 2] ^= 0x5A  # a corrupt deflate stream or a CRC mismatch
    bad_crc = bytearray(parts[4])
    bad_crc[-6] ^= 1  # the trailer's CRC alone
    whole = b"".join(parts)
    return {
        "clean": whole,
        "corrupt member": b"".join(parts[:2]) + bytes(flipped) + b"".join(parts[3:]),
        "bad crc": b"".join(parts[:4]) + bytes(bad_crc) + parts[5],
        "garbage between": parts[0] + b"not gzip at all" + b"".join(parts[1:]),
        "truncated tail": whole[: len(whole) - 40],
    }


def _events(data: bytes, inflater: object, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    monkeypatch.setattr(byte_stream, "_inflater", inflater)
    out: list[object] = []
    for event in iter_events(io.BytesIO(data), gzip=True, is_start=lambda b: b.startswith(b"WARC/")):
        # The libraries word their errors differently; what was lost, where, must agree.
        out.append((event.offset, event.resumed_at, event.reason) if isinstance(event, Damage) else event)
    return out


@pytest.mark.parametrize("name", list(_damaged_files()))
def test_isal_and_zlib_give_the_same_events(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _damaged_files()[name]
    with_isal = _events(data, isal_zlib, monkeypatch)
    with_zlib = _events(data, zlib, monkeypatch)
    assert b"".join(e for e in with_isal if isinstance(e, bytes)) == b"".join(
        e for e in with_zlib if isinstance(e, bytes))
    assert [e for e in with_isal if not isinstance(e, bytes)] == [e for e in with_zlib if not isinstance(e, bytes)]
    if name != "clean":
        assert any(isinstance(e, tuple) for e in with_zlib)  # the damage is seen at all


def test_the_reader_uses_isal_where_installed() -> None:
    assert byte_stream._inflater is isal_zlib
