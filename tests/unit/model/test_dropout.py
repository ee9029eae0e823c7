"""Dropout: off without a key (evaluation, sampling), on with one, the same under scan
and remat, and rate 0 changes nothing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.model.blocks.layers import dropout
from afm.model.config import get_config
from afm.model.initializer import init_model
from afm.model.transformer import with_config


def test_inverted_dropout_keeps_the_expectation() -> None:
    x = jnp.ones((200, 500), jnp.float32)
    y = dropout(x, 0.1, jax.random.key(0))
    kept = np.asarray(y) > 0
    assert abs(kept.mean() - 0.9) < 0.01
    np.testing.assert_allclose(np.asarray(y)[kept], 1 / 0.9, rtol=1e-6)
    assert dropout(x, 0.1, None) is x and dropout(x, 0.0, jax.random.key(0)) is x


def test_model_dropout_only_with_a_key() -> None:
    cfg = get_config("tiny", dtype="float32", dropout=0.1)
    model = init_model(cfg)
    tokens = jnp.asarray(np.random.RandomState(0).randint(0, cfg.vocab_size, (2, 24)))
    plain = model(tokens)
    np.testing.assert_array_equal(plain, init_model(cfg.replace(dropout=0.0))(tokens))
    a = model(tokens, dropout_rng=jax.random.key(1))
    b = model(tokens, dropout_rng=jax.random.key(1))
    c = model(tokens, dropout_rng=jax.random.key(2))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, plain) and not np.allclose(a, c)
    off = with_config(model, dropout=0.0)
    np.testing.assert_array_equal(off(tokens, dropout_rng=jax.random.key(1)), plain)


@pytest.mark.parametrize(
    "change", [pytest.param({"scan_layers": True}, marks=pytest.mark.slow), {"remat": "full"}])
def test_same_masks_under_scan_and_remat(change: dict) -> None:
    cfg = get_config("tiny", dtype="float32", dropout=0.2)
    model = init_model(cfg)
    other = with_config(model, **change)
    tokens = jnp.arange(32, dtype=jnp.int32).reshape(2, 16)
    key = jax.random.key(3)
    np.testing.assert_allclose(model(tokens, dropout_rng=key), other(tokens, dropout_rng=key), atol=2e-5)

    def loss(m, k):
        return jnp.mean(m(tokens, dropout_rng=k) ** 2)

    from flax import nnx

    g1 = nnx.grad(loss)(model, key)
    g2 = nnx.grad(loss)(other, key)
    for x, y in zip(jax.tree.leaves(g1), jax.tree.leaves(g2)):
        np.testing.assert_allclose(x, y, atol=2e-5, rtol=1e-4)
