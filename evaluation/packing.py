"""Packing scoring requests into fixed-shape rows: the reason the native backend is fast.

A log-likelihood request is a token sequence of which only the last ``n_scored`` targets
count. Padding every request to the longest one wastes most of a batch on short
multiple-choice items, and a new shape per batch recompiles. Instead, requests are
grouped by *bucket* (the smallest row length from a short, fixed list that holds them)
and packed first-fit-decreasing into rows of that length, the room left in long rows
taken by shorter requests (:func:`plan_rows`), each request its own segment
(attention never crosses segments, positions restart at 0). A batch is always
``rows_for(bucket)`` rows of ``bucket`` tokens, so there is one compiled program per
bucket, however many requests and whatever their lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np


def length_buckets(max_length: int, smallest: int = 64, *, midpoints: bool = False) -> tuple[int, ...]:
    """Row lengths: powers of two from ``smallest`` up to (and ending at) ``max_length``;
    with ``midpoints`` also 1.5x each power (96, 192, 384, ...). Scoring uses them: a
    row's attention costs its length squared, so a 300-token item in a 384 row costs 0.56x
    what it does in a 512 row, for twice the shapes to compile (once, then cached)."""
    if max_length < 2:
        raise ValueError(f"max_length must be at least 2, got {max_length}")
    buckets: list[int] = []
    size = min(smallest, max_length)
    while size < max_length:
        buckets.append(size)
        if midpoints and size * 3 // 2 < max_length and size >= 64:
            buckets.append(size * 3 // 2)
        size *= 2
    buckets.append(max_length)
    return tuple(buckets)


def bucket_for(length: int, buckets: Sequence[int]) -> int:
    for b in buckets:
        if length <= b:
            return b
    raise ValueError(f"sequence of {length} tokens exceeds the largest bucket {buckets[-1]}")


@dataclass(frozen=True)
class ScoreRequest:
    """``inputs`` are fed to the model; ``targets[t]`` is the token predicted at ``t``.

    Only the last ``n_scored`` positions count (the continuation); the others are context.
    """

    inputs: tuple[int, ...]
    targets: tuple[int, ...]
    n_scored: int

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.targets) or not self.inputs:
            raise ValueError("inputs and targets must be non-empty and of equal length")
        if not 0 < self.n_scored <= len(self.targets):
            raise ValueError(f"n_scored {self.n_scored} not in [1, {len(self.targets)}]")


@dataclass
class PackedRows:
    """The arrays ``[rows, length]`` every batch of packed rows carries (request rows and
    tree rows alike), and what the engine reads off them the same way for both: the
    shape it compiles a program for and how many slots hold real tokens (segment id > 0)."""

    tokens: np.ndarray
    targets: np.ndarray
    positions: np.ndarray
    segment_ids: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.tokens.shape  # type: ignore[return-value]

    @property
    def real_tokens(self) -> int:
        return int((self.segment_ids > 0).sum())


@dataclass
class PackedBatch(PackedRows):
    """Packed rows plus where each request sits in them.

    ``placements[i] = (request_index, row, start, length, n_scored)``; padding slots have
    segment id 0 and belong to no request.
    """

    placements: list[tuple[int, int, int, int, int]]


def _first_fit_decreasing(lengths: dict[int, int], capacity: int) -> list[list[int]]:
    """Bins (lists of request indices) of total length <= capacity; longest first."""
    order = sorted(lengths, key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    free: list[int] = []
    for i in order:
        n = lengths[i]
        for b, room in enumerate(free):
            if n <= room:
                bins[b].append(i)
                free[b] -= n
                break
        else:
            bins.append([i])
            free.append(capacity - n)
    return bins


def pack_prompts(lengths: Sequence[int], multiple_of: int, cost: Callable[[int, int], float],
                 *, granule: int = 64) -> tuple[int, int, list[tuple[int, int]]]:
    """Rows for a generation prefill holding every prompt once (first fit, longest first):
    ``(rows, width, [(row, start) per prompt])``, the cheapest by ``cost(rows, width)``
    among row counts a power of two times ``multiple_of`` (few compiled shapes) and
    widths a multiple of ``granule``. Left-padding every prompt to the longest wastes
    what packing saves: eight prompts of 65-261 tokens fill 47% of 8 rows of 320 slots and
    94% of the 2 rows of 640 the ``100m`` model's prefill cost picks."""
    if not lengths or min(lengths) <= 0:
        raise ValueError("every prompt needs at least one token")
    total, longest = sum(lengths), max(lengths)
    best: tuple[float, int, int, list[list[int]]] | None = None
    rows = multiple_of
    while True:
        width = -(-max(longest, -(-total // rows)) // granule) * granule
        bins = _first_fit_decreasing(dict(enumerate(lengths)), width)
        while len(bins) > rows:
            width += granule
            bins = _first_fit_decreasing(dict(enumerate(lengths)), width)
        if best is None or cost(rows, width) < best[0]:
            best = (cost(rows, width), rows, width, bins)
        if rows >= len(lengths):
            break
        rows *= 2
    _, rows, width, bins = best
    where: list[tuple[int, int]] = [(0, 0)] * len(lengths)
    for row, members in enumerate(bins):
        start = 0
        for i in members:
            where[i] = (row, start)
            start += lengths[i]
    return rows, width, where


def plan_rows(sizes: dict[int, int], buckets: Sequence[int]) -> list[tuple[int, list[list[int]]]]:
    """Rows ``(bucket, bins)`` holding every unit (``sizes[unit] = tokens``) once.

    Each unit opens rows only in its own bucket (the smallest that holds it), so no long
    unit sits in a row much longer than itself; longest buckets first, the room a row
    has left is then filled with shorter units (first fit, longest first): a row's
    attention costs the same however full it is, so a short unit there is free, and its
    own bucket needs fewer rows.
    """
    remaining = dict(sizes)
    plan: list[tuple[int, list[list[int]]]] = []
    for bucket in sorted({bucket_for(n, buckets) for n in sizes.values()}, reverse=True):
        own = {u: n for u, n in remaining.items() if bucket_for(n, buckets) == bucket}
        if not own:
            continue
        bins = _first_fit_decreasing(own, bucket)
        for u in own:
            del remaining[u]
        free = [bucket - sum(sizes[u] for u in b) for b in bins]
        for u in sorted(remaining, key=lambda u: (-remaining[u], u)):
            n = remaining[u]
            for j, room in enumerate(free):
                if n <= room:
                    bins[j].append(u)
                    free[j] -= n
                    del remaining[u]
                    break
        plan.append((bucket, bins))
    return sorted(plan, key=lambda p: p[0])


def pack_requests(
    requests: Sequence[ScoreRequest],
    buckets: Sequence[int],
    rows_for: dict[int, int],
    *,
    pad_id: int = 0,
    min_rows: int = 1,
) -> Iterator[PackedBatch]:
    """Every request exactly once, in batches of shape ``(rows_for[b], b)``.

    Batches come bucket by bucket (short rows first); the last batch of a bucket has the
    smallest power of two of rows (times ``min_rows``, the data-parallel width) that holds
    it, so a bucket has a handful of shapes and little padding.
    """
    for bucket, bins in plan_rows({i: len(r.inputs) for i, r in enumerate(requests)}, buckets):
        n_rows = rows_for[bucket]
        for start in range(0, len(bins), n_rows):
            part = bins[start:start + n_rows]
            rows = n_rows if len(part) == n_rows else fit_rows(len(part), n_rows, min_rows)
            yield _fill(requests, part, rows, bucket, pad_id)


def fit_rows(needed: int, full: int, multiple_of: int) -> int:
    """Rows for a batch of ``needed`` rows: ``full``, or for a last, partial batch the
    smallest power of two times ``multiple_of`` that holds it (few shapes, little padding)."""
    rows = multiple_of
    while rows < needed and rows < full:
        rows *= 2
    return min(max(rows, -(-needed // multiple_of) * multiple_of), full)


def _fill(
    requests: Sequence[ScoreRequest], bins: list[list[int]], n_rows: int, length: int, pad_id: int
) -> PackedBatch:
    tokens = np.full((n_rows, length), pad_id, np.int32)
    targets = np.zeros((n_rows, length), np.int32)
    positions = np.zeros((n_rows, length), np.int32)
    segments = np.zeros((n_rows, length), np.int32)
    placements = []
    for row, members in enumerate(bins):
        at = 0
        for seg, i in enumerate(members, start=1):
            r = requests[i]
            n = len(r.inputs)
            tokens[row, at:at + n] = r.inputs
            targets[row, at:at + n] = r.targets
            positions[row, at:at + n] = np.arange(n)
            segments[row, at:at + n] = seg
            placements.append((i, row, at, n, r.n_scored))
            at += n
    return PackedBatch(tokens, targets, positions, segments, placements)


def rows_per_bucket(buckets: Sequence[int], tokens_per_batch: int, multiple_of: int = 1) -> dict[int, int]:
    """Rows per batch for each bucket: about ``tokens_per_batch`` tokens, at least one row,
    rounded up to a multiple of the data-parallel width so every device gets whole rows."""
    out = {}
    for b in buckets:
        rows = max(1, tokens_per_batch // b)
        out[b] = -(-rows // multiple_of) * multiple_of
    return out


# ------------------------------------------------------------------ shared-context trees


@dataclass
class TreeBatch(PackedRows):
    """Rows of *trees*: a context once, then each of its continuations after it.

    A tree is one segment of a row: its context's slots carry branch 0, continuation
    ``j``'s slots branch ``j + 1`` with positions that go on from the end of the context.
    ``afm.evaluation.engine.tree_mask`` lets a token see the context and the earlier tokens of its own
    branch, so each continuation is scored exactly as if it ran alone after the context,
    while the context is computed once. Rows come in the packed-row buckets, so scoring
    multiple-choice items compiles one program per bucket, not one per (context length,
    continuation length, choice count).

    ``placements[i] = (item_index, row, start, n)``: item ``i``'s ``n`` scored slots.
    """

    branch_ids: np.ndarray
    placements: list[tuple[int, int, int, int]]


def tree_units(prefix_lengths: Sequence[int], suffix_lengths: Sequence[int], owners: Sequence[int],
               capacity: int) -> list[tuple[int, list[int]]]:
    """Trees ``(prefix index, item indices)`` of at most ``capacity`` tokens each: a
    context with too many continuations for one row is split (the context repeats).
    Each context plus any single continuation must fit (the caller checks lengths)."""
    members: dict[int, list[int]] = {}
    for i, p in enumerate(owners):
        members.setdefault(p, []).append(i)
    units: list[tuple[int, list[int]]] = []
    for p, idx in members.items():
        current: list[int] = []
        used = prefix_lengths[p]
        for i in idx:
            n = suffix_lengths[i]
            if current and used + n > capacity:
                units.append((p, current))
                current, used = [], prefix_lengths[p]
            current.append(i)
            used += n
        units.append((p, current))
    return units


def pack_trees(
    prefixes: Sequence[Sequence[int]],
    items: Sequence[tuple[int, Sequence[int], Sequence[int]]],
    buckets: Sequence[int],
    rows_for: dict[int, int],
    *,
    min_rows: int = 1,
) -> Iterator[TreeBatch]:
    """Every item (``(prefix index, suffix inputs, targets)``) exactly once, in tree-packed
    batches of shape ``(rows_for[b], b)`` (a partial last batch: :func:`fit_rows`)."""
    suffix_lengths = [len(inp) for _, inp, _ in items]
    units = tree_units([len(p) for p in prefixes], suffix_lengths, [p for p, _, _ in items], buckets[-1])
    size = {u: len(prefixes[p]) + sum(suffix_lengths[i] for i in idx) for u, (p, idx) in enumerate(units)}
    for bucket, bins in plan_rows(size, buckets):
        n_rows = rows_for[bucket]
        for start in range(0, len(bins), n_rows):
            part = bins[start:start + n_rows]
            rows = n_rows if len(part) == n_rows else fit_rows(len(part), n_rows, min_rows)
            yield _fill_trees(prefixes, items, units, part, rows, bucket)


def _fill_trees(prefixes: Sequence[Sequence[int]], items: Sequence[tuple[int, Sequence[int], Sequence[int]]],
                units: list[tuple[int, list[int]]], bins: list[list[int]], n_rows: int, length: int) -> TreeBatch:
    tokens = np.zeros((n_rows, length), np.int32)
    targets = np.zeros((n_rows, length), np.int32)
    positions = np.zeros((n_rows, length), np.int32)
    segments = np.zeros((n_rows, length), np.int32)
    branches = np.zeros((n_rows, length), np.int32)
    placements: list[tuple[int, int, int, int]] = []
    for row, members in enumerate(bins):
        at = 0
        for seg, u in enumerate(members, start=1):
            p, idx = units[u]
            pre = prefixes[p]
            n_pre = len(pre)
            tokens[row, at:at + n_pre] = pre
            positions[row, at:at + n_pre] = np.arange(n_pre)
            segments[row, at:at + n_pre] = seg
            at += n_pre
            for branch, i in enumerate(idx, start=1):
                _, inp, tgt = items[i]
                n = len(inp)
                tokens[row, at:at + n] = inp
                targets[row, at:at + n] = tgt
                positions[row, at:at + n] = n_pre + np.arange(n)
                segments[row, at:at + n] = seg
                branches[row, at:at + n] = branch
                placements.append((i, row, at, n))
                at += n
    return TreeBatch(tokens, targets, positions, segments, branches, placements)
