"""Learned FFN pruning (report §3.2.1): Soft-Top-K masks over FFN hidden units, then the
smaller model materialised.

AFM-on-device starts from a 6.4B teacher pruned along the FFN hidden dimension only, with
masks learned by Soft-Top-K (``afm.training.compress.soft_topk``) on the core mixture. Two parts:

* :class:`PruneTask` (``task: prune``, ``afm prune learn``): the teacher's weights (frozen,
  or trained jointly with ``train_weights``, as Sheared LLaMA does) plus one score vector
  per layer, ``prune/scores/<layer>`` of ``ffn_dim`` entries (init 0: every unit equally
  likely). Each step turns a layer's scores into the soft mask
  ``lambda = soft_top_k(scores, D, eps(step))`` (exactly ``D`` units of mass) and trains
  the next-token loss of the masked model. Masking hidden unit ``j`` scales
  ``silu(gate_j) * up_j``; since ``(h * lambda) @ W_down == h @ (diag(lambda) W_down)``, the
  task rewrites ``w_down``'s rows and the model itself is untouched. The temperature
  ``eps`` anneals geometrically from ``temperature_start`` to ``temperature_end`` over the
  run (``soft_topk.temperature_at``), so the soft mask hardens; every step logs
  ``mask_entropy`` (mean binary entropy per unit, nats), ``mask_hard_gap`` (mean
  ``|lambda - hard|``) and ``mask_temperature``. Evaluation (held-out loss) always uses
  the hard mask, i.e. it is the loss of the pruned model as of that step.
  :func:`mask_hook` adds the kept-unit overlap across evaluations.
* ``afm.training.compress.pruning.apply_pruning`` (``afm prune apply``): the hard mask of the last checkpoint (the
  ``D`` highest scores per layer, exactly ``D``) selects ``w_gate``/``w_up`` columns and
  ``w_down`` rows into a normal ``afm.model`` checkpoint with ``ffn_dim = D``, which
  ``afm train --init-from`` accepts. Its loss equals the masked model's at the hard mask.

The score learning rate is the run's (scores are 1-D, so muParam keeps the base LR);
under the AFM optimizer a score moves by about ``lr`` per step whatever its gradient's
scale, which is what ``temperature_start``/``temperature_end`` are measured against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afm.config import ConfigError
from afm.training.compress.pruning import SHAPE_FIELDS, score_key, w_down_key
from afm.training.compress.soft_topk import (
    binary_entropy,
    hard_top_k,
    kept_indices,
    soft_top_k,
    temperature_at,
)
from afm.training.core.checkpoint import checkpoint_model_config
from afm.training.core.task import LossContext, LossOutput, ParamSpec, parse_task_options
from afm.training.tasks.pretrain import PretrainTask


@dataclass
class PruneOptions:
    """``task_options`` of the pruning task."""

    target_ffn_dim: int = 0  # D: FFN hidden units each layer keeps
    temperature_start: float = 0.5  # Soft-Top-K eps at step 0 (score units)
    temperature_end: float = 0.005  # eps at the last step of the run's schedule
    train_weights: bool = False  # also train the teacher's weights (jointly); False: frozen

    def check(self) -> None:
        if self.target_ffn_dim <= 0:
            raise ConfigError("task_options.target_ffn_dim must be set to the FFN size to keep "
                              "(afm prune learn --target-ffn-dim D)")
        if self.temperature_start <= 0 or self.temperature_end <= 0:
            raise ConfigError("task_options.temperature_start/temperature_end must be positive")


class PruneTask(PretrainTask):
    """Learn one Soft-Top-K mask per layer over the FFN hidden units (module docstring)."""

    name = "prune"
    Options = PruneOptions

    def __init__(self, config: Any):
        super().__init__(config)
        self.n_layers = 0

    @classmethod
    def prepare_config(cls, config: Any, workdir: str) -> Any:
        """Pruning starts from a teacher (``init_from``): the model's shapes are its
        checkpoint's, whatever the stage names, and the options are checked before anything
        is built."""
        import dataclasses


        parse_task_options(PruneOptions, config.task_options, cls.name)
        if not config.init_from:
            raise ConfigError("pruning starts from a teacher: set init_from (afm prune learn --teacher)")
        shapes = checkpoint_model_config(config.init_from)
        overrides = {**config.model_overrides, **{f: getattr(shapes, f) for f in SHAPE_FIELDS}}
        return dataclasses.replace(config, model_overrides=overrides)

    def configure_model(self, model_config: Any) -> Any:
        d, f = self.options.target_ffn_dim, model_config.ffn_dim
        if d >= f:
            raise ConfigError(
                f"task_options.target_ffn_dim ({d}) must be smaller than the teacher's ffn_dim ({f})"
            )
        self.n_layers = model_config.n_layers
        return super().configure_model(model_config)

    def extra_params(self, model_config: Any) -> dict[str, ParamSpec]:
        f = model_config.ffn_dim
        zeros = lambda rng, model_params: jnp.zeros((f,), jnp.float32)  # noqa: E731 - every unit alike
        return {score_key(i): ParamSpec((f,), ("mlp",), zeros) for i in range(model_config.n_layers)}

    def is_trainable(self, path: str) -> bool:
        return self.options.train_weights

    def temperature(self, step: jax.Array | int) -> jax.Array:
        o = self.options
        return temperature_at(step, self.config.total_steps, o.temperature_start, o.temperature_end)

    def masks(self, params: dict[str, jax.Array], step: jax.Array | None) -> list[jax.Array]:
        """Per layer: the soft mask at ``step``'s temperature, or the hard mask (``None``)."""
        d = self.options.target_ffn_dim
        scores = [params[score_key(i)] for i in range(self.n_layers)]
        if step is None:
            return [hard_top_k(s, d) for s in scores]
        eps = self.temperature(step)
        return [soft_top_k(s, d, eps) for s in scores]

    def masked(self, params: dict[str, jax.Array], masks: list[jax.Array]) -> dict[str, jax.Array]:
        """``params`` with each layer's ``w_down`` rows scaled by its mask (== masking the
        FFN hidden units)."""
        out = dict(params)
        for i, m in enumerate(masks):
            w = params[w_down_key(i)]
            out[w_down_key(i)] = w * m.astype(w.dtype)[:, None]
        return out

    def loss(self, params, batch, ctx: LossContext) -> LossOutput:
        step = ctx.step if ctx.train else None
        masks = self.masks(params, step)
        out = super().loss(self.masked(params, masks), batch, ctx)
        if step is None:
            return out
        d = self.options.target_ffn_dim
        m = jnp.stack(masks)
        hard = jnp.stack([hard_top_k(jax.lax.stop_gradient(params[score_key(i)]), d) for i in range(self.n_layers)])
        one = jnp.ones((), jnp.float32)
        stats = {
            "mask_entropy": jnp.mean(binary_entropy(jax.lax.stop_gradient(m))),
            "mask_hard_gap": jnp.mean(jnp.abs(jax.lax.stop_gradient(m) - hard)),
            "mask_temperature": self.temperature(step),
        }
        return LossOutput(out.loss, {**out.metrics, **{k: (v * one, one) for k, v in stats.items()}})


