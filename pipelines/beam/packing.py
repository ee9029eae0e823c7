"""Documents packed into compressed bytes for the shuffles that carry them.

A document crosses a shuffle three times in a curate run (one per id, the dedup join,
the shard writer) and a crawl page once (the spread after reading). Given as a Python
dict, a shuffle stores it in whatever form the runner keeps grouped values: Beam's local
runner keeps the decoded dicts (about twice the text in memory), Dataflow's shuffle
service bills the pickled bytes. Packed (pickle, then zstd above a few hundred bytes),
web text and HTML shrink three to five times, and the runner holds one ``bytes`` object.

Packing costs a few microseconds per document against milliseconds of filtering, and is
invisible to every stage: each transform that groups documents packs its values before
the shuffle and unpacks them after.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pyarrow as pa

_RAW, _ZSTD = b"r", b"z"
_MIN_COMPRESS = 256  # smaller payloads gain nothing from compression
_codec: pa.Codec | None = None


def _zstd() -> pa.Codec:
    global _codec
    if _codec is None:
        _codec = pa.Codec("zstd", compression_level=1)
    return _codec


def pack(value: Any) -> bytes:
    """``value`` (any picklable record) as compact bytes."""
    raw = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    if len(raw) < _MIN_COMPRESS:
        return _RAW + raw
    packed = _zstd().compress(raw, asbytes=True)
    if len(packed) >= len(raw):
        return _RAW + raw
    return _ZSTD + len(raw).to_bytes(8, "little") + packed


def unpack(data: bytes) -> Any:
    """The value :func:`pack` was given."""
    kind = data[:1]
    if kind == _RAW:
        return pickle.loads(data[1:])
    if kind == _ZSTD:
        size = int.from_bytes(data[1:9], "little")
        return pickle.loads(_zstd().decompress(data[9:], decompressed_size=size, asbytes=True))
    raise ValueError(f"not a packed value (header {kind!r})")


# A record on its way to the shard writer: ``(id, size, label, packed record)``. ``size``
# is the record's approximate uncompressed bytes (shard sizing), ``label`` a short
# grouping key its consumers need without unpacking (``stage|reason`` for a reject).
PackedRecord = tuple[str, int, str, bytes]


def record_size(rec: dict[str, Any]) -> int:
    """Approximate uncompressed bytes of a record (text dominates; 256 for the rest)."""
    return len(rec.get("text") or "") + len(rec.get("url") or "") + 256


def pack_record(rec: dict[str, Any], label: str = "", text_chars: int = 0,
                stow: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> PackedRecord:
    """``rec`` packed for the writer; with ``text_chars`` > 0 its text is cut to that
    many characters first (rejects at scale keep a prefix, not the whole page). ``stow``:
    what to do to the record before packing (its text written to a spill file,
    :mod:`afm.pipelines.beam.spill`); the size is the record's own."""
    if text_chars > 0 and len(rec.get("text") or "") > text_chars:
        rec = {**rec, "text": rec["text"][:text_chars]}
    return str(rec.get("id")), record_size(rec), label, pack(stow(rec) if stow else rec)


def reject_label(rec: dict[str, Any]) -> str:
    """The label of a packed reject: ``stage|reason``."""
    return f"{rec.get('rejected_by')}|{rec.get('reason')}"


def pack_reject(rec: dict[str, Any], text_chars: int = 0) -> PackedRecord:
    """A reject packed for the writer, labelled ``stage|reason``."""
    return pack_record(rec, reject_label(rec), text_chars)
