"""The building blocks of the AFM transformer: RMSNorm, RoPE, attention, SwiGLU, a block.

Conventions (shared with the Hugging Face Qwen3 layout so an export is exact):

* Parameters are stored in ``cfg.param_dtype`` (float32) and cast to ``cfg.dtype``
  (bfloat16) at use; norms, RoPE and softmax statistics are computed in float32.
* Every parameter carries LOGICAL axis names through ``nnx.with_partitioning``
  metadata (``out_sharding``): ``vocab``, ``embed``, ``q_heads``, ``kv_heads``,
  ``head_dim``, ``mlp``, ``norm``. ``afm.training`` maps them onto a device mesh with
  logical axis rules (``nnx.get_partition_spec`` + ``flax.linen.logical_to_mesh_sharding``
  and a jitted init with ``out_shardings``). Variables are created with
  ``eager_sharding=False`` so a model can be built without any mesh (CPU, tests, export).
* RoPE uses the "rotate half" pairing (dimension ``i`` with ``i + head_dim/2``), as
  Llama/Qwen checkpoints do.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from afm.model import remat
from afm.model.attention import causal_attention, masked_attention, resolve_backend
from afm.model.blocks.fp8 import fp8_tensordot
from afm.model.config import ModelConfig
from afm.model.distributed.partitioning import constrain
from afm.model.on_device.lora import LoRA
from afm.model.precision import to_compute

Array = jax.Array


def param(
    rngs: nnx.Rngs, shape: tuple[int, ...], std: float | None, axes: tuple[str, ...], dtype: Any
) -> nnx.Param:
    """A parameter drawn from N(0, std^2) (or ones when ``std`` is None) with logical axes."""
    if std is None:
        init = nnx.initializers.ones
    else:
        init = nnx.initializers.normal(stddev=std)
    init = nnx.with_partitioning(init, axes)
    value = init(rngs.params(), shape, dtype)
    # with_partitioning returns a VariableMetadata; Param unwraps it, keeping the axes.
    return nnx.Param(value, eager_sharding=False)


def project(x: Array, weight: Any, n_in: int = 1, *, fp8: bool = False) -> Array:
    """``x`` contracted with a projection weight over x's last ``n_in`` axes and the
    weight's first ``n_in`` (``btd,dnh->btnh`` for q, ``btnh,nhd->btd`` for o).

    ``weight`` is a dense ``nnx.Param``, a palettized weight (``afm.model.on_device.palettize``,
    dequantized by ``[...]``) or a LoRA-adapted one (``afm.model.on_device.lora``), which adds its
    low-rank path on the activations instead of materialising ``W + s A B``. ``fp8``
    runs the product with FP8 operands (``afm.model.blocks.fp8``; ``ModelConfig.fp8``).
    """
    if isinstance(weight, LoRA):
        return weight(x)
    if fp8:
        return fp8_tensordot(x, to_compute(weight[...], x.dtype), n_in)
    return jnp.tensordot(x, to_compute(weight[...], x.dtype), axes=n_in)


def rms_norm(x: Array, scale: Array, eps: float) -> Array:
    """x / rms(x) * scale over the last axis, computed in float32, returned in x's dtype."""
    xf = x.astype(jnp.float32)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (y * scale.astype(jnp.float32)).astype(x.dtype)


class RMSNorm(nnx.Module):
    def __init__(self, size: int, eps: float, *, param_dtype: Any, rngs: nnx.Rngs):
        self.eps = eps
        self.scale = param(rngs, (size,), None, ("norm",), param_dtype)

    def __call__(self, x: Array) -> Array:
        return rms_norm(x, self.scale[...], self.eps)


def rope_tables(positions: Array, head_dim: int, base: float) -> tuple[Array, Array]:
    """cos/sin tables, float32 [B, T, head_dim], for integer ``positions`` [B, T]."""
    inv_freq = 1.0 / (base ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    angles = positions.astype(jnp.float32)[..., None] * inv_freq  # [B, T, head_dim/2]
    angles = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles), jnp.sin(angles)


