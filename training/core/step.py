"""The training and evaluation steps as pure functions of (state, batch).

Gradient accumulation: the global batch is split into ``microbatches`` interleaved
slices (row ``r`` goes to microbatch ``r mod m``, so every device holds its share of
every microbatch and no data moves), the task's loss *sums* and gradients are added over
them under ``lax.scan`` in float32, and divided once by the total weight. The update is
therefore the one a single large batch would give, up to summation order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from afm.model.distributed.partitioning import constrain
from afm.training.core.optimizer import applied_updates, global_norm, skipped_updates
from afm.training.core.task import Field, LossContext, LossOutput, Task

Array = jax.Array
Params = dict[str, Array]


class TrainState(NamedTuple):
    """Trainable parameters, frozen parameters and the optimizer state (all sharded)."""

    params: Params
    frozen: Params
    opt_state: Any


def split_microbatches(batch: dict[str, Array], fields: dict[str, Field], m: int) -> dict[str, Array]:
    """``[G, ...]`` -> ``[m, G/m, ...]`` with row ``r`` in microbatch ``r mod m``."""
    out = {}
    for name, x in batch.items():
        if fields[name].shape[:1] != ("batch",):
            raise ValueError(f"batch field {name!r} has no leading batch axis to split")
        g = x.shape[0]
        if g % m:
            raise ValueError(f"batch of {g} rows does not split into {m} microbatches")
        out[name] = jnp.swapaxes(x.reshape(g // m, m, *x.shape[1:]), 0, 1)
    return out


def _constrain_batch(batch: dict[str, Array], fields: dict[str, Field]) -> dict[str, Array]:
    return {
        k: constrain(v, tuple(d if isinstance(d, str) else None for d in fields[k].shape))
        for k, v in batch.items()
    }


def _add(a: LossOutput, b: LossOutput) -> LossOutput:
    return jax.tree.map(lambda x, y: x.astype(jnp.float32) + y.astype(jnp.float32), a, b)


def _ratio(sums: tuple[Array, Array]) -> Array:
    return sums[0] / jnp.maximum(sums[1], 1e-9)


def batch_checksum(batch: dict[str, Array]) -> Array:
    """A fingerprint of the global batch's tokens (wrapping uint32 arithmetic, exact under
    any sharding), logged so resumed runs can be checked to read the same data."""
    keys = ["inputs"] if "inputs" in batch else sorted(  # pair tasks: every integer field
        k for k, v in batch.items() if jnp.issubdtype(v.dtype, jnp.integer))
    total = jnp.zeros((), jnp.uint32)
    for k in keys:
        x = batch[k].astype(jnp.uint32)
        weights = jnp.arange(1, x.size + 1, dtype=jnp.uint32).reshape(x.shape)
        total = total + jnp.sum(x * weights, dtype=jnp.uint32)
    return total


def make_train_step(
    task: Task,
    optimizer: optax.GradientTransformation,
    build_model: Callable[[Params], Any],
    model_config: Any,
    *,
    microbatches: int,
    peak_lr: float,
    schedule: Callable[[Array], Array],
    seed: int,
) -> Callable[[TrainState, dict[str, Array], Array], tuple[TrainState, dict[str, Array]]]:
    """``step(state, batch, step_number) -> (state, metrics)`` (not yet jitted)."""
    fields = task.batch_fields()

    def sums_and_grads(params: Params, frozen: Params, batch: dict[str, Array], rng: Array, step: Array):
        ctx = LossContext(build_model, model_config, rng, train=True, step=step)

        def objective(p: Params) -> tuple[Array, LossOutput]:
            out = task.loss({**p, **frozen}, batch, ctx)
            return out.loss[0], out

        (_, out), grads = jax.value_and_grad(objective, has_aux=True)(params)
        return out, jax.tree.map(lambda g: g.astype(jnp.float32), grads)

    def step(state: TrainState, batch: dict[str, Array], step_number: Array):
        rng = jax.random.fold_in(jax.random.key(seed), step_number)
        batch = _constrain_batch(batch, fields)
        if microbatches == 1:
            out, grads = sums_and_grads(state.params, state.frozen, batch, rng, step_number)
        else:
            parts = split_microbatches(batch, fields, microbatches)
            first = jax.tree.map(lambda x: x[0], parts)
            shapes = jax.eval_shape(lambda: sums_and_grads(state.params, state.frozen, first, rng, step_number))
            zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), shapes)

            def body(carry, xs):
                acc_out, acc_grads = carry
                mb, i = xs
                out, grads = sums_and_grads(
                    state.params, state.frozen, _constrain_batch(mb, fields), jax.random.fold_in(rng, i),
                    step_number,
                )
                return (_add(acc_out, out), jax.tree.map(jnp.add, acc_grads, grads)), None

            (out, grads), _ = jax.lax.scan(body, zeros, (parts, jnp.arange(microbatches)))
        weight = jnp.maximum(out.loss[1], 1e-9)
        grads = jax.tree.map(lambda g: g / weight, grads)
        count = applied_updates(state.opt_state)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        n_params = sum(x.size for x in jax.tree.leaves(updates))
        metrics = {
            "loss": _ratio(out.loss),
            "loss_weight": out.loss[1],
            "grad_norm": global_norm(grads),
            "update_rms": global_norm(updates) / math.sqrt(max(n_params, 1)),
            "param_norm": global_norm(params),
            "lr": peak_lr * schedule(count),
            "skipped_total": skipped_updates(opt_state).astype(jnp.float32),
            "batch_checksum": batch_checksum(batch),
            **{k: _ratio(v) for k, v in out.metrics.items()},
        }
        return TrainState(params, state.frozen, opt_state), metrics

    return step


def make_eval_step(
    task: Task, build_model: Callable[[Params], Any], model_config: Any
) -> Callable[[Params, dict[str, Array]], LossOutput]:
    """``eval(params, batch) -> LossOutput`` of sums (held-out loss; no gradient).
    ``params`` holds every parameter, trainable and frozen."""
    fields = task.batch_fields()

    def evaluate(params: Params, batch: dict[str, Array]) -> LossOutput:
        ctx = LossContext(build_model, model_config, jax.random.key(0), train=False)
        out = task.loss(params, _constrain_batch(batch, fields), ctx)
        return jax.tree.map(lambda x: x.astype(jnp.float32), out)

    return evaluate


__all__ = ["TrainState", "batch_checksum", "make_eval_step", "make_train_step", "split_microbatches"]