class MaskHook:
    """Evaluation hook: how the hard masks move between evaluations.

    ``overlap_prev``: kept units shared with the previous evaluation's hard mask, as a
    fraction of ``D`` (mean over layers); ``overlap_first``: the same against the first
    evaluation; ``entropy``: the soft mask's mean binary entropy at this step's
    temperature. The kept indices per layer are appended to ``workdir/prune-masks.jsonl``.
    """

    name = "prune"

    def __init__(self, task: PruneTask, workdir: str):
        self.task = task
        self.workdir = workdir
        self.first: list[set[int]] | None = None
        self.previous: list[set[int]] | None = None

    def __call__(self, step: int, view: Any) -> dict[str, float]:
        d = self.task.options.target_ffn_dim
        scores = [np.asarray(jax.device_get(view.params[score_key(i)])) for i in range(self.task.n_layers)]
        kept = [set(kept_indices(s, d).tolist()) for s in scores]
        soft = [np.asarray(soft_top_k(jnp.asarray(s), d, self.task.temperature(step - 1))) for s in scores]
        out = {"entropy": float(np.mean([np.mean(np.asarray(binary_entropy(jnp.asarray(m)))) for m in soft]))}
        if self.previous is not None:
            out["overlap_prev"] = float(np.mean([len(a & b) / d for a, b in zip(kept, self.previous, strict=True)]))
        if self.first is not None:
            out["overlap_first"] = float(np.mean([len(a & b) / d for a, b in zip(kept, self.first, strict=True)]))
        self.first = self.first or kept
        self.previous = kept
        if jax.process_index() == 0 and "://" not in self.workdir:
            row = {"step": step, **out, "kept": [sorted(k) for k in kept]}
            with open(f"{self.workdir}/prune-masks.jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")
        return out


def mask_hook(context: Any) -> MaskHook:
    """``eval.hooks: ["afm.training.tasks.prune:mask_hook"]`` (the prune stages set it)."""
    task = context.engine.task
    if not isinstance(task, PruneTask):
        raise ValueError("afm.training.tasks.prune:mask_hook needs task: prune")
    return MaskHook(task, context.workdir)


__all__ = ["MaskHook", "PruneOptions", "PruneTask", "mask_hook"]