def apply_rope(x: Array, cos: Array, sin: Array) -> Array:
    """Rotate ``x`` [B, T, N, H] by the position tables [B, T, H] (rotate-half pairing)."""
    xf = x.astype(jnp.float32)
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
    out = xf * cos[:, :, None, :] + rotated * sin[:, :, None, :]
    return out.astype(x.dtype)


def resolve_attention_impl(cfg: ModelConfig, *, decoding: bool = False) -> str:
    """The attention kernel this config runs on this platform (``afm.model.attention``).

    Decoding steps with a KV cache always use XLA with an explicit mask (one query token
    against a partly filled cache is not what the fused kernels are for)."""
    if decoding:
        return "xla"
    return resolve_backend(cfg.attention_impl, dtype=cfg.dtype, head_dim=cfg.head_dim)


class Attention(nnx.Module):
    """GQA self-attention with per-head RMSNorm on q and k before RoPE (report §2)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        d, n, k, h, pd = cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.param_dtype
        self.wq = param(rngs, (d, n, h), d**-0.5, ("embed", "q_heads", "head_dim"), pd)
        self.wk = param(rngs, (d, k, h), d**-0.5, ("embed", "kv_heads", "head_dim"), pd)
        self.wv = param(rngs, (d, k, h), d**-0.5, ("embed", "kv_heads", "head_dim"), pd)
        self.wo = param(rngs, (n, h, d), (n * h) ** -0.5, ("q_heads", "head_dim", "embed"), pd)
        self.q_norm = RMSNorm(h, cfg.norm_eps, param_dtype=pd, rngs=rngs)
        self.k_norm = RMSNorm(h, cfg.norm_eps, param_dtype=pd, rngs=rngs)

    def __call__(
        self,
        x: Array,
        cos: Array,
        sin: Array,
        *,
        segment_ids: Array | None = None,
        mask: Array | None = None,
        kv_cache: tuple[Array, ...] | None = None,
    ) -> tuple[Array, tuple[Array, Array] | None]:
        """Full sequence (no ``kv_cache``, no ``mask``): causal attention, kept inside
        documents when ``segment_ids`` are given, on the configured kernel. With
        ``kv_cache`` = (k_cache, v_cache, write_index) the new keys/values are written at
        ``write_index`` and attention runs over the whole cache with ``mask`` (boolean
        [B, 1, T, S]) hiding the slots a query may not see. Returns the output and the
        updated (k, v) cache. ``kv_cache`` = (k_all, v_all, write_index, layer) passes
        every layer's cache stacked ([L, B, S, K, H]): the new keys/values are written
        into it in place and the updated stacks returned, instead of a layer's slice
        being copied out and back for every decoded token."""
        dt = x.dtype
        heads = ("batch", "seq", "heads", None)
        kv_heads = ("batch", "seq", "kv_heads", None)
        q = project(x, self.wq, fp8=self.cfg.fp8)  # btd,dnh->btnh
        k = project(x, self.wk, fp8=self.cfg.fp8)  # btd,dkh->btkh
        v = project(x, self.wv, fp8=self.cfg.fp8)
        q = remat.tag(constrain(apply_rope(self.q_norm(q), cos, sin), heads), "query")
        k = remat.tag(constrain(apply_rope(self.k_norm(k), cos, sin), kv_heads), "key")
        v = remat.tag(constrain(v, kv_heads), "value")
        new_cache = None
        if kv_cache is not None and len(kv_cache) == 4:  # the stacked cache of every layer
            k_all, v_all, index, layer = kv_cache
            zero = jnp.zeros((), jnp.int32)
            at = (jnp.asarray(layer, jnp.int32), zero, index, zero, zero)
            k_all = jax.lax.dynamic_update_slice(k_all, k[None].astype(k_all.dtype), at)
            v_all = jax.lax.dynamic_update_slice(v_all, v[None].astype(v_all.dtype), at)
            new_cache = (k_all, v_all)
            k, v = k_all[layer].astype(dt), v_all[layer].astype(dt)
        elif kv_cache is not None:
            k_cache, v_cache, index = kv_cache
            zero = jnp.zeros((), jnp.int32)
            k = jax.lax.dynamic_update_slice(k_cache, k.astype(k_cache.dtype), (zero, index, zero, zero))
            v = jax.lax.dynamic_update_slice(v_cache, v.astype(v_cache.dtype), (zero, index, zero, zero))
            new_cache = (k, v)
            k, v = k.astype(dt), v.astype(dt)
        if mask is not None:  # decoding over a cache (or an explicit mask): XLA reference
            out = masked_attention(q, k, v, mask)
        else:
            out = causal_attention(
                q, k, v, segment_ids=segment_ids,
                backend=resolve_attention_impl(self.cfg), max_segments=self.cfg.max_segments,
            )
        out = remat.tag(constrain(out, heads), "attn_context")
        y = project(out, self.wo, 2, fp8=self.cfg.fp8)  # btnh,nhd->btd
        return remat.tag(constrain(y, ("batch", "seq", "embed")), "attn_out"), new_cache


class SwiGLU(nnx.Module):
    """down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        d, f, pd = cfg.dim, cfg.ffn_dim, cfg.param_dtype
        self.fp8 = cfg.fp8
        self.w_gate = param(rngs, (d, f), d**-0.5, ("embed", "mlp"), pd)
        self.w_up = param(rngs, (d, f), d**-0.5, ("embed", "mlp"), pd)
        self.w_down = param(rngs, (f, d), f**-0.5, ("mlp", "embed"), pd)

    def __call__(self, x: Array) -> Array:
        mlp = ("batch", "seq", "mlp")
        gate = remat.tag(constrain(project(x, self.w_gate, fp8=self.fp8), mlp), "mlp_gate")
        up = remat.tag(constrain(project(x, self.w_up, fp8=self.fp8), mlp), "mlp_up")
        out = project(jax.nn.silu(gate) * up, self.w_down, fp8=self.fp8)
        return remat.tag(constrain(out, ("batch", "seq", "embed")), "mlp_out")


