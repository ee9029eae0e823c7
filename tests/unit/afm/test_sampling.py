"""The one reservoir sampler: uniform, deterministic for a seed, one pass."""

from __future__ import annotations

from collections import Counter

import pytest

from afm.sampling import reservoir_sample


def test_a_short_stream_is_kept_whole_and_counted() -> None:
    assert reservoir_sample(iter("abc"), 5) == (["a", "b", "c"], 3)
    assert reservoir_sample([], 3) == ([], 0)


def test_the_same_seed_draws_the_same_items_and_input_order_is_kept_on_request() -> None:
    first, seen = reservoir_sample(range(1000), 20, seed=7)
    assert seen == 1000 and len(set(first)) == 20
    assert reservoir_sample(range(1000), 20, seed=7)[0] == first
    assert reservoir_sample(range(1000), 20, seed=8)[0] != first
    ordered, _ = reservoir_sample(range(1000), 20, seed=7, in_input_order=True)
    assert ordered == sorted(first)


def test_every_item_is_equally_likely() -> None:
    # 2,000 draws of 5 from 20: each item is expected 500 times; a biased sampler (one that
    # favours early or late items) is far outside +-20% of that.
    counts = Counter(x for seed in range(2000) for x in reservoir_sample(range(20), 5, seed=seed)[0])
    assert set(counts) == set(range(20))
    assert all(400 <= c <= 600 for c in counts.values()), counts


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="sample size"):
        reservoir_sample(range(3), -1)
