"""Chunked token log-probabilities equal the full-logits computation, values and gradients,
also with the sequence split over devices; no float32 [B, T, V] buffer is ever built."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

from afm.model.distributed.partitioning import activation_sharding
from afm.model.distributed.sharding import ACTIVATION_RULES
from afm.model.inference.scoring import chunk_layout, token_logprobs
from afm.training.core.losses import cross_entropy_sums

B, T, D, V = 2, 64, 16, 96
SCALE = 1.0 / D


def _data():
    rng = np.random.default_rng(0)
    h = jnp.asarray(rng.standard_normal((B, T, D)), jnp.float32)
    table = jnp.asarray(rng.standard_normal((V, D)), jnp.float32)
    y = jnp.asarray(rng.integers(0, V, (B, T)), jnp.int32)
    w = jnp.asarray(rng.random((B, T)) > 0.2, jnp.float32)
    return h, table, y, w


def _full_loss(h, table, y, w):
    logits = jnp.einsum("btd,vd->btv", h, table) * SCALE
    lp = jax.nn.log_softmax(logits, -1)
    return -jnp.sum(jnp.take_along_axis(lp, y[..., None], -1)[..., 0] * w)


def _chunked_loss(h, table, y, w, chunk=16):
    sums = cross_entropy_sums(token_logprobs(h, table, y, logit_scale=SCALE, chunk=chunk), w)
    return sums["loss"][0]


@pytest.mark.parametrize("chunk", [16, 64, 24])  # 24 does not divide 64: chunks of 22, the last padded
def test_chunked_equals_full_values_and_gradients(chunk):
    h, table, y, w = _data()
    np.testing.assert_allclose(_chunked_loss(h, table, y, w, chunk), _full_loss(h, table, y, w), rtol=1e-5)
    got = jax.grad(_chunked_loss, argnums=(0, 1))(h, table, y, w, chunk)
    want = jax.grad(_full_loss, argnums=(0, 1))(h, table, y, w)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-6)
    scores = token_logprobs(h, table, y, logit_scale=SCALE, chunk=chunk)
    logits = jnp.einsum("btd,vd->btv", h, table) * SCALE
    np.testing.assert_array_equal(scores.correct, jnp.argmax(logits, -1) == y)


def test_no_full_float32_logits_in_the_program():
    h, table, y, w = _data()
    text = jax.jit(jax.grad(_chunked_loss, argnums=(0, 1))).lower(h, table, y, w).as_text()
    assert f"f32[{B},{T},{V}]" not in text and f"tensor<{B}x{T}x{V}xf32>" not in text
    assert f"tensor<{B}x1x16x{V}xf32>" in text  # one chunk at a time


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 (fake) devices")
def test_chunks_stay_inside_sequence_shards():
    h, table, y, w = _data()
    mesh = Mesh(np.asarray(jax.devices()[:8]).reshape(2, 1, 2, 2), ("data", "fsdp", "tensor", "sequence"))
    with activation_sharding(mesh, ACTIVATION_RULES):
        loss, grads = jax.jit(jax.value_and_grad(_chunked_loss, argnums=(0, 1)))(h, table, y, w)
    np.testing.assert_allclose(loss, _full_loss(h, table, y, w), rtol=1e-5)
    for g, r in zip(grads, jax.grad(_full_loss, argnums=(0, 1))(h, table, y, w)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-6)


def test_a_length_without_divisors_keeps_long_chunks():
    """DPO scores ``seq_len - 1`` positions: 8191 is prime, and a chunk that must divide the
    length fell to 1 (8,191 sequential readout steps). The chunks stay long, the last padded."""
    assert chunk_layout(8191, 1024) == (8, 1024)
    assert chunk_layout(2047, 1024) == (2, 1024)
    assert chunk_layout(64, 24) == (3, 22)
    assert chunk_layout(5, 1024) == (1, 5)
    t = 37  # prime: values and gradients still equal the full computation, and the scan has 3 steps
    rng = np.random.default_rng(1)
    h = jnp.asarray(rng.standard_normal((B, t, D)), jnp.float32)
    table = jnp.asarray(rng.standard_normal((V, D)), jnp.float32)
    y = jnp.asarray(rng.integers(0, V, (B, t)), jnp.int32)
    w = jnp.ones((B, t), jnp.float32)
    np.testing.assert_allclose(_chunked_loss(h, table, y, w, 16), _full_loss(h, table, y, w), rtol=1e-5)
    for g, r in zip(jax.grad(_chunked_loss, argnums=(0, 1))(h, table, y, w, 16),
                    jax.grad(_full_loss, argnums=(0, 1))(h, table, y, w)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-6)
    jaxpr = str(jax.make_jaxpr(lambda h: token_logprobs(h, table, y, logit_scale=SCALE, chunk=16).logprob)(h))
    assert "length=3" in jaxpr and "length=37" not in jaxpr
