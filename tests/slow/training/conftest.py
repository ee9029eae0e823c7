"""Token shards for the training tests: a small learnable toy language (Markov chain)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from afm.training.data import write_token_shard


def make_shards(out: Path, *, docs: int = 120, vocab: int = 512, seed: int = 0, branch: int = 4) -> list[str]:
    """Two shards of documents from a fixed sparse Markov chain (each token has
    ``branch`` possible successors), so a model's loss falls steadily from ln(vocab)."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(3, vocab, (vocab, branch))
    paths = []
    for s in range(2):
        rows = []
        for i in range(docs):
            tokens = [int(rng.integers(3, vocab))]
            for _ in range(int(rng.integers(5, 120)) - 1):
                tokens.append(int(successors[tokens[-1], rng.integers(0, branch)]))
            rows.append({"id": f"s{s}-{i}", "source": ("web", "code", "math")[i % 3], "tokens": tokens})
        paths.append(write_token_shard(rows, out / f"tokens-{s}.parquet", row_group_size=32))
    return paths


@pytest.fixture(scope="session")
def token_shards(tmp_path_factory) -> list[str]:
    return make_shards(tmp_path_factory.mktemp("tokens"))


@pytest.fixture(scope="session", autouse=True)
def _jax_compilation_cache(tmp_path_factory):
    """Share compiled steps between the tests' runs (identical HLO compiles once)."""
    import jax

    jax.config.update("jax_compilation_cache_dir", str(tmp_path_factory.mktemp("jax_cache")))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def markov_shards(out: Path, *, vocab: int = 512, docs: int = 400, seed: int = 0, branch: int = 4) -> list[str]:
    """Documents from a fixed sparse Markov chain: loss falls smoothly from ln(V) to
    ln(branch), with no sudden in-context-copying phase (good for LR sweeps)."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(3, vocab, (vocab, branch))
    rows = []
    for i in range(docs):
        tokens = [int(rng.integers(3, vocab))]
        for _ in range(int(rng.integers(30, 200)) - 1):
            tokens.append(int(successors[tokens[-1], rng.integers(0, branch)]))
        rows.append({"id": f"m{i}", "source": "web", "tokens": tokens})
    return [write_token_shard(rows, out / "markov.parquet", row_group_size=64)]


@pytest.fixture(scope="session")
def markov_token_shards(tmp_path_factory) -> list[str]:
    return markov_shards(tmp_path_factory.mktemp("markov"))
