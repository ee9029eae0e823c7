"""The AFM optimizer (SPEC 3.1) and the AdamW baseline of the report's Appendix A.

``afm_rmsprop`` is RMSProp with momentum *on the normalised update*, as Apple's AXLearn
``adastar`` is configured for AFM:

1. clip the global gradient norm to ``global_clip_norm``;
2. ``v = b2 * v + (1 - b2) * (g**2 + eps_square)``, bias-corrected: ``v_hat = v / (1 - b2**t)``;
3. ``u = g / sqrt(v_hat)``;
4. per tensor, scale ``u`` down so its RMS is at most ``update_clip_rms``;
5. ``m = b1 * m + (1 - b1) * u`` (no bias correction; ``m`` is the net update);
6. ``delta = -schedule(step) * (lr * multiplier * m + weight_decay * param)``.

Weight decay is decoupled and *not* multiplied by the learning rate, only by the schedule
("scheduled decay is applied to form the final weight delta"). Both optimizers return an
``optax.GradientTransformation`` whose updates are added with ``optax.apply_updates``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from afm.training.schedules import Schedule

PyTree = Any
Multipliers = PyTree | Callable[[PyTree], PyTree] | None


@dataclass
class OptimizerConfig:
    """Which optimizer and its hyper-parameters (SPEC 3 table / Appendix A)."""

    name: str = "afm_rmsprop"  # afm_rmsprop | adamw (Appendix A baseline)
    learning_rate: float = 0.01  # peak LR at base width (muParam scales hidden layers)
    weight_decay: float = 3.16e-4
    b1: float = 0.95
    b2: float = 0.95
    eps_square: float = 1e-30  # afm_rmsprop: added to g**2 before smoothing
    eps: float = 1e-15  # adamw only
    update_clip_rms: float = 1.0
    global_clip_norm: float = 1.0
    muparam: bool = True  # per-tensor LR multipliers from the model's base_width / width


class AfmRmspropState(NamedTuple):
    count: jnp.ndarray  # int32, number of updates applied so far
    v: PyTree  # EMA of g**2 + eps_square (float32)
    m: PyTree  # EMA of the clipped normalised update (float32)


def _resolve_multipliers(lr_multipliers: Multipliers, params: PyTree) -> PyTree:
    if lr_multipliers is None:
        return jax.tree.map(lambda _: 1.0, params)
    if callable(lr_multipliers):
        return lr_multipliers(params)
    return lr_multipliers


def global_norm(tree: PyTree) -> jnp.ndarray:
    leaves = jax.tree.leaves(tree)
    return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in leaves))


def clip_global_norm(grads: PyTree, max_norm: float) -> PyTree:
    """``g * min(1, max_norm / ||g||)`` over the whole tree."""
    norm = global_norm(grads)
    scale = jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-30))
    return jax.tree.map(lambda g: (g.astype(jnp.float32) * scale), grads)


def clip_block_rms(u: jnp.ndarray, threshold: float) -> jnp.ndarray:
    """Scale one tensor so that ``sqrt(mean(u**2)) <= threshold`` (AXLearn clip_by_block_rms)."""
    rms = jnp.sqrt(jnp.mean(jnp.square(u)))
    return u / jnp.maximum(1.0, rms / threshold)


def _scheduled_decoupled_delta(
    net_update: PyTree,
    params: PyTree,
    multipliers: PyTree,
    step_factor: jnp.ndarray,
    learning_rate: float,
    weight_decay: float,
) -> PyTree:
    return jax.tree.map(
        lambda m, p, k: -step_factor * (learning_rate * k * m + weight_decay * p.astype(jnp.float32)),
        net_update,
        params,
        multipliers,
    )


def afm_rmsprop(
    learning_rate: float,
    schedule: Schedule,
    *,
    weight_decay: float,
    b1: float = 0.95,
    b2: float = 0.95,
    eps_square: float = 1e-30,
    update_clip_rms: float = 1.0,
    global_clip_norm: float = 1.0,
    lr_multipliers: Multipliers = None,
) -> optax.GradientTransformation:
    """RMSProp with momentum on the clipped normalised update, exactly per SPEC 3.1.

    ``schedule(step)`` is a factor (usually in [0, 1]) multiplying both the LR term and
    the decoupled weight decay; ``lr_multipliers`` is a pytree like ``params`` (or a
    function of ``params`` returning one) of per-tensor LR factors (muParam).
    """

    def init(params: PyTree) -> AfmRmspropState:
        zeros = lambda p: jnp.zeros(p.shape, jnp.float32)  # noqa: E731
        return AfmRmspropState(
            count=jnp.zeros([], jnp.int32),
            v=jax.tree.map(zeros, params),
            m=jax.tree.map(zeros, params),
        )

    def update(grads: PyTree, state: AfmRmspropState, params: PyTree | None = None):
        if params is None:
            raise ValueError("afm_rmsprop needs params (decoupled weight decay)")
        g = clip_global_norm(grads, global_clip_norm)
        t = state.count + 1
        v = jax.tree.map(lambda v, g: b2 * v + (1.0 - b2) * (g * g + eps_square), state.v, g)
        debias = 1.0 - jnp.power(jnp.float32(b2), t.astype(jnp.float32))
        u = jax.tree.map(lambda g, v: g / jnp.sqrt(v / debias), g, v)
        u = jax.tree.map(lambda x: clip_block_rms(x, update_clip_rms), u)
        m = jax.tree.map(lambda m, u: b1 * m + (1.0 - b1) * u, state.m, u)
        multipliers = _resolve_multipliers(lr_multipliers, params)
        delta = _scheduled_decoupled_delta(
            m, params, multipliers, schedule(state.count), learning_rate, weight_decay
        )
        return delta, AfmRmspropState(count=t, v=v, m=m)

    return optax.GradientTransformation(init, update)


class AdamWState(NamedTuple):
    count: jnp.ndarray
    mu: PyTree
    nu: PyTree


def adamw_baseline(
    learning_rate: float,
    schedule: Schedule,
    *,
    weight_decay: float = 1e-4,
    b1: float = 0.9,
    b2: float = 0.95,
    eps: float = 1e-15,
    global_clip_norm: float = 1.0,
    lr_multipliers: Multipliers = None,
) -> optax.GradientTransformation:
    """Appendix A's baseline: global-norm clip, then AdamW (bias-corrected moments).

    Decay and schedule are applied exactly as in ``afm_rmsprop`` (decoupled, scheduled),
    so the comparison isolates the update rule.
    """

    def init(params: PyTree) -> AdamWState:
        zeros = lambda p: jnp.zeros(p.shape, jnp.float32)  # noqa: E731
        return AdamWState(jnp.zeros([], jnp.int32), jax.tree.map(zeros, params), jax.tree.map(zeros, params))

    def update(grads: PyTree, state: AdamWState, params: PyTree | None = None):
        if params is None:
            raise ValueError("adamw_baseline needs params (decoupled weight decay)")
        g = clip_global_norm(grads, global_clip_norm)
        t = state.count + 1
        tf = t.astype(jnp.float32)
        mu = jax.tree.map(lambda m, g: b1 * m + (1.0 - b1) * g, state.mu, g)
        nu = jax.tree.map(lambda v, g: b2 * v + (1.0 - b2) * g * g, state.nu, g)
        c1 = 1.0 - jnp.power(jnp.float32(b1), tf)
        c2 = 1.0 - jnp.power(jnp.float32(b2), tf)
        adam = jax.tree.map(lambda m, v: (m / c1) / (jnp.sqrt(v / c2) + eps), mu, nu)
        multipliers = _resolve_multipliers(lr_multipliers, params)
        delta = _scheduled_decoupled_delta(
            adam, params, multipliers, schedule(state.count), learning_rate, weight_decay
        )
        return delta, AdamWState(t, mu, nu)

    return optax.GradientTransformation(init, update)


def build_optimizer(
    cfg: OptimizerConfig, schedule: Schedule, lr_multipliers: Multipliers = None
) -> optax.GradientTransformation:
    """The optimizer named by ``cfg.name`` (the config switch between AFM and AdamW)."""
    if cfg.name == "afm_rmsprop":
        return afm_rmsprop(
            cfg.learning_rate,
            schedule,
            weight_decay=cfg.weight_decay,
            b1=cfg.b1,
            b2=cfg.b2,
            eps_square=cfg.eps_square,
            update_clip_rms=cfg.update_clip_rms,
            global_clip_norm=cfg.global_clip_norm,
            lr_multipliers=lr_multipliers,
        )
    if cfg.name == "adamw":
        return adamw_baseline(
            cfg.learning_rate,
            schedule,
            weight_decay=cfg.weight_decay,
            b1=cfg.b1,
            b2=cfg.b2,
            eps=cfg.eps,
            global_clip_norm=cfg.global_clip_norm,
            lr_multipliers=lr_multipliers,
        )
    raise ValueError(f"unknown optimizer {cfg.name!r} (afm_rmsprop | adamw)")


def adamw_appendix_a(cfg: OptimizerConfig) -> OptimizerConfig:
    """``cfg`` switched to Appendix A's AdamW: betas (0.9, 0.95), eps 1e-15, wd 1e-4."""
    from dataclasses import replace

    return replace(cfg, name="adamw", b1=0.9, b2=0.95, eps=1e-15, weight_decay=1e-4)
