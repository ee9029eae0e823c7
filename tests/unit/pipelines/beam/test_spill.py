"""Texts stowed in spill files and restored (afm.pipelines.beam.spill): the record that
comes back equals the one that went in, key order included (the shard writer orders
records of one id by their packed bytes), and a spill file that went missing is a clear
error, never a silently empty text."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from afm.pipelines.beam.packing import pack, record_size, unpack
from afm.pipelines.beam.spill import (
    MIN_CHARS,
    STOWED,
    PackFn,
    SpillReader,
    SpillWriter,
    restore_all,
)

_WORDS = "river rose twice spring ferry stopped running bridge orchard winter market stone arch".split()
_RNG = random.Random(0)
LONG = " ".join(_RNG.choice(_WORDS) for _ in range(600))


def _doc(i: int, text: str = LONG) -> dict:
    return {"id": f"d{i}", "text": f"{i} {text}", "url": f"https://example.org/{i}", "signals": {"x": 1.0}}


def test_round_trip_keeps_record_and_key_order(tmp_path: Path) -> None:
    writer = SpillWriter(str(tmp_path / "spill"))
    docs = [_doc(i) for i in range(50)]
    stowed = [writer.stow(d) for d in docs]
    writer.close()
    for doc, small in zip(docs, stowed, strict=True):
        assert "text" not in small and STOWED in small
        assert list(small) == [STOWED if k == "text" else k for k in doc]
        assert len(pack(small)) < len(pack(doc)) / 2
    reader = SpillReader(max_open=1)
    back = [reader.restore(unpack(pack(s))) for s in reversed(stowed)]
    reader.close()
    assert back == list(reversed(docs))
    assert [pack(b) for b in back] == [pack(d) for d in reversed(docs)]
    assert len(list((tmp_path / "spill").iterdir())) == 1  # one file per writer (bundle)


def test_short_texts_and_other_records_stay_as_they_are(tmp_path: Path) -> None:
    writer = SpillWriter(str(tmp_path / "spill"))
    short = _doc(1, "x" * (MIN_CHARS - 10))
    odd = {"id": "n", "text": None}
    assert writer.stow(short) is short and writer.stow(odd) is odd
    writer.close()
    assert not (tmp_path / "spill").exists()  # nothing written, no file made
    assert SpillReader().restore(short) is short


def test_packed_record_sized_by_its_text_not_its_location(tmp_path: Path) -> None:
    doc = _doc(3)
    fn = PackFn(str(tmp_path / "spill"), reject=True, text_chars=100)
    fn.start_bundle()
    rec = {**doc, "rejected_by": "quality", "reason": "short"}
    (packed,) = list(fn.process(rec))
    fn.finish_bundle()
    trimmed = {**rec, "text": rec["text"][:100]}
    assert packed[:3] == ("d3", record_size(trimmed), "quality|short")
    assert restore_all([unpack(packed[3])]) == [trimmed]


def test_missing_spill_file_is_an_error(tmp_path: Path) -> None:
    writer = SpillWriter(str(tmp_path / "spill"))
    stowed = writer.stow(_doc(1))
    writer.close()
    path = Path(stowed[STOWED][0])
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(OSError, match="shorter than expected"):
        SpillReader().restore(stowed)


def test_large_signals_are_stowed_small_ones_stay(tmp_path: Path) -> None:
    writer = SpillWriter(str(tmp_path / "spill"))
    many = {f"quality.signal_number_{i}": i / 7 for i in range(40)}
    doc = {**_doc(2), "signals": many}
    stowed = writer.stow(doc)
    small = writer.stow(_doc(3))
    writer.close()
    assert "signals" not in stowed and "text" not in stowed
    assert small["signals"] == {"x": 1.0} and "text" not in small
    assert SpillReader().restore(stowed) == doc
    assert list(SpillReader().restore(stowed)) == list(doc)


def _stow_and_read_back(run: Path, doc: dict) -> tuple[dict, dict]:
    """``doc`` stowed by the first step of ``run`` and read back after its shuffle."""
    writer = SpillWriter(str(run / ".spill" / "read"))
    stowed = writer.stow(doc)
    writer.close()
    reader = SpillReader()
    back = reader.restore(stowed)
    reader.close()
    return stowed, back


def test_an_unchanged_text_read_back_is_not_written_again(tmp_path: Path) -> None:
    many = {f"quality.signal_number_{i}": i / 7 for i in range(40)}
    stowed, back = _stow_and_read_back(tmp_path, {**_doc(4), "signals": many})
    later = SpillWriter(str(tmp_path / ".spill" / "dedup"))
    again = later.stow(back)  # the text as read back; the signals a stage may have extended
    changed = later.stow({**back, "text": back["text"] + " edited"})
    later.close()
    assert again[STOWED] == stowed[STOWED]  # the same place: nothing written for it
    assert changed[STOWED][0] != stowed[STOWED][0]  # an edited text is written
    assert again["_stowed_signals"][0] == changed[STOWED][0]  # a dict is always written anew
    assert restore_all([again]) == [back]
    assert restore_all([changed])[0]["text"].endswith(" edited")


def test_a_text_of_another_run_is_written_again(tmp_path: Path) -> None:
    stowed, back = _stow_and_read_back(tmp_path / "run-1", _doc(5))
    writer = SpillWriter(str(tmp_path / "run-2" / ".spill" / "dedup"))
    again = writer.stow(back)
    writer.close()
    assert again[STOWED][0].startswith(str(tmp_path / "run-2"))
    assert restore_all([again]) == [back]
