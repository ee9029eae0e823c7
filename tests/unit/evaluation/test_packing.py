"""Packing: every request exactly once, fixed shapes per bucket, no two requests overlap."""

from __future__ import annotations

import numpy as np
import pytest

from afm.evaluation.packing import (
    ScoreRequest,
    bucket_for,
    length_buckets,
    pack_requests,
    plan_rows,
    rows_per_bucket,
)


def _requests(n: int, seed: int = 0, longest: int = 300) -> list[ScoreRequest]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.integers(1, longest))
        toks = tuple(int(t) for t in rng.integers(4, 100, k))
        out.append(ScoreRequest(toks, toks[1:] + (1,), int(rng.integers(1, k + 1))))
    return out


def test_buckets_are_powers_of_two_ending_at_the_window() -> None:
    assert length_buckets(512) == (64, 128, 256, 512)
    assert length_buckets(300) == (64, 128, 256, 300)
    assert length_buckets(40) == (40,)
    assert length_buckets(512, midpoints=True) == (64, 96, 128, 192, 256, 384, 512)
    assert bucket_for(65, (64, 128)) == 128
    with pytest.raises(ValueError):
        bucket_for(129, (64, 128))


def test_every_request_placed_once_without_overlap() -> None:
    reqs = _requests(200)
    buckets = length_buckets(512)
    rows = rows_per_bucket(buckets, 2048, multiple_of=4)
    seen = []
    shapes = set()
    for batch in pack_requests(reqs, buckets, rows, min_rows=4):
        shapes.add(batch.shape)
        full = rows[batch.shape[1]]
        assert batch.shape[0] % 4 == 0 and (batch.shape[0] == full or batch.shape[0] in (4, 8, 16, 32, 64))
        occupied = np.zeros(batch.shape, bool)
        for i, row, at, n, scored in batch.placements:
            assert not occupied[row, at:at + n].any()
            occupied[row, at:at + n] = True
            assert tuple(batch.tokens[row, at:at + n]) == reqs[i].inputs
            assert tuple(batch.targets[row, at:at + n]) == reqs[i].targets
            assert list(batch.positions[row, at:at + n]) == list(range(n))
            seg = set(batch.segment_ids[row, at:at + n].tolist())
            assert len(seg) == 1 and seg != {0} and scored == reqs[i].n_scored
            seen.append(i)
        assert ((batch.segment_ids > 0) == occupied).all()
    assert sorted(seen) == list(range(len(reqs)))
    # a handful of shapes per bucket (full batches, and a power of two for the last one)
    assert len(shapes) <= 2 * len(buckets)


def test_short_requests_share_rows() -> None:
    reqs = [ScoreRequest((1, 2, 3), (2, 3, 4), 1) for _ in range(40)]
    batches = list(pack_requests(reqs, (64,), {64: 4}))
    assert len(batches) == 1 and batches[0].shape == (2, 64)
    assert batches[0].real_tokens == 120  # 40 x 3 tokens in 2 rows of 64 (21 per row)


def test_bad_requests_are_refused() -> None:
    with pytest.raises(ValueError):
        ScoreRequest((1, 2), (2,), 1)
    with pytest.raises(ValueError):
        ScoreRequest((1, 2), (2, 3), 3)


def test_trees_place_every_item_once_after_its_context() -> None:
    from afm.evaluation.packing import pack_trees

    rng = np.random.default_rng(3)
    prefixes = [tuple(rng.integers(1, 99, int(n)).tolist()) for n in rng.integers(1, 60, 30)]
    items = [(int(rng.integers(0, 30)), tuple(range(1, 1 + int(n))), tuple(range(2, 2 + int(n))))
             for n in rng.integers(1, 30, 90)]
    buckets = length_buckets(256)
    batches = list(pack_trees(prefixes, items, buckets, rows_per_bucket(buckets, 1024)))
    seen = sorted(i for b in batches for i, *_ in b.placements)
    assert seen == list(range(len(items)))
    for b in batches:
        assert b.shape[1] in buckets
        for i, row, at, n in b.placements:
            p, inp, tgt = items[i]
            assert b.tokens[row, at:at + n].tolist() == list(inp)
            assert b.targets[row, at:at + n].tolist() == list(tgt)
            branch, seg = b.branch_ids[row, at], b.segment_ids[row, at]
            assert branch > 0 and (b.branch_ids[row, at:at + n] == branch).all()
            # positions go on from the end of the context, which sits earlier in the segment
            assert b.positions[row, at:at + n].tolist() == list(range(len(prefixes[p]), len(prefixes[p]) + n))
            context = (b.segment_ids[row] == seg) & (b.branch_ids[row] == 0)
            assert b.tokens[row, context].tolist() == list(prefixes[p])
    assert len({b.shape for b in batches}) <= 2 * len(buckets)  # one program per bucket (+ a partial batch)


def test_long_rows_take_short_units_into_their_free_room() -> None:
    """A short unit rides in the room a long row leaves (free: the row's attention costs
    the same) instead of opening a row of its own; no unit sits in a row shorter than it,
    and a long unit never goes to a row beyond its own bucket."""
    sizes = {0: 300, 1: 290, 2: 100, 3: 60, 4: 40}
    plan = dict(plan_rows(sizes, (64, 128, 256, 512)))
    assert sorted(u for bins in plan.values() for b in bins for u in b) == [0, 1, 2, 3, 4]
    assert set(plan) == {512}  # 0 and 1 open the 512 rows; 100, 60 and 40 fill them
    for bucket, bins in plan.items():
        assert all(sum(sizes[u] for u in b) <= bucket for b in bins)
    assert dict(plan_rows({0: 90, 1: 30}, (64, 128, 256))) == {128: [[0, 1]]}
    assert dict(plan_rows({0: 90, 1: 60}, (64, 128, 256))) == {64: [[1]], 128: [[0]]}


def test_prompts_pack_into_the_cheapest_rows_each_once_without_overlap() -> None:
    from afm.evaluation.packing import pack_prompts

    lengths = [261, 220, 180, 150, 130, 110, 90, 65]  # GSM8K-like prompts
    rows, width, where = pack_prompts(lengths, 2, lambda r, w: r * w)
    assert rows % 2 == 0 and width % 64 == 0 and width >= max(lengths)
    assert rows * width < len(lengths) * 320  # fewer slots than left-padding to 320
    used: dict[int, list[tuple[int, int]]] = {}
    for n, (row, start) in zip(lengths, where, strict=True):
        assert 0 <= row < rows and start + n <= width
        used.setdefault(row, []).append((start, start + n))
    for spans in used.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    # attention that grows with the width keeps rows short
    rows_q, width_q, _ = pack_prompts(lengths, 2, lambda r, w: r * w * w)
    assert width_q <= width and rows_q >= rows
    with pytest.raises(ValueError, match="at least one token"):
        pack_prompts([3, 0], 1, lambda r, w: r * w)
