"""apply_filter: kept documents carry the filter's signals; anything that goes wrong in a
filter becomes a reject with the filter's name, never an exception that kills a bundle."""

from __future__ import annotations

from afm.filters.base import Decision, apply_filter
from afm.schema import make_document


class _Flt:
    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    def __call__(self, doc):
        return self.fn(doc)


def test_keep_merges_namespaced_signals():
    doc = make_document("hello", signals={"earlier.x": 1.0})
    kept, rej = apply_filter(_Flt("len", lambda d: Decision(True, signals={"chars": 5})), doc)
    assert rej is None and kept["signals"] == {"earlier.x": 1.0, "len.chars": 5.0}


def test_drop_keeps_evidence_and_details():
    flt = _Flt("len", lambda d: Decision.drop("too_short", {"chars": 5}, minimum=10))
    kept, rej = apply_filter(flt, make_document("hello"))
    assert kept is None
    assert (rej["rejected_by"], rej["reason"]) == ("len", "too_short")
    assert rej["signals"] == {"len.chars": 5.0} and '"minimum": 10' in rej["details"]


def test_crashes_and_bad_decisions_become_rejects():
    doc = make_document("hello")
    _, rej = apply_filter(_Flt("boom", lambda d: 1 / 0), doc)
    assert rej["reason"] == "error:ZeroDivisionError" and rej["id"] == doc["id"]
    _, rej = apply_filter(_Flt("bad", lambda d: Decision(True, signals={"x": "n/a"})), doc)
    assert rej["reason"] == "error:ValueError" and rej["text"] == "hello"
