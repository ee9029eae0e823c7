"""Inputs are checked before a pipeline starts: each problem one line naming the file and
what would be right (afm/preflight.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pytest

from afm.io import write_shard
from afm.preflight import InputProblem, check_inputs


def _problem(*patterns) -> str:
    with pytest.raises(InputProblem) as info:
        check_inputs([str(p) for p in patterns])
    message = str(info.value)
    assert "\n" not in message
    return message


def test_good_inputs_pass_and_are_returned(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "1", "text": "hello"}) + "\n")
    assert check_inputs([str(docs)]) == [str(docs)]


def test_a_missing_path_names_its_look_alikes(tmp_path: Path) -> None:
    (tmp_path / "docs.jsonl").write_text("{}\n")
    message = _problem(tmp_path / "dosc.jsonl")
    assert "input not found" in message and "did you mean" in message and "docs.jsonl" in message
    assert "does not exist either" in _problem(tmp_path / "nowhere" / "docs.jsonl")


def test_empty_binary_and_broken_files_say_what_would_be_right(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert "empty (0 bytes)" in _problem(tmp_path / "empty.jsonl")
    (tmp_path / "prog.jsonl").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 8)
    message = _problem(tmp_path / "prog.jsonl")
    assert "binary data" in message and "one JSON object per line" in message
    (tmp_path / "prog.jsonl.gz").write_bytes(gzip.compress(b"\x00\x01\x02" * 100))
    assert "binary data" in _problem(tmp_path / "prog.jsonl.gz")
    (tmp_path / "words.jsonl").write_text("just some words\nand more\n")
    message = _problem(tmp_path / "words.jsonl")
    assert "not JSONL" in message and "line 1" in message
    (tmp_path / "cut.parquet").write_bytes(b"PAR1 and nothing else")
    assert "not a readable PARQUET file" in _problem(tmp_path / "cut.parquet")
    (tmp_path / "page.warc.gz").write_bytes(gzip.compress(b"<html>not a WARC</html>"))
    assert "expected a WARC file" in _problem(tmp_path / "page.warc.gz")


def test_one_bad_file_among_good_ones_is_left_to_the_run(tmp_path: Path) -> None:
    """A few bad records or files among good ones are the run's read rejects, not an error."""
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "1", "text": "hello"}) + "\n")
    (tmp_path / "b.jsonl").write_text("not json\n")
    (tmp_path / "c.jsonl").write_bytes(b"")
    assert len(check_inputs([str(tmp_path)])) == 3


def test_a_finished_dataset_of_no_document_names_the_run_that_kept_nothing(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    out.mkdir()
    schema = pa.schema([("id", pa.string()), ("text", pa.string())])
    write_shard(out / "documents-00000.parquet", pa.table({"id": [], "text": []}, schema=schema), schema)
    (out / "manifest.json").write_text(json.dumps({"command": "curate",
                                                   "totals": {"in": 12, "kept": 0, "rejected": 12}}))
    (out / "_SUCCESS").write_text("{}")
    message = _problem(out)
    assert "holds no document" in message and "`afm curate` kept none of the 12" in message
