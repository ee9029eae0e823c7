"""``afm prune learn`` and ``afm prune apply`` as functions: set a pruning run up from a
teacher checkpoint, and turn a finished run into the smaller model's checkpoint.

The task itself (masks, loss, logging) is ``afm.training.tasks.prune``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import jax.numpy as jnp
import numpy as np
from afm.training.compress.soft_topk import kept_indices
from afm.training.tasks.prune import SCORES, prune_options, score_key

SHAPE_FIELDS = ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim")


def learn_masks(
    teacher: str,
    target_ffn_dim: int,
    config: str,
    workdir: str,
    *,
    data: list[str] | None = None,
    steps: int | None = None,
    train_weights: bool | None = None,
    heldout: list[str] | None = None,
    overrides: list[str] | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run (or resume) a ``task: prune`` stage starting from ``teacher``; the model's shapes
    are the teacher checkpoint's, whatever the stage names. Returns the trainer's result."""
    from afm.training.core.checkpoint import checkpoint_model_config
    from afm.training.core.config import get_train_config
    from afm.training.core.trainer import train

    from afm.config import ConfigError

    cfg = get_train_config(config, list(overrides or ()))
    if cfg.task != "prune":
        raise ConfigError(f"{config}: task is {cfg.task!r}; afm prune learn needs a pruning stage "
                          "(tiny-prune, on-device-prune, or a YAML file with task: prune)")
    shapes = checkpoint_model_config(teacher)
    options = {**cfg.task_options, "target_ffn_dim": int(target_ffn_dim)}
    if train_weights is not None:
        options["train_weights"] = bool(train_weights)
    model_overrides = {**cfg.model_overrides, **{f: getattr(shapes, f) for f in SHAPE_FIELDS}}
    changes: dict[str, Any] = {"task_options": options, "model_overrides": model_overrides, "init_from": str(teacher)}
    if heldout:
        changes["eval"] = dataclasses.replace(cfg.eval, heldout=list(heldout))
    cfg = dataclasses.replace(cfg, **changes)
    prune_options(cfg.task_options)  # a bad option fails before anything is built
    return train(cfg, workdir, steps=steps, data=data, quiet=quiet)


def pruned_params(
    params: dict[str, np.ndarray], n_layers: int, target: int
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """The model parameters of the pruned model and each layer's kept unit indices:
    ``w_gate``/``w_up`` columns and ``w_down`` rows of the top-``target`` scores, in their
    original order; every other parameter as it is. Score entries are dropped."""
    out = {k: v for k, v in params.items() if not k.startswith(SCORES + "/")}
    kept = []
    for i in range(n_layers):
        if score_key(i) not in params:
            raise ValueError(f"no {score_key(i)} in the checkpoint: not a pruning run")
        idx = kept_indices(params[score_key(i)], target)
        kept.append(idx)
        mlp = f"layers/{i}/mlp"
        out[f"{mlp}/w_gate"] = params[f"{mlp}/w_gate"][:, idx]
        out[f"{mlp}/w_up"] = params[f"{mlp}/w_up"][:, idx]
        out[f"{mlp}/w_down"] = params[f"{mlp}/w_down"][idx, :]
    return out, kept


def apply_pruning(run: str, out: str, *, overwrite: bool = False) -> dict[str, Any]:
    """Materialise the pruned model of a ``task: prune`` run (its latest checkpoint, or a
    step directory) as an ``afm.model`` checkpoint at ``out``; returns a summary."""
    from afm.model.checkpoint import save_params
    from afm.model.config import ModelConfig, param_counts
    from afm.training.core.checkpoint import checkpoint_meta, read_run_params
    from afm.training.core.engine import ModelParts

    t0 = time.perf_counter()
    meta, step_dir = checkpoint_meta(run)
    if meta.get("task") != "prune":
        raise ValueError(f"{step_dir} was written by task {meta.get('task')!r}, not by a pruning run "
                         "(afm prune learn)")
    opts = prune_options(meta.get("task_options", {}))
    teacher = ModelConfig.from_dict(meta["model"]).replace(max_segments=0)
    params, kept = pruned_params(read_run_params(step_dir), teacher.n_layers, opts.target_ffn_dim)
    name = teacher.name if teacher.name.endswith(f"-ffn{opts.target_ffn_dim}") else f"{teacher.name}-ffn{opts.target_ffn_dim}"
    pruned = dataclasses.replace(teacher, ffn_dim=opts.target_ffn_dim, name=name,
                                 notes=f"pruned from {teacher.name} by afm prune apply ({step_dir})")
    layout = ModelParts.build(pruned, seed=0).layout
    missing = set(layout.keys) - set(params)
    if missing:
        raise ValueError(f"{step_dir}: parameters missing for the pruned model: {sorted(missing)[:3]}")
    path = save_params(layout.unflatten({k: jnp.asarray(params[k]) for k in layout.keys}), out, pruned,
                       overwrite=overwrite)
    record = {
        "source": str(step_dir), "step": meta.get("step"), "teacher_ffn_dim": teacher.ffn_dim,
        "target_ffn_dim": opts.target_ffn_dim, "kept": [k.tolist() for k in kept],
    }
    (path / "prune.json").write_text(json.dumps(record) + "\n")
    before, after = param_counts(teacher), param_counts(pruned)
    return {
        "pruned checkpoint": str(path),
        "from": f"{step_dir} (step {meta.get('step')})",
        "ffn_dim": f"{teacher.ffn_dim} -> {opts.target_ffn_dim} in each of {teacher.n_layers} layers",
        "non-embedding params": f"{before['non_embedding']:,} -> {after['non_embedding']:,}",
        "total params": f"{before['total']:,} -> {after['total']:,}",
        "seconds": round(time.perf_counter() - t0, 1),
    }


__all__ = ["apply_pruning", "learn_masks", "pruned_params"]
