"""Learning-rate schedules as *multipliers* in [0, 1] of the peak learning rate.

The AFM optimizer (SPEC 3.1) multiplies both the learning-rate term and the decoupled
weight-decay term by the schedule, so a schedule here is a unitless factor
``step -> float`` rather than a learning rate: the peak LR lives in the optimizer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax.numpy as jnp

from afm.config import check_choice, check_number

Schedule = Callable[[jnp.ndarray | int], jnp.ndarray]


@dataclass
class ScheduleConfig:
    """Linear warm-up from 0 to 1, then cosine decay to ``final_fraction`` of peak.

    ``decay_steps`` counts from the end of warm-up; after ``warmup + decay`` steps the
    factor stays at ``final_fraction``. ``decay_steps = 0`` means "decay over the rest
    of the run" and is resolved by the trainer from the total step count.
    """

    warmup_steps: int = 5000
    decay_steps: int = 0
    final_fraction: float = 0.005
    kind: str = "cosine"  # cosine | constant (constant still warms up)

    def __post_init__(self) -> None:
        check_number("schedule.warmup_steps", self.warmup_steps, low=0, integer=True)
        check_number("schedule.decay_steps", self.decay_steps, low=0, integer=True)
        check_number("schedule.final_fraction", self.final_fraction, low=0, high=1)
        check_choice("schedule.kind", self.kind, ("cosine", "constant"))


def warmup_cosine(
    warmup_steps: int, decay_steps: int, final_fraction: float
) -> Schedule:
    """``step -> factor``: linear 0->1 over ``warmup_steps``, cosine 1->final after."""
    if warmup_steps < 0 or decay_steps < 0:
        raise ValueError("warmup_steps and decay_steps must be >= 0")
    if not 0.0 <= final_fraction <= 1.0:
        raise ValueError(f"final_fraction must be in [0, 1], got {final_fraction}")

    def schedule(step: jnp.ndarray | int) -> jnp.ndarray:
        step = jnp.asarray(step, jnp.float32)
        # Step 0 gets 1/warmup of the peak, not 0: an update of exactly 0 wastes a step.
        warm = jnp.minimum((step + 1.0) / max(warmup_steps, 1), 1.0)
        progress = jnp.clip((step - warmup_steps) / max(decay_steps, 1), 0.0, 1.0)
        cosine = final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + jnp.cos(jnp.pi * progress))
        return jnp.where(step < warmup_steps, warm, cosine)

    return schedule


def constant_with_warmup(warmup_steps: int) -> Schedule:
    def schedule(step: jnp.ndarray | int) -> jnp.ndarray:
        step = jnp.asarray(step, jnp.float32)
        return jnp.minimum((step + 1.0) / max(warmup_steps, 1), 1.0)

    return schedule


def make_schedule(cfg: ScheduleConfig, total_steps: int) -> Schedule:
    """The schedule of ``cfg``, with ``decay_steps=0`` meaning 'until ``total_steps``'."""
    if cfg.kind == "constant":
        return constant_with_warmup(cfg.warmup_steps)
    if cfg.kind != "cosine":
        raise ValueError(f"unknown schedule kind {cfg.kind!r} (cosine | constant)")
    decay = cfg.decay_steps or max(total_steps - cfg.warmup_steps, 1)
    return warmup_cosine(cfg.warmup_steps, decay, cfg.final_fraction)
