"""The synthetic needle-in-a-haystack items: sized in model tokens, needle where asked."""

from __future__ import annotations

from afm.evaluation.niah import NEEDLE, default_lengths, grid_from_samples, make_items, niah_match
from afm.evaluation.tiny import tokenizer_dir
from afm.model.text.tokenizer import Tokenizer


def test_items_fit_their_length_and_hide_the_needle_at_the_depth() -> None:
    tok = Tokenizer.load(tokenizer_dir())
    items = make_items(tok.encode, [200, 400], [0.0, 0.5, 1.0], per_cell=2, seed=3)
    assert len(items) == 12
    for it in items:
        assert it["tokens"] <= it["length"] and it["tokens"] > it["length"] * 0.6
        needle_at = it["input"].index(NEEDLE.split("{")[0])
        haystack = it["input"][:it["input"].index("\nWhat is")]
        before, total = haystack[:needle_at].count("."), haystack.count(".") - 1  # minus the needle's
        assert total >= 4 and abs(before / total - it["depth"]) <= 0.5 / total + 1e-9
        assert it["answer"] in it["input"] and it["answer"].isdigit()
    assert items == make_items(tok.encode, [200, 400], [0.0, 0.5, 1.0], per_cell=2, seed=3)


def test_scoring_and_grid() -> None:
    assert niah_match(["1234567"], [" 1234567."]) == 1.0
    assert niah_match(["1234567"], [" 7654321"]) == 0.0
    samples = [{"doc": {"length": 100, "depth": d}, "niah_match,none": s}
               for d, s in ((0.0, 1.0), (0.0, 0.0), (1.0, 1.0))]
    assert grid_from_samples(samples) == {"lengths": [100], "depths": [0.0, 1.0], "accuracy": [[0.5, 1.0]]}
    assert default_lengths(256)[-1] == 243
