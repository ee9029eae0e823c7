"""A synthetic token corpus with a known loss floor, for optimizer comparisons, LR sweeps
and tests that need a loss which falls predictably.

Documents are walks on a fixed sparse Markov chain over the vocabulary: each token has
``branch`` equally likely successors, so a model that learns the chain reaches exactly
``ln(branch)`` nats/token, starting from ``ln(vocab)``. There is no copying shortcut, so
the loss falls smoothly, which is what an LR sweep needs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from afm.training.data.shards import write_token_shard

FIRST_ID = 3  # ids below this are <pad>, <s>, </s>


def markov_token_shards(
    out: Path,
    *,
    shards: int = 1,
    docs: int = 400,
    vocab: int = 512,
    branch: int = 4,
    length: tuple[int, int] = (30, 200),
    seed: int = 0,
    sources: tuple[str, ...] = ("web",),
    row_group_size: int = 64,
) -> list[str]:
    """Write ``shards`` Parquet token shards of ``docs`` documents each; returns their paths.
    Document ``i`` gets source ``sources[i % len(sources)]``."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(FIRST_ID, vocab, (vocab, branch))
    paths = []
    for s in range(shards):
        rows = []
        for i in range(docs):
            tokens = [int(rng.integers(FIRST_ID, vocab))]
            for _ in range(int(rng.integers(*length)) - 1):
                tokens.append(int(successors[tokens[-1], rng.integers(0, branch)]))
            rows.append({"id": f"s{s}-{i}", "source": sources[i % len(sources)], "tokens": tokens})
        name = f"markov-{s}.parquet" if shards > 1 else "markov.parquet"
        paths.append(write_token_shard(rows, out / name, row_group_size=row_group_size))
    return paths
