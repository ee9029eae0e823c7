"""Learning-rate sweeps across widths: the check that muParam (simple) transfers the LR.

``lr_sweep`` trains one model per (width, LR) pair on the same batches for a few steps
and reports the mean loss of the last steps. With muParam the best LR of the proxy
(``width == base_width``) should stay the best (within 2x) for a wider model; with
standard parametrisation (``muparam=False``, ``base_width = width``) it drifts. The LR
enters the jitted step as an argument, so each width compiles once for the whole sweep.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from afm.training import muparam
from afm.training.config import TrainConfig
from afm.training.data import DataConfig
from afm.training.engine import ModelParts
from afm.training.loader import make_loader
from afm.training.optimizer import OptimizerConfig, SkipConfig, build_optimizer
from afm.training.pretrain import PretrainTask
from afm.training.schedules import warmup_cosine
from afm.training.task import LossContext


def _sweep_width(mcfg: Any, lrs: list[float], batches: list[dict[str, np.ndarray]], *, use_muparam: bool, seed: int, tail: int) -> dict[float, float]:
    parts = ModelParts.build(mcfg, seed)
    task = PretrainTask(TrainConfig(data=DataConfig(seq_len=batches[0]["inputs"].shape[1])))
    mult = (
        muparam.lr_multipliers(parts.shapes, parts.names, width=mcfg.dim, base_width=mcfg.base_width)
        if use_muparam
        else {k: 1.0 for k in parts.shapes}
    )
    schedule = warmup_cosine(max(len(batches) // 10, 1), len(batches), 0.1)
    base_cfg = OptimizerConfig(weight_decay=0.0, skip=SkipConfig(enabled=False))
    ctx = LossContext(parts.build_model, mcfg, jax.random.key(0), train=True)

    def loss(p: dict[str, jax.Array], batch: dict[str, jax.Array]) -> jax.Array:
        out = task.loss(p, batch, ctx)
        return out.loss[0] / jnp.maximum(out.loss[1], 1.0)

    @jax.jit
    def run(flat: dict[str, jax.Array], lr: jax.Array, data: dict[str, jax.Array]) -> jax.Array:
        # the LR is traced: the optimizer only multiplies by it
        opt = build_optimizer(dataclasses.replace(base_cfg, learning_rate=lr), schedule, mult)  # type: ignore[arg-type]
        state = opt.init(flat)

        def body(carry, batch):
            p, s = carry
            value, g = jax.value_and_grad(loss)(p, batch)
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), value

        _, losses = jax.lax.scan(body, (flat, state), data)
        return losses

    keys = task.batch_fields()
    stacked = {k: jnp.asarray(np.stack([b[k] for b in batches])) for k in keys}
    flat0 = parts.init()
    out = {}
    for lr in lrs:
        losses = np.asarray(run(flat0, jnp.float32(lr), stacked))
        final = float(np.mean(losses[-tail:]))
        out[lr] = final if np.isfinite(final) else float("inf")
    return out


def lr_sweep(
    base_model: Any,
    widths: list[int],
    lrs: list[float],
    data_paths: list[str],
    *,
    steps: int = 60,
    seq_len: int = 64,
    batch: int = 8,
    use_muparam: bool = True,
    seed: int = 0,
    tail: int = 10,
) -> dict[int, dict[float, float]]:
    """``{width: {lr: final loss}}``; heads scale with width (head_dim fixed)."""
    loader = make_loader(
        DataConfig(paths=data_paths, seq_len=seq_len, global_batch_size=batch, weights={}, prefetch=0),
        vocab_size=base_model.vocab_size,
    )
    batches = [next(loader) for _ in range(steps)]
    results: dict[int, dict[float, float]] = {}
    for width in widths:
        heads = max(width // base_model.head_dim, 2)
        mcfg = dataclasses.replace(
            base_model,
            dim=width,
            n_heads=heads,
            n_kv_heads=max(heads // 2, 1),
            ffn_dim=3 * width,
            max_seq_len=max(seq_len, base_model.max_seq_len),
            base_width=base_model.base_width if use_muparam else width,
        )
        results[width] = _sweep_width(mcfg, lrs, batches, use_muparam=use_muparam, seed=seed, tail=tail)
    return results


def best_lr(curve: dict[float, float]) -> float:
    return min(curve, key=curve.get)  # type: ignore[arg-type]
