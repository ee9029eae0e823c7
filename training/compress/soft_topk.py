"""Soft-Top-K masks: a differentiable choice of exactly ``k`` of ``n`` units (Lei et al., 2023).

The AFM report (§3.2.1) learns the on-device model's FFN pruning masks "using Soft-Top-K
masking [Lei et al., 2023] instead of HardConcrete masking [Louizos et al., 2018]", in a
method otherwise like Wang et al. (2020) and Sheared LLaMA (Xia et al., 2023). This module
is that operator; ``afm.training.tasks.prune`` puts it on the FFN hidden units.

Which formulation, and why
--------------------------
Lei et al. 2023 (CoDA, *Conditional Adapters*, §3) define soft top-k as the entropy
regularised linear program

    lambda*(s) = argmax_lambda  s . lambda + eps * H(lambda)
                 subject to     sum_i lambda_i = k,   0 <= lambda_i <= 1,

with ``H(lambda) = -sum_i lambda_i log lambda_i``. Its KKT conditions give
``lambda_i = exp((s_i + a + b_i) / eps)``: ``a`` is the multiplier of the budget, ``b_i <= 0``
the one of the upper bound, so at the optimum ``lambda_i = min(1, exp((s_i - tau) / eps))``,
a clipped exponential around a threshold ``tau = -a``. We implement this formulation,
because it is the one the report cites and it has the properties pruning needs:

* the budget is a constraint, not a penalty: every soft mask spends exactly ``k`` units
  of mass (HardConcrete, as in Wang et al. 2020 and Sheared LLaMA, reaches the target
  size only in expectation and needs a Lagrangian to steer it there);
* as ``eps -> 0`` the optimum tends to the hard top-k indicator, so annealing ``eps``
  (the *temperature*) hardens the mask smoothly, and the mask used at the end -- the top
  ``k`` scores, :func:`hard_top_k` -- is the limit of the one trained;
* it is deterministic (no sampled gates), so the loss at the hard mask can be checked.

The solver is ours. CoDA finds ``a`` and ``b`` by dual coordinate descent (alternating
``a <- eps (log k - logsumexp((s + b) / eps))`` and ``b <- -relu(s + a)`` from ``b = -s``,
with eps-scaling: 20 iterations from ``eps_init = 4`` decaying by 0.7), differentiating
through the unrolled iterations. That solver is kept as :func:`soft_top_k_coordinate`,
but it does not converge where annealed pruning ends, with ``eps`` small against the
spread of the scores (measured: scores of std 1, ``eps = 0.01``, 50 iterations: masks
summing to 0.73-0.83 k instead of k). :func:`soft_top_k` computes the same optimum
exactly in ``O(n log n)``: sort, and for ``m`` saturated units the threshold is
``tau_m = eps logsumexp(s_(m:) / eps) - eps log(k - m)``; the optimum uses the smallest ``m``
whose next unit lies below it. Its gradient (through ``tau`` and the unsaturated units)
is the implicit-function gradient of the program, checked against finite differences of
a float64 bisection oracle (:func:`soft_top_k_exact`). Sinkhorn optimal-transport
top-k (Xie et al., 2020) was not chosen: a different relaxation, and many more
iterations for the same budget guarantee.

Annealing across training (how ``eps`` moves from step to step) is not given by CoDA
(which keeps ``eps`` fixed per task, 0.02 to 1) nor by the AFM report:
:func:`temperature_at` is our geometric schedule from ``temperature_start`` to
``temperature_end`` over the run, and the pruning task logs how far the soft mask still
is from the hard one (``hard_gap``) and its entropy, so the end point can be checked.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array


@partial(jax.jit, static_argnums=1)
def soft_top_k(scores: Array, k: int, eps: float | Array) -> Array:
    """The exact optimum of CoDA's soft top-``k`` program over the last axis of ``scores``
    (float32 in [0, 1], summing to ``k``), differentiable in ``scores``.

    Closed form (see the module docstring): sort ``z = s / eps`` descending; with the top
    ``m`` units saturated at 1, the threshold is ``tau_m = logsumexp(z_(m:)) - log(k - m)``,
    and the optimum uses the smallest ``m`` whose next unit is not above it
    (``z_(m) <= tau_m``; ``m = k - 1`` always qualifies). Then
    ``lambda_i = exp(min(z_i - tau, 0))``. ``m`` and the saturated set are a discrete choice
    (no gradient); the gradient flows through ``tau`` and the unsaturated units, which is
    the implicit-function gradient of the program (saturated units get none directly)."""
    s = scores.astype(jnp.float32)
    n = s.shape[-1]
    if not 0 < k <= n:
        raise ValueError(f"soft_top_k: k must be in [1, {n}], got {k}")
    eps = jnp.asarray(eps, jnp.float32)
    s_fixed = jax.lax.stop_gradient(s)
    z = (s_fixed - jnp.max(s_fixed, axis=-1, keepdims=True)) / eps  # <= 0: order and the choice of m
    zs = -jnp.sort(-z, axis=-1)  # descending
    tail = jnp.flip(jax.lax.cumlogsumexp(jnp.flip(zs, -1), axis=zs.ndim - 1), -1)  # logsumexp(zs[m:])
    m = jnp.arange(k)
    ok = zs[..., :k] <= tail[..., :k] - jnp.log((k - m).astype(jnp.float32))
    chosen = jnp.argmax(ok, axis=-1)  # the smallest qualifying m (m = k - 1 always does)
    # The saturated units are the top `chosen` in a stable descending order (ties to the
    # lower index, as hard_top_k), the rest are unsaturated.
    order = jnp.argsort(-z, axis=-1, stable=True)
    rank = jnp.argsort(order, axis=-1, stable=True)
    unsat = rank >= chosen[..., None]
    # The threshold relative to the first unsaturated score (no gradient through the shift):
    # every exponent stays small, so float32 keeps its precision even for tiny eps.
    first = jnp.take_along_axis(s_fixed, jnp.take_along_axis(order, chosen[..., None], axis=-1), axis=-1)
    r = (s - first) / eps
    tau = jax.nn.logsumexp(jnp.where(unsat, r, -jnp.inf), axis=-1, keepdims=True) - jnp.log(
        (k - chosen).astype(jnp.float32)
    )[..., None]
    return jnp.where(unsat, jnp.exp(jnp.minimum(r - tau, 0.0)), 1.0)


def soft_top_k_coordinate(
    scores: Array,
    k: int,
    eps: float | Array,
    *,
    iterations: int = 20,
    eps_init: float = 4.0,
    eps_decay: float = 0.7,
) -> Array:
    """CoDA's published solver for the same program: dual coordinate descent with
    eps-scaling, ``iterations`` unrolled steps, gradients through the iterations.

    Converges well while ``eps`` is large against the spread of the scores, but not when
    the mask is nearly hard (measured: with scores of std 1, ``eps = 0.01`` and 50
    iterations the masks sum to 0.73-0.83 k), which is where annealed pruning ends; so
    training uses the exact :func:`soft_top_k`, and this one is kept as the reference
    transcription of the paper's algorithm (checked against colt5-attention's
    ``coor_descent`` in the slow tier)."""
    s = scores.astype(jnp.float32)
    n = s.shape[-1]
    if not 0 < k <= n:
        raise ValueError(f"soft_top_k: k must be in [1, {n}], got {k}")
    if iterations < 1:
        raise ValueError("soft_top_k: iterations must be >= 1")
    eps = jnp.asarray(eps, jnp.float32)
    log_k = math.log(k)
    current = jnp.maximum(jnp.asarray(eps_init, jnp.float32), eps)

    def body(_: int, carry: tuple[Array, Array, Array]) -> tuple[Array, Array, Array]:
        a, b, e = carry
        a = e * (log_k - jax.nn.logsumexp((s + b) / e, axis=-1, keepdims=True))
        b = -jax.nn.relu(s + a)
        return a, b, jnp.maximum(e * eps_decay, eps)

    a0 = jnp.zeros(s.shape[:-1] + (1,), jnp.float32)
    a, b, current = jax.lax.fori_loop(0, iterations, body, (a0, -s, current), unroll=True)
    return jnp.exp((s + a + b) / current)


@partial(jax.jit, static_argnums=1)
def hard_top_k(scores: Array, k: int) -> Array:
    """The ``eps -> 0`` limit of :func:`soft_top_k`: 1.0 on the ``k`` largest scores of the
    last axis (ties go to the lower index), 0.0 elsewhere. Exactly ``k`` ones per row."""
    n = scores.shape[-1]
    if not 0 < k <= n:
        raise ValueError(f"hard_top_k: k must be in [1, {n}], got {k}")
    _, idx = jax.lax.top_k(scores.astype(jnp.float32), k)
    return jnp.sum(jax.nn.one_hot(idx, n, dtype=jnp.float32), axis=-2)


def kept_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of the ``k`` kept units of a 1-D score vector (host side, the same
    choice as :func:`hard_top_k`: a stable sort, ties to the lower index)."""
    scores = np.asarray(scores, np.float32)
    if not 0 < k <= scores.shape[-1]:
        raise ValueError(f"kept_indices: k must be in [1, {scores.shape[-1]}], got {k}")
    order = np.argsort(-scores, kind="stable")
    return np.sort(order[:k])


