"""FP8 matmuls for the projections and the FFN (``ModelConfig.fp8``): e4m3 forward, e5m2
gradients, per-tensor current scaling.

Why: on Hopper the FP8 tensor cores double bf16's peak; OLMo-core and torchtitan reach
50-57% bf16-equivalent MFU with them where bf16 stops near 45% (issue #32).

How (the recipe of torchao's "tensorwise" float8 training and TransformerEngine's
per-tensor mode, with the scale taken from the current tensor rather than an amax
history): each operand is multiplied by ``scale = fmax(dtype) / amax(|x|)`` so its
largest magnitude lands on the format's largest finite value, cast (saturating) to FP8,
multiplied with float32 accumulation, and the product divided by both scales.
Activations and weights use e4m3 (more mantissa, range +-448); the gradient flowing back
uses e5m2 (more range, +-57344), as gradients span more decades. The backward pass
reuses the forward's FP8 operands (saved as residuals), so each tensor is quantized once.
Current scaling needs no state in the parameter tree (checkpoints and the optimizer are
unchanged); the amax is one reduction per operand, which XLA fuses with the cast.

On CPU the FP8 products run in emulation (the tests check the scaling logic); the speed
is a GPU matter (``afm bench train --suite gpu``).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

Array = jax.Array

E4M3 = jnp.float8_e4m3fn
E5M2 = jnp.float8_e5m2
_EPS = 1e-12


def scale_for(x: Array, dtype: jnp.dtype) -> Array:
    """The float32 per-tensor scale that maps ``amax(|x|)`` onto ``dtype``'s largest
    finite value (1 for an all-zero tensor)."""
    amax = jnp.max(jnp.abs(x.astype(jnp.float32)))
    fmax = jnp.asarray(jnp.finfo(dtype).max, jnp.float32)
    return jnp.where(amax > _EPS, fmax / jnp.maximum(amax, _EPS), jnp.ones((), jnp.float32))


def quantize(x: Array, dtype: jnp.dtype) -> tuple[Array, Array]:
    """``(x * scale)`` saturated and cast to ``dtype``, and the scale (``x ~= q / scale``)."""
    scale = scale_for(x, dtype)
    fmax = float(jnp.finfo(dtype).max)
    q = jnp.clip(x.astype(jnp.float32) * scale, -fmax, fmax).astype(dtype)
    return q, scale


def _contract(a: Array, b: Array, axes: tuple[list[int], list[int]]) -> Array:
    return jax.lax.dot_general(a, b, ((tuple(axes[0]), tuple(axes[1])), ((), ())),
                               preferred_element_type=jnp.float32)


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def fp8_tensordot(x: Array, w: Array, n_in: int) -> Array:
    """``jnp.tensordot(x, w, n_in)`` with FP8 operands: x's last ``n_in`` axes against w's
    first ``n_in``; the result in x's dtype."""
    out, _ = _forward(x, w, n_in)
    return out


def _forward(x: Array, w: Array, n_in: int) -> tuple[Array, tuple[Array, ...]]:
    qx, sx = quantize(x, E4M3)
    qw, sw = quantize(w, E4M3)
    xa = list(range(x.ndim - n_in, x.ndim))
    y = _contract(qx, qw, (xa, list(range(n_in)))) / (sx * sw)
    return y.astype(x.dtype), (qx, sx, qw, sw, jnp.zeros((), x.dtype), jnp.zeros((), w.dtype))


def _fwd(x: Array, w: Array, n_in: int) -> tuple[Array, tuple[Array, ...]]:
    return _forward(x, w, n_in)


def _bwd(n_in: int, res: tuple[Array, ...], g: Array) -> tuple[Array, Array]:
    qx, sx, qw, sw, x_like, w_like = res
    qg, sg = quantize(g, E5M2)
    batch = qx.ndim - n_in  # leading axes of x (and of g)
    n_out = qw.ndim - n_in
    # dx[..., in] = g[..., out] . w[in, out]^T
    dx = _contract(qg, qw, (list(range(batch, batch + n_out)), list(range(n_in, n_in + n_out)))) / (sg * sw)
    # dw[in, out] = x[..., in]^T . g[..., out]
    dw = _contract(qx, qg, (list(range(batch)), list(range(batch)))) / (sx * sg)
    return dx.astype(x_like.dtype), dw.astype(w_like.dtype)


fp8_tensordot.defvjp(_fwd, _bwd)
