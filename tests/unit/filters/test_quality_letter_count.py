"""Gopher's alphabetic-word count, done in one regex pass, counts what a per-word search counts."""

from __future__ import annotations

import random

from afm.filters.quality.rules import _HAS_LETTER, _count_with_letter


def test_one_pass_count_equals_per_word_search() -> None:
    fixed = ["1999", "__", "a1", "é", "中文", "--", "x_", "_9", "", "ß", "٣", "Ωmega"]
    assert _count_with_letter(fixed) == sum(1 for w in fixed if _HAS_LETTER.search(w))
    rng = random.Random(0)
    for _ in range(500):
        words = ["".join(rng.choice("a1_.-é中9Ω'") for _ in range(rng.randrange(1, 6)))
                 for _ in range(rng.randrange(0, 40))]
        assert _count_with_letter(words) == sum(1 for w in words if _HAS_LETTER.search(w))
