"""Shared fixtures: the ../shared/eval data (skipped with a message when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from afm.shared_data import find_shared_dir


@pytest.fixture(scope="session")
def shared_eval() -> Path:
    """``../shared/eval`` (real external data); tests needing it skip when it is absent."""
    shared = find_shared_dir()
    if shared is None:
        pytest.skip("../shared/eval is not present (it exists for developers and CI only)")
    return shared / "eval"


@pytest.fixture(scope="session")
def token_shards(tmp_path_factory) -> list[str]:
    """Two token shards of a toy language (Markov chain) with mixed sources."""
    from afm.training.data.synthetic import markov_token_shards

    return markov_token_shards(
        tmp_path_factory.mktemp("tokens"), shards=2, docs=120, length=(5, 120),
        sources=("web", "code", "math"), row_group_size=32,
    )


@pytest.fixture(scope="session")
def markov_token_shards(tmp_path_factory) -> list[str]:
    """One shard of longer Markov-chain documents (for LR sweeps)."""
    from afm.training.data.synthetic import markov_token_shards as make

    return make(tmp_path_factory.mktemp("markov"))


@pytest.fixture(scope="session", autouse=True)
def _jax_compilation_cache(tmp_path_factory):
    """Share compiled programs between tests (identical HLO compiles once per session)."""
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_compilation_cache_dir", str(tmp_path_factory.mktemp("jax_cache")))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


@pytest.fixture(scope="session", autouse=True)
def _sandbox_where_the_kernel_cannot_isolate():
    """On a host without namespaces (e.g. a CI runner with user namespaces disabled) the
    code-evaluation tests run with weak isolation, whose verdict rule is the same; the
    hostile-program suite, which needs the kernel boundary, skips with the reason."""
    from afm.sandbox import accept_weak_isolation, kernel_boundary

    if kernel_boundary().kind != "kernel":
        accept_weak_isolation(True)
    yield
