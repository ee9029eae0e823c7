"""The one cast of stored weights to the compute dtype, rounded whatever the compiler's
settings: a model and a frozen copy of it stored in the compute dtype (DPO's and MDLOO's
reference) compute the same numbers, bit for bit."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

Array = jax.Array


def to_compute(x: Array, dtype: Any) -> Array:
    """``x`` rounded to the compute ``dtype`` so that no compiler setting can skip the
    rounding: the one cast of a stored weight (or an embedding row) to the dtype it is
    used in.

    A plain ``x.astype(bfloat16)`` followed by an op XLA runs in float32 (every bf16 dot
    on CPU, elementwise chains in a fusion) is a ``convert(convert(x))`` pair that XLA's
    ``--xla_allow_excess_precision`` (on by default) folds away, so a float32 master
    weight enters the product *unrounded*, while a copy stored in bf16 (DPO's and
    MDLOO's frozen reference, ``scan_storage``) can only enter rounded: the policy and its
    reference then disagree at step 0 (DPO log-ratios up to 1e-2 nats, MDLOO's first
    ``kl_ref`` non-zero). Rounding here is explicit: ``lax.reduce_precision`` to the
    target's mantissa when the target has the source's exponent field (float32 ->
    bfloat16: the same rounding of the same bits, denormals included, so bit-identical to
    the cast, and fused like any elementwise op); otherwise an optimisation barrier after
    the cast (float32 -> float16, whose denormals ``reduce_precision`` would flush: the
    barrier keeps the convert whole). Same dtype: ``x`` unchanged."""
    dtype = jnp.dtype(dtype)
    if x.dtype == dtype or not (jnp.issubdtype(x.dtype, jnp.floating) and jnp.issubdtype(dtype, jnp.floating)):
        return x.astype(dtype)
    src, dst = jnp.finfo(x.dtype), jnp.finfo(dtype)
    if dst.bits >= src.bits:  # widening is exact
        return x.astype(dtype)
    if dst.nexp == src.nexp:
        return jax.lax.reduce_precision(x, exponent_bits=src.nexp, mantissa_bits=dst.nmant).astype(dtype)
    return jax.lax.optimization_barrier(x.astype(dtype))


__all__ = ["to_compute"]
