"""The coercion step (afm.pipelines.beam.coerce): one bad value costs that value, never the record or
its neighbours, and every document it returns fits the Parquet schema."""

from __future__ import annotations

import datetime as dt

import pytest

from afm.pipelines.beam.coerce import classify, repair_surrogates
from afm.schema import DOCUMENT_FIELDS, document_id, to_table


def _doc(rec: dict, source: str = "web") -> tuple[dict, list[str]]:
    out = classify(rec, source)
    assert out.kind == "doc", (out.reason, out.details)
    to_table([out.value])  # must always be writable
    return out.value, out.notes


def test_issue_13_ill_typed_fields_are_coerced_or_cleared() -> None:
    """Issue 13: "id": 7, "title": 5, "signals": "x" and fetched_at 1e20 each failed a run."""
    doc, notes = _doc({"id": 7, "text": "t", "title": 5, "signals": "x", "fetched_at": 1e20})
    assert doc["id"] == "7" and doc["title"] == "5"
    assert doc["signals"] is None and doc["fetched_at"] is None
    assert notes == ["id:converted", "title:converted", "fetched_at:cleared", "signals:cleared"]


def test_lone_surrogates_are_repaired_everywhere() -> None:
    """Issue 13: a lone surrogate "\\ud800" in the text failed the whole run (no UTF-8
    encoder accepts one)."""
    doc, notes = _doc({"id": "a\udc00", "text": "x\ud800y", "title": "\udfff",
                       "url": "http://u.test/\ud800"})
    assert doc["text"] == "x\ufffdy" and doc["id"] == "a\ufffd" and doc["title"] == "\ufffd"
    for field in ("text", "id", "title", "url"):
        assert f"{field}:surrogates_repaired" in notes
    # A pair written as two JSON escapes is one character, not two replacements.
    assert repair_surrogates("\ud83d\ude00")[0] == "\U0001f600"


@pytest.mark.parametrize(("rec", "reason"), [
    ({"url": "http://x"}, "missing_text"),
    ({"text": 5}, "bad_text_type"),
    ({"text": ["a"]}, "bad_text_type"),
    ({"id": {"a": 1}, "text": "x"}, "bad_id"),
    ({"id": True, "text": "x"}, "bad_id"),
    ({"id": 1.5, "text": "x"}, "bad_id"),
])
def test_records_that_cannot_be_documents(rec: dict, reason: str) -> None:
    out = classify(rec, "web")
    assert out.kind == "bad" and out.reason == reason


@pytest.mark.parametrize("value", [[1, 2], "x", 5, None, True])
def test_non_objects_are_bad_records(value: object) -> None:
    out = classify(value, "web")
    assert out.kind == "bad" and out.reason == "not_a_record"


def test_ids_are_derived_when_missing() -> None:
    doc, _ = _doc({"text": "hello", "url": "http://a.test/"})
    assert doc["id"] == document_id("http://a.test/", "hello")
    doc, _ = _doc({"text": "hello", "id": ""})
    assert doc["id"] == document_id(None, "hello")


def test_types_of_every_field() -> None:
    doc, notes = _doc({
        "text": "t", "source": "blog", "language": 3, "language_score": "0.9",
        "quality_score": True, "safety_score": 1e300, "dup_cluster": ["x"],
        "pii_redactions": {"email": 2, "phone": "x", "ip": 1.5, 7: 1},
        "signals": {"a": 1, "b": "no", "c": 2.5}, "fetched_at": "2024-01-02T03:04:05Z",
        "extra_field": "dropped", "url": 12,
    })
    assert doc["source"] == "web" and "source:replaced" in notes
    assert doc["language"] == "3" and doc["language_score"] == 0.9
    assert doc["quality_score"] is None and doc["safety_score"] is None  # bool; float32 overflow
    assert doc["dup_cluster"] is None and doc["url"] is None
    assert doc["pii_redactions"] == {"email": 2, "7": 1}
    assert doc["signals"] == {"a": 1.0, "c": 2.5}
    assert doc["fetched_at"] == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert set(doc) == set(DOCUMENT_FIELDS)


@pytest.mark.parametrize("value", [1e20, -1e20, float("nan"), float("inf"), "yesterday",
                                   "2024-13-45", [2024], True, 10**30])
def test_bad_timestamps_are_cleared(value: object) -> None:
    doc, notes = _doc({"text": "t", "fetched_at": value})
    assert doc["fetched_at"] is None and "fetched_at:cleared" in notes


def test_timestamps_accepted() -> None:
    """A naive timestamp is read as UTC (what crawlers and Common Crawl write), an aware one
    converted to UTC, a number as seconds since the epoch."""
    naive = dt.datetime(2024, 1, 1, 12)
    assert _doc({"text": "t", "fetched_at": naive})[0]["fetched_at"] == dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC)
    paris = dt.datetime(2024, 1, 1, 13, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert _doc({"text": "t", "fetched_at": paris})[0]["fetched_at"] == dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC)
    assert _doc({"text": "t", "fetched_at": 0})[0]["fetched_at"] == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def test_pages_for_extraction() -> None:
    """Issue 13: an html record with ``status: "OK"`` dropped the rest of its file."""
    out = classify({"html": "<p>x\ud800</p>", "url": "http://p.test/", "status": "OK"}, "web")
    assert out.kind == "page" and out.value["status"] == "OK"  # extract rejects it, naming it
    assert out.value["body"] == "<p>x\ufffd</p>".encode()
    out = classify({"body": b"<p>x</p>", "status": "404", "headers": [["A", "b"]]}, "web")
    assert out.value["status"] == 404 and out.value["headers"] == [["A", "b"]]  # every line kept
    out = classify({"body": 12}, "web")
    assert out.kind == "bad" and out.reason == "bad_body"


def test_code_file_records() -> None:
    doc, _ = _doc({"path": "a.py", "content": "x = 1", "repo": "o/r", "license": "MIT"}, "code")
    assert doc["url"] == "o/r/a.py" and doc["title"] == "a.py" and doc["license"] == "MIT"


def test_map_values_that_are_not_finite() -> None:
    """Found by the property test: {"": Infinity} in pii_redactions crashed the reader."""
    doc, notes = _doc({"text": "t", "pii_redactions": {"a": float("inf"), "b": float("nan"), "c": 2},
                       "signals": {"x": float("inf"), "y": 10**400}})
    assert doc["pii_redactions"] == {"c": 2} and "pii_redactions:entries_dropped" in notes
    assert doc["signals"]["x"] == float("inf")


def test_huge_numbers() -> None:
    doc, _ = _doc({"text": "t", "title": 10**400, "quality_score": 10**400, "id": 10**30})
    assert doc["title"] == str(10**400) and doc["quality_score"] is None
    assert doc["id"] == str(10**30)


def test_map_given_as_pairs_with_unhashable_keys() -> None:
    """Found by the property test: [[[], null]] as pii_redactions crashed the reader."""
    doc, notes = _doc({"text": "t", "pii_redactions": [[[], None]], "signals": [["a", 1]]})
    assert doc["pii_redactions"] is None and "pii_redactions:cleared" in notes
    assert doc["signals"] == {"a": 1.0}
