"""Uniform samples of a stream in one pass and bounded memory (reservoir sampling).

Tokenizer training, quality-model labelling and judge annotation each draw a sample from
a corpus that may not fit in memory; one algorithm (Vitter's Algorithm R), deterministic
for a seed, serves them all so that the same seed draws the same documents everywhere.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def reservoir_sample(items: Iterable[T], size: int, seed: int = 0, *,
                     in_input_order: bool = False) -> tuple[list[T], int]:
    """A uniform sample of ``size`` of ``items`` and how many items were seen.

    The result is in reservoir order, or in the order the items came when
    ``in_input_order`` (what a trainer reading the sample wants: stable input)."""
    if size < 0:
        raise ValueError(f"sample size must be >= 0, got {size}")
    rng = random.Random(seed)
    sample: list[tuple[int, T]] = []
    seen = 0
    for item in items:
        seen += 1
        if len(sample) < size:
            sample.append((seen, item))
        else:
            j = rng.randrange(seen)
            if j < size:
                sample[j] = (seen, item)
    if in_input_order:
        sample.sort(key=lambda pair: pair[0])
    return [item for _, item in sample], seen


__all__ = ["reservoir_sample"]
