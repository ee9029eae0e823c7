"""Node keys: the smallest node of a cluster must be the document to keep."""

from __future__ import annotations

import pytest

from afm.pipelines.dedup.pipeline import (
    DedupConfig,
    doc_key,
    key_to_id,
    node_key,
    node_to_id,
    quality_hex,
)


def test_quality_hex_sorts_descending_with_missing_last() -> None:
    qualities = [1e9, 2.5, 1.0, 0.5, 0.0, -0.0, -0.25, -3.0, float("-inf"), None, float("nan"), "junk"]
    encoded = [quality_hex(q) for q in qualities]
    assert encoded == sorted(encoded)
    assert quality_hex(0.7) < quality_hex(0.3)


def test_node_order_accepted_then_quality_then_id() -> None:
    content = bytes(range(16))
    accepted = node_key(doc_key("zzz", content), None, accepted=True)
    best = node_key(doc_key("yyy", content), 0.9)
    tie_a = node_key(doc_key("aaa", content), 0.5)
    tie_b = node_key(doc_key("bbb", content), 0.5)
    unknown = node_key(doc_key("000", content), None)
    assert sorted([unknown, tie_b, best, tie_a, accepted]) == [accepted, best, tie_a, tie_b, unknown]
    assert node_to_id(best) == "yyy" and key_to_id(doc_key("a\x1fb", content)) == "a\x1fb"


def test_config_validation_and_lsh_choice() -> None:
    assert DedupConfig().lsh() == (14, 9)
    assert DedupConfig(bands=16, rows=8).lsh() == (16, 8)
    with pytest.raises(ValueError):
        DedupConfig(threshold=1.0)
    with pytest.raises(ValueError):
        DedupConfig(bands=20, rows=9)
    with pytest.raises(ValueError):
        DedupConfig(write_index=True)
    with pytest.raises(ValueError):
        DedupConfig(false_positive_weight=0.5, false_negative_weight=0.9)
