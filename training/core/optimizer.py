"""The AFM optimizer (SPEC 3.1) and Appendix A's AdamW, composed from small transforms.

Like AXLearn's learner, an optimizer is a chain of single-purpose gradient
transformations, each an ``optax.GradientTransformation`` with its own state:

====================================  =========================================================
transform                             one job
====================================  =========================================================
``clip_by_global_norm(c)``            ``g * min(1, c / ||g||)`` over the whole tree
``scale_by_rms_ema(b2, eps_square)``  ``v = b2 v + (1 - b2)(g^2 + eps^2)``; ``g / sqrt(v / (1 - b2^t))``
``clip_by_block_rms(r)``              per tensor, scale down to RMS <= ``r``
``momentum(b1)``                      ``m = b1 m + (1 - b1) u`` (no bias correction)
``scale_by_multipliers(lr, k)``       ``lr x k`` per tensor (muParam)
``add_decoupled_weight_decay(wd)``    ``+ wd x param`` (not multiplied by the LR)
``scale_by_schedule(s)``              ``x -s(t)`` (the schedule multiplies LR *and* decay)
``skip_on_spikes(inner, cfg)``        AXLearn's ``skip_and_clip_by_global_norm``: no update and
                                      no state change when the gradient is non-finite or its
                                      norm spikes (EMA mean + k stddev, or a fixed norm)
====================================  =========================================================

so the two optimizers read as their definitions::

    afm_rmsprop = chain(clip_by_global_norm(1), scale_by_rms_ema(0.95, 1e-30),
                        clip_by_block_rms(1), momentum(0.95), scale_by_multipliers(lr, k),
                        add_decoupled_weight_decay(wd), scale_by_schedule(schedule))
    adamw       = chain(clip_by_global_norm(1), optax.scale_by_adam(0.9, 0.95, 1e-15), <same tail>)

The result is ``delta = -schedule(step) * (lr * k * m + wd * p)``, exactly SPEC 3.1
(checked against a float64 NumPy transcription in the tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afm.config import check_choice, check_number
from afm.training.core.schedules import Schedule

PyTree = Any
Multipliers = PyTree | Callable[[PyTree], PyTree] | None


@dataclass
class SkipConfig:
    """Skip a step (no parameter or optimizer-state change) on a bad gradient.

    Non-finite gradients are always skipped when ``enabled``. A finite gradient is skipped
    when its global norm is ``>= drop_norm`` (0: off) or, after ``min_count`` good steps,
    above ``EMA mean + drop_stddev x EMA stddev`` of past norms (0: off). AXLearn's
    ``drop_norm_by_grad_norm_stddev`` defaults (k = 20 after 500 steps, decay 0.99).
    """

    enabled: bool = True
    drop_norm: float = 0.0
    drop_stddev: float = 20.0
    min_count: int = 500
    ema_decay: float = 0.99
    max_consecutive: int = 20  # more skips in a row than this stops the run as diverged

    def __post_init__(self) -> None:
        check_number("optimizer.skip.drop_norm", self.drop_norm, low=0)
        check_number("optimizer.skip.drop_stddev", self.drop_stddev, low=0)
        check_number("optimizer.skip.min_count", self.min_count, low=0, integer=True)
        check_number("optimizer.skip.ema_decay", self.ema_decay, low=0, high=1, high_open=True)
        check_number("optimizer.skip.max_consecutive", self.max_consecutive, low=1, integer=True)


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
    skip: SkipConfig = field(default_factory=SkipConfig)

    def __post_init__(self) -> None:
        """Ranges a training run can mean: a negative learning rate trains uphill, nan or
        inf trains nothing; betas are decay factors; clips and epsilons must be positive."""
        check_choice("optimizer.name", self.name, ("afm_rmsprop", "adamw"))
        check_number("optimizer.learning_rate", self.learning_rate, low=0, low_open=True)
        check_number("optimizer.weight_decay", self.weight_decay, low=0)
        for name in ("b1", "b2"):
            check_number(f"optimizer.{name}", getattr(self, name), low=0, high=1, high_open=True)
        for name in ("eps_square", "eps", "update_clip_rms", "global_clip_norm"):
            check_number(f"optimizer.{name}", getattr(self, name), low=0, low_open=True)


def global_norm(tree: PyTree) -> jnp.ndarray:
    leaves = jax.tree.leaves(tree)
    return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in leaves))


def _stateless(fn: Callable[[PyTree, PyTree | None], PyTree]) -> optax.GradientTransformation:
    return optax.GradientTransformation(
        lambda params: optax.EmptyState(), lambda u, state, params=None: (fn(u, params), state)
    )


# -- the transforms ----------------------------------------------------------------------
def clip_by_global_norm(max_norm: float) -> optax.GradientTransformation:
    """``g * min(1, max_norm / ||g||)`` over the whole tree, in float32."""

    def fn(g: PyTree, _: PyTree | None) -> PyTree:
        scale = jnp.minimum(1.0, max_norm / jnp.maximum(global_norm(g), 1e-30))
        return jax.tree.map(lambda x: x.astype(jnp.float32) * scale, g)

    return _stateless(fn)


class RmsEmaState(NamedTuple):
    count: jnp.ndarray  # int32 updates so far
    v: PyTree  # EMA of g**2 + eps_square (float32)


def scale_by_rms_ema(b2: float, eps_square: float) -> optax.GradientTransformation:
    """``g / sqrt(v_hat)`` with ``v = EMA_b2(g^2 + eps_square)``, bias-corrected.

    The epsilon sits inside the EMA (SPEC 3.1), unlike ``optax.scale_by_rms``."""

    def init(params: PyTree) -> RmsEmaState:
        return RmsEmaState(jnp.zeros([], jnp.int32), jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params))

    def update(g: PyTree, state: RmsEmaState, params: PyTree | None = None):
        t = state.count + 1
        v = jax.tree.map(lambda v, g: b2 * v + (1.0 - b2) * (g * g + eps_square), state.v, g)
        debias = 1.0 - jnp.power(jnp.float32(b2), t.astype(jnp.float32))
        return jax.tree.map(lambda g, v: g / jnp.sqrt(v / debias), g, v), RmsEmaState(t, v)

    return optax.GradientTransformation(init, update)


def clip_by_block_rms(threshold: float) -> optax.GradientTransformation:
    """Scale each tensor so that ``sqrt(mean(u**2)) <= threshold`` (AXLearn clip_by_block_rms)."""

    def clip(u: jnp.ndarray) -> jnp.ndarray:
        return u / jnp.maximum(1.0, jnp.sqrt(jnp.mean(jnp.square(u))) / threshold)

    return _stateless(lambda u, _: jax.tree.map(clip, u))


def momentum(b1: float) -> optax.GradientTransformation:
    """``m = b1 m + (1 - b1) u``, no bias correction (the AFM update's momentum)."""
    return optax.ema(b1, debias=False)


def _resolve_multipliers(lr_multipliers: Multipliers, params: PyTree) -> PyTree:
    if lr_multipliers is None:
        return jax.tree.map(lambda _: 1.0, params)
    if callable(lr_multipliers):
        return lr_multipliers(params)
    return lr_multipliers


def scale_by_multipliers(learning_rate: float, lr_multipliers: Multipliers = None) -> optax.GradientTransformation:
    """``u * learning_rate * k`` with ``k`` the tensor's muParam multiplier."""

    def fn(u: PyTree, params: PyTree | None) -> PyTree:
        ks = _resolve_multipliers(lr_multipliers, u if params is None else params)
        return jax.tree.map(lambda m, k: (learning_rate * k) * m, u, ks)

    return _stateless(fn)


def add_decoupled_weight_decay(weight_decay: float) -> optax.GradientTransformation:
    """``u + weight_decay * param``: decoupled, and (placed before the schedule) scheduled."""

    def fn(u: PyTree, params: PyTree | None) -> PyTree:
        if params is None:
            raise ValueError("decoupled weight decay needs the parameters")
        return jax.tree.map(lambda m, p: m + weight_decay * p.astype(jnp.float32), u, params)

    return _stateless(fn)


class ScheduleState(NamedTuple):
    count: jnp.ndarray  # int32: updates applied so far (skipped steps do not count)


def scale_by_schedule(schedule: Schedule) -> optax.GradientTransformation:
    """``u * -schedule(count)``: the descent sign and the schedule factor, last in the chain."""

    def init(params: PyTree) -> ScheduleState:
        return ScheduleState(jnp.zeros([], jnp.int32))

    def update(u: PyTree, state: ScheduleState, params: PyTree | None = None):
        factor = schedule(state.count)
        return jax.tree.map(lambda x: -factor * x, u), ScheduleState(state.count + 1)

    return optax.GradientTransformation(init, update)


class SkipState(NamedTuple):
    good_steps: jnp.ndarray  # int32: updates applied
    skipped: jnp.ndarray  # int32: updates skipped, in total
    norm_ema: jnp.ndarray  # EMA of the global gradient norm (not bias-corrected)
    norm_sq_ema: jnp.ndarray  # EMA of its square
    inner: PyTree


def skip_on_spikes(inner: optax.GradientTransformation, cfg: SkipConfig) -> optax.GradientTransformation:
    """Apply ``inner`` only when the gradient is finite and its norm is not a spike;
    otherwise return zero updates and leave every state untouched (AXLearn semantics)."""

    def init(params: PyTree) -> SkipState:
        zero_i, zero_f = jnp.zeros([], jnp.int32), jnp.zeros([], jnp.float32)
        return SkipState(zero_i, zero_i, zero_f, zero_f, inner.init(params))

    def update(g: PyTree, state: SkipState, params: PyTree | None = None):
        norm = global_norm(g)
        ok = jnp.isfinite(norm)
        if cfg.drop_norm > 0:
            ok &= norm < cfg.drop_norm
        if cfg.drop_stddev > 0:
            n = state.good_steps.astype(jnp.float32)
            debias = jnp.maximum(1.0 - cfg.ema_decay**n, 1e-12)
            mean = state.norm_ema / debias
            std = jnp.sqrt(jnp.maximum(state.norm_sq_ema / debias - mean**2, 0.0))
            ok &= (state.good_steps < cfg.min_count) | (norm <= mean + cfg.drop_stddev * std)
        safe_g = jax.tree.map(lambda x: jnp.where(ok, x, jnp.zeros_like(x)), g)
        updates, new_inner = inner.update(safe_g, state.inner, params)
        updates = jax.tree.map(lambda u: jnp.where(ok, u, jnp.zeros_like(u)), updates)
        new_inner = jax.tree.map(lambda new, old: jnp.where(ok, new, old), new_inner, state.inner)
        d = cfg.ema_decay
        safe_norm = jnp.where(ok, norm, 0.0)
        return updates, SkipState(
            good_steps=state.good_steps + ok.astype(jnp.int32),
            skipped=state.skipped + (~ok).astype(jnp.int32),
            norm_ema=jnp.where(ok, d * state.norm_ema + (1 - d) * safe_norm, state.norm_ema),
            norm_sq_ema=jnp.where(ok, d * state.norm_sq_ema + (1 - d) * safe_norm**2, state.norm_sq_ema),
            inner=new_inner,
        )

    return optax.GradientTransformation(init, update)


# -- the two optimizers -------------------------------------------------------------------
def _tail(learning_rate: float, schedule: Schedule, weight_decay: float, lr_multipliers: Multipliers):
    return (
        scale_by_multipliers(learning_rate, lr_multipliers),
        add_decoupled_weight_decay(weight_decay),
        scale_by_schedule(schedule),
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
    """RMSProp with momentum on the clipped normalised update, exactly per SPEC 3.1."""
    return optax.chain(
        clip_by_global_norm(global_clip_norm),
        scale_by_rms_ema(b2, eps_square),
        clip_by_block_rms(update_clip_rms),
        momentum(b1),
        *_tail(learning_rate, schedule, weight_decay, lr_multipliers),
    )


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
    """Appendix A's baseline: global-norm clip, then AdamW (bias-corrected moments), with
    the same decoupled, scheduled decay and multipliers, so only the update rule differs."""
    return optax.chain(
        clip_by_global_norm(global_clip_norm),
        optax.scale_by_adam(b1=b1, b2=b2, eps=eps),
        *_tail(learning_rate, schedule, weight_decay, lr_multipliers),
    )


def build_optimizer(
    cfg: OptimizerConfig, schedule: Schedule, lr_multipliers: Multipliers = None
) -> optax.GradientTransformation:
    """The optimizer named by ``cfg.name``, wrapped in :func:`skip_on_spikes` when enabled."""
    if cfg.name == "afm_rmsprop":
        opt = afm_rmsprop(
            cfg.learning_rate, schedule, weight_decay=cfg.weight_decay, b1=cfg.b1, b2=cfg.b2,
            eps_square=cfg.eps_square, update_clip_rms=cfg.update_clip_rms,
            global_clip_norm=cfg.global_clip_norm, lr_multipliers=lr_multipliers,
        )
    elif cfg.name == "adamw":
        opt = adamw_baseline(
            cfg.learning_rate, schedule, weight_decay=cfg.weight_decay, b1=cfg.b1, b2=cfg.b2,
            eps=cfg.eps, global_clip_norm=cfg.global_clip_norm, lr_multipliers=lr_multipliers,
        )
    else:
        raise ValueError(f"unknown optimizer {cfg.name!r} (afm_rmsprop | adamw)")
    return skip_on_spikes(opt, cfg.skip) if cfg.skip.enabled else opt


def applied_updates(opt_state: PyTree) -> jnp.ndarray:
    """How many updates the schedule has seen (its :class:`ScheduleState` count)."""
    found = [s.count for s in jax.tree.leaves(opt_state, is_leaf=lambda x: isinstance(x, ScheduleState))
             if isinstance(s, ScheduleState)]
    if not found:
        raise ValueError("optimizer state has no schedule")
    return found[0]


def skipped_updates(opt_state: PyTree) -> jnp.ndarray:
    """Total skipped steps (0 when skipping is off)."""
    found = [s.skipped for s in jax.tree.leaves(opt_state, is_leaf=lambda x: isinstance(x, SkipState))
             if isinstance(s, SkipState)]
    return found[0] if found else jnp.zeros([], jnp.int32)


def adamw_appendix_a(cfg: OptimizerConfig) -> OptimizerConfig:
    """``cfg`` switched to Appendix A's AdamW: betas (0.9, 0.95), eps 1e-15, wd 1e-4."""
    from dataclasses import replace

    return replace(cfg, name="adamw", b1=0.9, b2=0.95, eps=1e-15, weight_decay=1e-4)