def dropout(x: Array, rate: float, key: Array | None) -> Array:
    """Inverted dropout: zero each element with probability ``rate`` and scale the rest by
    ``1 / (1 - rate)``; the identity when ``key`` is None (evaluation) or ``rate`` is 0.
    The key is explicit (not an ``nnx.Rngs`` stream) so training stays a pure function of
    (params, batch, step rng) and a remat recomputation draws the same mask."""
    if key is None or rate <= 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x)).astype(x.dtype)


class Block(nnx.Module):
    """Pre-norm residual block: x + attn(norm(x)), then + mlp(norm(.))."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        pd = cfg.param_dtype
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps, param_dtype=pd, rngs=rngs)
        self.attn = Attention(cfg, rngs=rngs)
        self.mlp_norm = RMSNorm(cfg.dim, cfg.norm_eps, param_dtype=pd, rngs=rngs)
        self.mlp = SwiGLU(cfg, rngs=rngs)

    def __call__(
        self,
        x: Array,
        cos: Array,
        sin: Array,
        *,
        segment_ids: Array | None = None,
        mask: Array | None = None,
        kv_cache: tuple[Array, ...] | None = None,
        dropout_rate: float = 0.0,
        dropout_key: Array | None = None,
    ) -> tuple[Array, tuple[Array, Array] | None]:
        """``dropout_key`` (training only) drops each sublayer's output before its add."""
        keys = (None, None) if dropout_key is None else jax.random.split(dropout_key)
        h, new_cache = self.attn(
            self.attn_norm(x), cos, sin, segment_ids=segment_ids, mask=mask, kv_cache=kv_cache
        )
        x = x + dropout(h, dropout_rate, keys[0])
        x = x + dropout(self.mlp(self.mlp_norm(x)), dropout_rate, keys[1])
        return constrain(x, ("batch", "seq", "embed")), new_cache
