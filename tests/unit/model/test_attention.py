"""Attention backends against the XLA reference: outputs and gradients, packed documents,
cuDNN's packed layout, and the head-sharded (Ulysses) layout on the 8-device CPU mesh."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

from afm.model import attention
from afm.model.attention import (
    causal_attention,
    packed_layout,
    resolve_backend,
    segment_mask,
)
from afm.model.distributed.partitioning import activation_sharding

B, T, N, K, H = 2, 128, 4, 2, 16
RULES = {"batch": ("data", "fsdp"), "seq": ("sequence",), "heads": ("tensor",), "kv_heads": ("tensor",)}


def _qkv(seed: int = 0, t: int = T, dtype=jnp.float32):
    rng = np.random.default_rng(seed)
    return tuple(
        jnp.asarray(rng.standard_normal((B, t, n, H)), dtype) for n in (N, K, K)
    )


def _segments(t: int = T) -> jnp.ndarray:
    seg = np.ones((B, t), np.int32)
    seg[0, 40:] = 2
    seg[0, 90:] = 3
    seg[1, 7:] = 2
    seg[1, t - 5 :] = 0  # trailing padding, as the loader writes it
    return jnp.asarray(seg)


def _loss(fn, seg):
    w = jnp.cos(jnp.arange(H, dtype=jnp.float32))
    return lambda q, k, v: jnp.sum(fn(q, k, v, segment_ids=seg) * w)


def _reference(q, k, v, *, segment_ids):
    return causal_attention(q, k, v, segment_ids=segment_ids, backend="xla")


@pytest.mark.parametrize("packed", [False, True])
def test_splash_matches_xla_outputs_and_gradients(packed: bool) -> None:
    """TPU splash attention, run by Pallas' interpreter on CPU, equals the reference."""
    q, k, v = _qkv()
    seg = _segments() if packed else None

    def splash(q, k, v, *, segment_ids):
        return causal_attention(q, k, v, segment_ids=segment_ids, backend="splash")

    np.testing.assert_allclose(
        jax.jit(splash)(q, k, v, segment_ids=seg), _reference(q, k, v, segment_ids=seg), atol=1e-5
    )
    got = jax.jit(jax.grad(_loss(splash, seg), argnums=(0, 1, 2)))(q, k, v)
    want = jax.grad(_loss(_reference, seg), argnums=(0, 1, 2))(q, k, v)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=5e-5)


def test_plain_causal_builds_no_mask() -> None:
    """``segment_ids=None`` reaches the kernel as is_causal with no mask operand."""
    q, k, v = _qkv()
    text = str(jax.make_jaxpr(lambda q, k, v: _reference(q, k, v, segment_ids=None))(q, k, v))
    assert "bool[2,1,128,128]" not in text
    seg = _segments()
    text = str(jax.make_jaxpr(lambda q, k, v: _reference(q, k, v, segment_ids=seg))(q, k, v))
    assert "bool[2,1,128,128]" in text  # the reference builds it for packed rows


@pytest.mark.parametrize("t", [384, 512])
@pytest.mark.parametrize("packed", [False, True])
def test_block_causal_xla_equals_the_dense_kernel(t: int, packed: bool) -> None:
    """Rows of 256+ tokens run by query blocks on XLA: the same outputs and gradients as
    one dense masked call, with no full [B, 1, T, T] mask or score matrix built."""
    assert attention.causal_blocks(t) > 1 and attention.causal_blocks(128) == 1
    q, k, v = _qkv(t=t)
    seg = _segments(t) if packed else None

    def dense(q, k, v, *, segment_ids):
        slots = jnp.arange(t)
        mask = (slots[None, :] <= slots[:, None])[None, None]
        if segment_ids is not None:
            mask = segment_mask(segment_ids, segment_ids, slots, slots)
        return jax.nn.dot_product_attention(q, k, v, mask=mask, scale=H ** -0.5, implementation="xla")

    np.testing.assert_allclose(_reference(q, k, v, segment_ids=seg), dense(q, k, v, segment_ids=seg),
                               rtol=1e-5, atol=1e-5)
    g_blocks = jax.grad(_loss(_reference, seg), argnums=(0, 1, 2))(q, k, v)
    g_dense = jax.grad(_loss(dense, seg), argnums=(0, 1, 2))(q, k, v)
    for a, b in zip(g_blocks, g_dense):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    text = str(jax.make_jaxpr(lambda q, k, v: _reference(q, k, v, segment_ids=seg))(q, k, v))
    assert f"[{B},1,{t},{t}]" not in text and f"[{B},{N},{t},{t}]" not in text


