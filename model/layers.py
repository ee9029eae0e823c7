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

import math
from typing import Any

import jax
import jax.numpy as jnp
from afm.model.config import ModelConfig
from flax import nnx

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


def resolve_attention_impl(cfg: ModelConfig, *, decoding: bool) -> str:
    """Which kernel ``jax.nn.dot_product_attention`` should use for this call.

    * ``auto``: cuDNN flash attention on GPU for the full-sequence (training/prefill)
      path when the compute dtype is 16-bit and head_dim is a multiple of 8 up to 128;
      XLA everywhere else, including single-token decoding steps.
    * ``splash``: the slot for the TPU Pallas splash-attention kernel. It is not wired in
      this build (it needs a TPU to develop and test against); asking for it fails loudly
      rather than silently running something else. On TPU use ``xla`` (or ``auto``).
    """
    impl = cfg.attention_impl
    if impl == "splash":
        raise NotImplementedError(
            "attention_impl='splash' (TPU Pallas splash attention) is not wired in this "
            "build; use attention_impl='xla' or 'auto' on TPU"
        )
    if impl == "auto":
        on_gpu = jax.default_backend() == "gpu"
        ok_dtype = cfg.dtype in ("bfloat16", "float16")
        ok_head = cfg.head_dim % 8 == 0 and cfg.head_dim <= 128
        return "cudnn" if (on_gpu and ok_dtype and ok_head and not decoding) else "xla"
    return impl


def attend(
    q: Array, k: Array, v: Array, *, mask: Array | None, causal: bool, impl: str
) -> Array:
    """Scaled dot-product attention, [B, T, N, H] x [B, S, K, H] -> [B, T, N, H].

    Grouped-query attention is handled by the kernel (N a multiple of K). ``mask`` is a
    boolean [B, 1, T, S] (True = may attend); ``causal`` adds the lower-triangular mask.
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    return jax.nn.dot_product_attention(
        q, k, v, mask=mask, is_causal=causal, scale=scale, implementation=impl
    )


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
        mask: Array | None,
        causal: bool,
        kv_cache: tuple[Array, Array, Array] | None = None,
    ) -> tuple[Array, tuple[Array, Array] | None]:
        """``kv_cache`` = (k_cache, v_cache, write_index): the new keys/values are written
        at ``write_index`` and attention runs over the whole cache (``mask`` hides the
        slots a query may not see). Returns the output and the updated (k, v) cache."""
        dt = x.dtype
        q = jnp.einsum("btd,dnh->btnh", x, self.wq[...].astype(dt))
        k = jnp.einsum("btd,dkh->btkh", x, self.wk[...].astype(dt))
        v = jnp.einsum("btd,dkh->btkh", x, self.wv[...].astype(dt))
        q = apply_rope(self.q_norm(q), cos, sin)
        k = apply_rope(self.k_norm(k), cos, sin)
        new_cache = None
        if kv_cache is not None:
            k_cache, v_cache, index = kv_cache
            zero = jnp.zeros((), jnp.int32)
            k = jax.lax.dynamic_update_slice(k_cache, k.astype(k_cache.dtype), (zero, index, zero, zero))
            v = jax.lax.dynamic_update_slice(v_cache, v.astype(v_cache.dtype), (zero, index, zero, zero))
            new_cache = (k, v)
            k, v = k.astype(dt), v.astype(dt)
        impl = resolve_attention_impl(self.cfg, decoding=kv_cache is not None)
        out = attend(q, k, v, mask=mask, causal=causal, impl=impl)
        y = jnp.einsum("btnh,nhd->btd", out, self.wo[...].astype(dt))
        return y, new_cache


class SwiGLU(nnx.Module):
    """down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        d, f, pd = cfg.dim, cfg.ffn_dim, cfg.param_dtype
        self.w_gate = param(rngs, (d, f), d**-0.5, ("embed", "mlp"), pd)
        self.w_up = param(rngs, (d, f), d**-0.5, ("embed", "mlp"), pd)
        self.w_down = param(rngs, (f, d), f**-0.5, ("mlp", "embed"), pd)

    def __call__(self, x: Array) -> Array:
        dt = x.dtype
        gate = x @ self.w_gate[...].astype(dt)
        up = x @ self.w_up[...].astype(dt)
        return (jax.nn.silu(gate) * up) @ self.w_down[...].astype(dt)


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
        mask: Array | None,
        causal: bool,
        kv_cache: tuple[Array, Array, Array] | None = None,
    ) -> tuple[Array, tuple[Array, Array] | None]:
        h, new_cache = self.attn(
            self.attn_norm(x), cos, sin, mask=mask, causal=causal, kv_cache=kv_cache
        )
        x = x + h
        x = x + self.mlp(self.mlp_norm(x))
        return x, new_cache
