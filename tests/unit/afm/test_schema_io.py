"""The document/reject schemas round-trip through Parquet and JSONL unchanged."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow.parquet as pq
import pytest

from afm.io import expand_inputs, read_records, write_parquet
from afm.schema import (
    DOCUMENT_FIELDS,
    DOCUMENT_SCHEMA,
    REJECT_SCHEMA,
    document_id,
    make_document,
    make_reject,
)


def test_document_roundtrip_through_parquet(tmp_path):
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    doc = make_document(
        "Hello, world. Ünïcödé and emoji 🐝.",
        url="https://example.org/a",
        fetched_at=when,
        language="en",
        language_score=0.98,
        pii_redactions={"email": 2},
        signals={"quality.word_count": 7.0},
    )
    path = write_parquet([doc], tmp_path / "docs.parquet")
    assert pq.read_schema(path).equals(DOCUMENT_SCHEMA, check_metadata=False)
    (back,) = list(read_records(path))
    assert back["text"] == doc["text"]
    assert back["fetched_at"] == when
    assert back["pii_redactions"] == {"email": 2}
    assert back["signals"] == {"quality.word_count": 7.0}
    assert set(back) == set(DOCUMENT_FIELDS)


def test_reject_keeps_document_and_reason(tmp_path):
    doc = make_document("dup text", url="https://a.org/x")
    rej = make_reject(doc, "dedup", "near_duplicate", duplicate_of="abc", cluster="c1")
    path = write_parquet([rej], tmp_path / "rejects.parquet", REJECT_SCHEMA)
    (back,) = list(read_records(path))
    assert back["rejected_by"] == "dedup" and back["reason"] == "near_duplicate"
    assert json.loads(back["details"]) == {"cluster": "c1", "duplicate_of": "abc"}
    assert back["id"] == doc["id"]


def test_ids_are_stable_and_url_based():
    assert document_id("https://a.org/x", "one") == document_id("https://a.org/x", "two")
    assert document_id(None, "one") != document_id(None, "two")
    assert len(document_id(None, "x")) == 20


def test_bad_records_fail_clearly(tmp_path):
    with pytest.raises(ValueError, match="unknown source"):
        make_document("x", source="blog")
    with pytest.raises(ValueError, match="unknown document fields"):
        make_document("x", colour="red")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "text": "ok"}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        list(read_records(bad))
    with pytest.raises(ValueError, match="unsupported file type"):
        list(read_records(tmp_path / "x.csv"))


def test_atomic_write_leaves_no_temp_files(tmp_path):
    write_parquet([make_document("a")], tmp_path / "s" / "part-0.parquet")
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["part-0.parquet"]
    assert expand_inputs([str(tmp_path)]) == [str(tmp_path / "s" / "part-0.parquet")]
    with pytest.raises(FileNotFoundError):
        expand_inputs([str(tmp_path / "missing")])