def test_cudnn_packed_layout_describes_the_segment_mask() -> None:
    """Lengths/offsets handed to cuDNN's packed layout rebuild exactly the document mask."""
    seg = _segments()
    lengths, offsets = packed_layout(seg, max_segments=6)
    lengths, offsets = np.asarray(lengths), np.asarray(offsets)
    assert offsets.shape == (B, 7) and lengths.shape == (B, 6)
    np.testing.assert_array_equal(lengths[0], [40, 50, 38, -1, -1, -1])
    np.testing.assert_array_equal(offsets[0], [0, 40, 90, -1, -1, -1, -1])
    np.testing.assert_array_equal(lengths[1], [7, T - 12, 5, -1, -1, -1])
    # mask from the layout: same run and causal
    slots = np.arange(T)
    for b in range(B):
        run = np.full(T, -1)
        for m, (off, n) in enumerate(zip(offsets[b], lengths[b])):
            if n > 0:
                run[off : off + n] = m
        layout_mask = (run[:, None] == run[None, :]) & (slots[None, :] <= slots[:, None])
        want = np.asarray(segment_mask(seg, seg, jnp.arange(T), jnp.arange(T)))[b, 0]
        np.testing.assert_array_equal(layout_mask, want)


def test_backend_resolution() -> None:
    assert resolve_backend("auto", dtype="bfloat16", head_dim=128, platform="gpu") == "cudnn"
    assert resolve_backend("auto", dtype="float32", head_dim=128, platform="gpu") == "xla"
    assert resolve_backend("auto", dtype="bfloat16", head_dim=128, platform="tpu") == "splash"
    assert resolve_backend("auto", dtype="bfloat16", head_dim=128, platform="cpu") == "xla"
    assert resolve_backend("splash", dtype="bfloat16", head_dim=64, platform="cpu") == "splash"
    with pytest.raises(ValueError, match="needs a GPU"):
        resolve_backend("cudnn", dtype="bfloat16", head_dim=128, platform="cpu")
    with pytest.raises(ValueError, match="unknown"):
        resolve_backend("flash", dtype="bfloat16", head_dim=128, platform="cpu")


def test_causal_attention_flops_are_half() -> None:
    assert attention.attention_flops_per_token(8, 128, 4096) * 2 == attention.attention_flops_per_token(
        8, 128, 4096, causal=False
    )


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 (fake) devices")
@pytest.mark.parametrize(
    ("shape", "backend"),
    [((1, 1, 1, 8), "xla"), ((2, 1, 2, 2), "splash")],  # 2x1x2x2 xla: the trainer mesh test
)
def test_sequence_parallel_layout_matches_unsharded(shape, backend) -> None:
    """Sequence-sharded activations -> heads over tensor x sequence (all-to-all) -> kernel:
    same output and gradients as one device. 1x1x1x8 needs repeated KV heads (2 -> 8)."""
    n = 8 if shape[-1] == 8 else N
    rng = np.random.default_rng(1)
    q = jnp.asarray(rng.standard_normal((B, T, n, H)), jnp.float32)
    k, v = (jnp.asarray(rng.standard_normal((B, T, K, H)), jnp.float32) for _ in range(2))
    seg = _segments()
    mesh = Mesh(np.asarray(jax.devices()[:8]).reshape(shape), ("data", "fsdp", "tensor", "sequence"))

    def fn(q, k, v, *, segment_ids):
        return causal_attention(q, k, v, segment_ids=segment_ids, backend=backend)

    with activation_sharding(mesh, RULES):
        sharded = jax.jit(fn)(q, k, v, segment_ids=seg)
        grads = jax.jit(jax.grad(_loss(fn, seg), argnums=(0, 1, 2)))(q, k, v)
    np.testing.assert_allclose(sharded, _reference(q, k, v, segment_ids=seg), atol=1e-5)
    for g, w in zip(grads, jax.grad(_loss(_reference, seg), argnums=(0, 1, 2))(q, k, v)):
        np.testing.assert_allclose(g, w, atol=5e-5)


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN attention needs a GPU")
@pytest.mark.parametrize("packed", [False, True])
def test_cudnn_matches_xla_on_gpu(packed: bool) -> None:
    """On the device: cuDNN causal and packed (max_segments) vs the XLA reference, bf16."""
    q, k, v = _qkv(dtype=jnp.bfloat16)
    seg = _segments() if packed else None

    def cudnn(q, k, v, *, segment_ids):
        return causal_attention(q, k, v, segment_ids=segment_ids, backend="cudnn", max_segments=8)

    out = jax.jit(cudnn)(q, k, v, segment_ids=seg).astype(jnp.float32)
    ref = _reference(q, k, v, segment_ids=seg).astype(jnp.float32)
    np.testing.assert_allclose(out, ref, atol=2e-2)
    got = jax.grad(_loss(cudnn, seg), argnums=(0, 1, 2))(q, k, v)
    want = jax.grad(_loss(_reference, seg), argnums=(0, 1, 2))(q, k, v)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.astype(jnp.float32), w.astype(jnp.float32), atol=5e-2)