def binary_entropy(mask: Array) -> Array:
    """Per-unit entropy (nats) of a soft mask read as keep-probabilities: ``log 2`` for an
    undecided unit, 0 for one at exactly 0 or 1."""
    p = jnp.clip(mask.astype(jnp.float32), 1e-12, 1.0 - 1e-7)
    q = 1.0 - p
    return -(p * jnp.log(p) + q * jnp.log(jnp.maximum(q, 1e-12)))


def temperature_at(step: Array | int, total_steps: int, start: float, end: float) -> Array:
    """Geometric annealing ``start -> end`` over ``total_steps`` (held at ``end`` after)."""
    if start <= 0 or end <= 0:
        raise ValueError(f"temperatures must be positive (start={start}, end={end})")
    frac = jnp.clip(jnp.asarray(step, jnp.float32) / max(total_steps - 1, 1), 0.0, 1.0)
    return jnp.asarray(start, jnp.float32) * (end / start) ** frac


def soft_top_k_exact(scores: np.ndarray, k: int, eps: float, *, tol: float = 1e-12) -> np.ndarray:
    """The optimum of CoDA's program by bisection on the threshold, in float64 NumPy: the
    test oracle. ``lambda_i = min(1, exp((s_i - t) / eps))`` with ``t`` such that the sum
    is ``k`` (the sum falls monotonically in ``t``)."""
    s = np.asarray(scores, np.float64)
    if not 0 < k <= s.size:
        raise ValueError(f"k must be in [1, {s.size}]")

    def total(t: float) -> float:
        return float(np.minimum(1.0, np.exp(np.minimum((s - t) / eps, 0.0))).sum())

    lo, hi = s.min() - eps * (math.log(s.size) + 50), s.max() + eps * 50
    while hi - lo > tol * max(1.0, abs(hi)):
        mid = 0.5 * (lo + hi)
        if total(mid) > k:
            lo = mid
        else:
            hi = mid
    t = 0.5 * (lo + hi)
    return np.minimum(1.0, np.exp(np.minimum((s - t) / eps, 0.0)))


__all__ = [
    "binary_entropy", "hard_top_k", "kept_indices", "soft_top_k", "soft_top_k_coordinate",
    "soft_top_k_exact", "temperature_at",
]
