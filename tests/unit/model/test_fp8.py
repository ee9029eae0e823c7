"""FP8 matmuls (``ModelConfig.fp8``): per-tensor current scaling, e4m3 forward, e5m2
gradients, on CPU (emulated): the scaling logic and agreement with the float product."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.model.blocks.fp8 import E4M3, E5M2, fp8_tensordot, quantize, scale_for


def _rel(a, b) -> float:
    return float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))


@pytest.mark.parametrize("dtype, fmax", [(E4M3, 448.0), (E5M2, 57344.0)])
def test_the_scale_puts_the_largest_magnitude_on_the_formats_largest_value(dtype, fmax) -> None:
    x = jnp.asarray([0.5, -3.0, 1e-3, 2.0], jnp.float32)
    assert float(scale_for(x, dtype)) == pytest.approx(fmax / 3.0)
    q, s = quantize(x, dtype)
    assert q.dtype == dtype and float(jnp.max(jnp.abs(q.astype(jnp.float32)))) == fmax
    np.testing.assert_allclose(np.asarray(q.astype(jnp.float32) / s), np.asarray(x), rtol=0.13, atol=1e-4)
    zero_q, zero_s = quantize(jnp.zeros((3,)), dtype)  # an all-zero tensor: scale 1, no NaN
    assert float(zero_s) == 1.0 and not np.isnan(np.asarray(zero_q.astype(jnp.float32))).any()


def test_scaling_keeps_tiny_and_huge_tensors_representable() -> None:
    """Without a scale, 1e-5 underflows e4m3 and 1e4 overflows it; with it both survive."""
    for magnitude in (1e-5, 1e4):
        x = magnitude * jax.random.normal(jax.random.key(0), (256,))
        q, s = quantize(x, E4M3)
        assert _rel(q.astype(jnp.float32) / s, x) < 0.05
    assert float(jnp.max(jnp.abs(jnp.asarray(1e-5 * jax.random.normal(jax.random.key(0), (256,))).astype(E4M3)
                                 .astype(jnp.float32)))) < 1e-5 * 4  # the unscaled cast loses it


@pytest.mark.parametrize("n_in", [1, 2])
def test_product_and_gradients_match_the_float_ones(n_in: int) -> None:
    k = jax.random.split(jax.random.key(1), 2)
    if n_in == 1:
        x, w = jax.random.normal(k[0], (2, 16, 64)), 0.1 * jax.random.normal(k[1], (64, 4, 16))
    else:
        x, w = jax.random.normal(k[0], (2, 16, 4, 16)), 0.1 * jax.random.normal(k[1], (4, 16, 64))
    assert _rel(fp8_tensordot(x, w, n_in), jnp.tensordot(x, w, n_in)) < 0.08

    def loss(f):
        return lambda x, w: jnp.sum(jnp.tanh(f(x, w)) ** 2)

    got = jax.grad(loss(lambda a, b: fp8_tensordot(a, b, n_in)), (0, 1))(x, w)
    want = jax.grad(loss(lambda a, b: jnp.tensordot(a, b, n_in)), (0, 1))(x, w)
    for g, r in zip(got, want):
        assert g.shape == r.shape and _rel(g, r) < 0.12


def test_forward_in_e4m3_and_gradients_in_e5m2() -> None:
    x, w = jnp.ones((2, 8, 32)), jnp.ones((32, 16))
    fwd = jax.jit(lambda x, w: fp8_tensordot(x, w, 1)).lower(x, w).as_text()
    bwd = jax.jit(jax.grad(lambda x, w: fp8_tensordot(x, w, 1).sum(), (0, 1))).lower(x, w).as_text()
    assert "f8E4M3FN" in fwd and "f8E5M2" not in fwd
    assert "f8E5M2" in bwd


def test_a_model_with_fp8_projections_trains_like_the_float_one() -> None:
    from afm.model.config import get_config
    from afm.model.inference.scoring import score
    from afm.model.initializer import init_model
    from afm.model.transformer import with_config

    model = init_model(get_config("tiny", dtype="float32"), 0)
    fp8 = with_config(model, fp8=True)
    tokens = jax.random.randint(jax.random.key(2), (2, 33), 0, 512)

    def loss(m):
        return -score(m, tokens[:, :-1], tokens[:, 1:])[0].logprob.mean()

    assert float(loss(fp8)) == pytest.approx(float(loss(model)), rel=0.02)
    from flax import nnx

    g8 = nnx.grad(loss)(fp8)
    g = nnx.grad(loss)(model)
    w8, w = g8["layers"][0]["mlp"]["w_up"][...], g["layers"][0]["mlp"]["w_up"][...]
    assert _rel(w8, w) < 0.15
