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


def test_training_data_is_checked_by_path_and_head(tmp_path: Path) -> None:
    """Issue 56: ``afm train --data`` (and sft, rm, dpo, prune, adapter) say an empty,
    binary or missing file before JAX is imported."""
    from afm.preflight import check_data_paths

    empty, binary, fake = tmp_path / "empty.parquet", tmp_path / "bin.jsonl", tmp_path / "fake.parquet"
    empty.write_bytes(b"")
    binary.write_bytes(b"\x00\x01\x02" * 100)
    fake.write_bytes(b"id,text\n1,hello\n")
    cases = {str(empty): "empty (0 bytes)", str(binary): "binary data", str(fake): "not a Parquet file",
             str(tmp_path / "shards" / "x.parquet"): "input not found"}
    for path, needle in cases.items():
        with pytest.raises(InputProblem) as info:
            check_data_paths([path])
        assert needle in str(info.value) and str(info.value).startswith("training data: ")
    good = tmp_path / "ok.parquet"
    table = pa.table({"id": ["1"], "tokens": [[1, 2, 3]]})
    write_shard(str(good), table, table.schema)
    check_data_paths([str(good), str(tmp_path), str(tmp_path / "*.parquet")])  # directories, globs: the loader's


def test_a_benchmark_copy_or_seed_list_that_is_empty_or_binary_is_named(tmp_path: Path) -> None:
    from afm.preflight import check_file

    csv, empty = tmp_path / "gsm8k.csv", tmp_path / "arc.jsonl"
    csv.write_bytes(b"\x89PNG\x00\x00" * 50)
    empty.write_text("")
    for path, needle in ((csv, "binary data"), (empty, "empty (0 bytes)")):
        with pytest.raises(InputProblem) as info:
            check_file(str(path), "benchmark 'x'")
        assert needle in str(info.value) and str(path) in str(info.value)
    (tmp_path / "ok.csv").write_text("question,answer\n1+1,2\n")
    check_file(str(tmp_path / "ok.csv"), "benchmark 'x'")
