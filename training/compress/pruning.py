"""``afm prune apply`` as functions: turn a finished pruning run into the smaller model's
checkpoint; or, as controls for the learned masks, keep the same number of a teacher's FFN
units chosen at random or by weight magnitude and write the same checkpoint. The names of
the learned scores (:func:`score_key`) live here, below the task that learns them
(``afm.training.tasks.prune``: masks, loss, logging; its stage is set up from the teacher
by the task itself, for ``afm prune learn`` and ``afm train`` alike).
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import jax.numpy as jnp
import numpy as np

from afm import fs
from afm.model.checkpoints.checkpoint import restore_tree, save_params
from afm.model.config import ModelConfig, param_counts
from afm.model.parts import ModelParts
from afm.training.compress.soft_topk import kept_indices
from afm.training.core.checkpoint import (
    _flatten_nested,
    checkpoint_meta,
    checkpoint_model_config,
    is_model_checkpoint,
    read_run_params,
)

SCORES = "prune/scores"  # one learned score vector per layer: prune/scores/<layer>
SHAPE_FIELDS = ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim")


def score_key(layer: int) -> str:
    return f"{SCORES}/{layer}"


def w_down_key(layer: int) -> str:
    return f"layers/{layer}/mlp/w_down"




METHODS = ("soft-top-k", "random", "magnitude")


def select_units(params: dict[str, np.ndarray], kept: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The smaller model's parameters: in layer ``i``, the ``w_gate``/``w_up`` columns and
    ``w_down`` rows of ``kept[i]`` (sorted, so the units keep their original order); every
    other model parameter as it is. Pruning score entries are dropped. Every method
    (learned masks, random, magnitude) cuts the FFN through this one function, so the
    controls differ from the learned masks only in which units they keep."""
    out = {k: v for k, v in params.items() if not k.startswith(SCORES + "/")}
    for i, idx in enumerate(kept):
        idx = np.sort(np.asarray(idx, np.int64))
        mlp = f"layers/{i}/mlp"
        out[f"{mlp}/w_gate"] = params[f"{mlp}/w_gate"][:, idx]
        out[f"{mlp}/w_up"] = params[f"{mlp}/w_up"][:, idx]
        out[f"{mlp}/w_down"] = params[f"{mlp}/w_down"][idx, :]
    return out


def pruned_params(
    params: dict[str, np.ndarray], n_layers: int, target: int
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """The model parameters of the pruned model and each layer's kept unit indices:
    ``w_gate``/``w_up`` columns and ``w_down`` rows of the top-``target`` scores, in their
    original order; every other parameter as it is. Score entries are dropped."""
    kept = learned_kept(params, n_layers, target)
    return select_units(params, kept), kept


def learned_kept(params: dict[str, np.ndarray], n_layers: int, target: int) -> list[np.ndarray]:
    """Each layer's kept units of a pruning run: the top-``target`` learned mask scores
    (the hard mask the annealed Soft-Top-K mask converges to)."""
    kept = []
    for i in range(n_layers):
        if score_key(i) not in params:
            raise ValueError(f"no {score_key(i)} in the checkpoint: not a pruning run")
        kept.append(kept_indices(params[score_key(i)], target))
    return kept


def random_kept(n_layers: int, ffn_dim: int, target: int, seed: int) -> list[np.ndarray]:
    """Control for learned masks: ``target`` of ``ffn_dim`` units per layer, uniformly at
    random without replacement, each layer drawn independently from one generator seeded
    with ``seed`` (layer 0 first), so a seed names one choice on every machine."""
    if not 0 < target < ffn_dim:
        raise ValueError(f"--target-ffn-dim must be in [1, {ffn_dim - 1}] (the teacher's ffn_dim is {ffn_dim}), "
                         f"got {target}")
    rng = np.random.default_rng(seed)
    return [np.sort(rng.choice(ffn_dim, size=target, replace=False)) for _ in range(n_layers)]


def unit_magnitudes(params: dict[str, np.ndarray], layer: int) -> np.ndarray:
    """The magnitude criterion: for each FFN hidden unit ``j`` of ``layer``, the L2 norm of
    every weight that belongs to it and goes when it is pruned, ``sqrt(|w_gate[:, j]|^2 +
    |w_up[:, j]|^2 + |w_down[j, :]|^2)``. This is structured (group) L2-magnitude pruning,
    the "L2" baseline of LLM-Pruner (Ma et al., 2023, Table 1; their ``MagnitudeImportance``
    with p=2 averages the per-matrix squared norms over the coupled group, which ranks
    units the same way); structured magnitude pruning itself goes back to Li et al. (2017,
    "Pruning Filters for Efficient ConvNets", filter norms)."""
    mlp = f"layers/{layer}/mlp"
    gate, up, down = (np.asarray(params[f"{mlp}/{w}"], np.float64) for w in ("w_gate", "w_up", "w_down"))
    return np.sqrt((gate**2).sum(axis=0) + (up**2).sum(axis=0) + (down**2).sum(axis=1))


def magnitude_kept(params: dict[str, np.ndarray], n_layers: int, target: int) -> list[np.ndarray]:
    """Control for learned masks: per layer, the ``target`` units of largest
    :func:`unit_magnitudes` (ties to the lower index, as the learned masks' hard top-k)."""
    return [kept_indices(unit_magnitudes(params, i).astype(np.float32), target) for i in range(n_layers)]


def write_pruned(
    teacher: Any, params: dict[str, np.ndarray], kept: list[np.ndarray], out: str, *,
    source: str, method: str, overwrite: bool = False, extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The one writer of pruned checkpoints: cut ``params`` (the teacher's, ``ModelConfig``
    ``teacher``) to ``kept`` units per layer and save a normal ``afm.model`` checkpoint
    (``config.json`` with the smaller ``ffn_dim``, ``params/``, and ``prune.json``: method,
    source, kept indices), the format ``afm train --init-from`` accepts; returns a summary."""

    target = len(kept[0])
    if len(kept) != teacher.n_layers or any(len(set(np.asarray(k).tolist())) != target for k in kept):
        raise ValueError(f"{source}: need {teacher.n_layers} layers of {target} distinct kept units")
    small = select_units(params, kept)
    suffix = f"-ffn{target}"
    name = teacher.name if teacher.name.endswith(suffix) else f"{teacher.name}{suffix}"
    pruned = dataclasses.replace(teacher, ffn_dim=target, name=name,
                                 notes=f"pruned from {teacher.name} by afm prune apply --method {method} ({source})")
    layout = ModelParts.build(pruned, seed=0).layout
    missing = set(layout.keys) - set(small)
    if missing:
        raise ValueError(f"{source}: parameters missing for the pruned model: {sorted(missing)[:3]}")
    path = save_params(layout.unflatten({k: jnp.asarray(small[k]) for k in layout.keys}), out, pruned,
                       overwrite=overwrite)
    record = {"method": method, "source": source, "teacher_ffn_dim": teacher.ffn_dim, "target_ffn_dim": target,
              **(extra or {}), "kept": [np.sort(np.asarray(k)).tolist() for k in kept]}
    (path / "prune.json").write_text(json.dumps(record) + "\n")
    before, after = param_counts(teacher), param_counts(pruned)
    return {
        "pruned checkpoint": str(path),
        "method": method,
        "ffn_dim": f"{teacher.ffn_dim} -> {target} in each of {teacher.n_layers} layers",
        "non-embedding params": f"{before['non_embedding']:,} -> {after['non_embedding']:,}",
        "total params": f"{before['total']:,} -> {after['total']:,}",
    }


def apply_pruning(run: str, out: str, *, overwrite: bool = False) -> dict[str, Any]:
    """Materialise the pruned model of a ``task: prune`` run (its latest checkpoint, or a
    step directory) as an ``afm.model`` checkpoint at ``out``; returns a summary."""

    t0 = time.perf_counter()
    meta, step_dir = checkpoint_meta(run)
    if meta.get("task") != "prune":
        raise ValueError(f"{step_dir} was written by task {meta.get('task')!r}, not by a pruning run "
                         "(afm prune learn)")
    target = int((meta.get("task_options") or {}).get("target_ffn_dim") or 0)
    if target <= 0:
        raise ValueError(f"{step_dir}: the pruning run's task_options name no target_ffn_dim")
    teacher = ModelConfig.from_dict(meta["model"]).replace(max_segments=0)
    params = read_run_params(step_dir)  # the teacher's weights and the learned scores
    kept = learned_kept(params, teacher.n_layers, target)
    summary = write_pruned(teacher, params, kept, out, source=str(step_dir), method="soft-top-k",
                           overwrite=overwrite, extra={"step": meta.get("step")})
    return {**summary, "from": f"{step_dir} (step {meta.get('step')})", "seconds": round(time.perf_counter() - t0, 1)}


def teacher_params(teacher: str) -> tuple[Any, dict[str, np.ndarray]]:
    """``(ModelConfig, model parameters as float32 host arrays)`` of a teacher checkpoint:
    an ``afm train`` workdir or step directory, or an ``afm.model`` checkpoint. Task extras
    a run may hold (e.g. pruning scores) are left out: a control sees only the weights."""


    config = checkpoint_model_config(teacher)
    if is_model_checkpoint(teacher):
        flat = _flatten_nested(restore_tree(fs.as_path(str(teacher)) / "params"))
        params = {k: np.asarray(v, np.float32) for k, v in flat.items()}
    else:
        params = read_run_params(checkpoint_meta(teacher)[1])
    keys = ModelParts.build(config, seed=0).layout.keys
    missing = [k for k in keys if k not in params]
    if missing:
        raise ValueError(f"{teacher}: checkpoint lacks model parameters {missing[:3]}")
    return config, {k: params[k] for k in keys}


def check_apply_args(method: str, run: str | None, teacher: str | None, target_ffn_dim: int | None,
                     seed: int | None) -> None:
    """One-line errors for ``afm prune apply``'s options: the learned masks come from a
    pruning run (``--run``) that already fixes D; the controls choose units of a teacher
    (``--teacher``) and need D; only ``random`` draws, so only it takes ``--seed``."""
    if method not in METHODS:
        raise ValueError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "soft-top-k":
        if not run or teacher or target_ffn_dim is not None or seed is not None:
            raise ValueError("--method soft-top-k takes --run (a pruning run of afm prune learn, which fixes "
                             "the kept units and D), not --teacher, --target-ffn-dim or --seed")
        return
    if run or not teacher:
        raise ValueError(f"--method {method} takes --teacher (the checkpoint whose units it chooses), not --run")
    if target_ffn_dim is None or target_ffn_dim <= 0:
        raise ValueError(f"--method {method} needs --target-ffn-dim D > 0 (FFN units to keep per layer)")
    if method == "magnitude" and seed is not None:
        raise ValueError("--seed is for --method random; magnitude pruning draws nothing")


def apply_baseline(teacher: str, out: str, method: str, target_ffn_dim: int, *, seed: int = 0,
                   overwrite: bool = False) -> dict[str, Any]:
    """A control for learned masks (``afm prune apply --method random|magnitude``): keep
    ``target_ffn_dim`` units per layer of ``teacher`` chosen at random (``seed``) or by
    :func:`unit_magnitudes`, and write the same checkpoint :func:`apply_pruning` writes."""
    t0 = time.perf_counter()
    check_apply_args(method, None, teacher, target_ffn_dim, seed if method == "random" else None)
    config, params = teacher_params(teacher)
    if not 0 < target_ffn_dim < config.ffn_dim:
        raise ValueError(f"--target-ffn-dim must be in [1, {config.ffn_dim - 1}] (the teacher's ffn_dim is "
                         f"{config.ffn_dim}), got {target_ffn_dim}")
    if method == "random":
        kept, extra = random_kept(config.n_layers, config.ffn_dim, target_ffn_dim, seed), {"seed": seed}
    else:
        kept = magnitude_kept(params, config.n_layers, target_ffn_dim)
        extra = {"criterion": "L2 norm of w_gate[:, j], w_up[:, j], w_down[j, :] together"}
    summary = write_pruned(config, params, kept, out, source=str(teacher), method=method, overwrite=overwrite,
                           extra=extra)
    return {**summary, "from": str(teacher), **({"seed": seed} if method == "random" else {}),
            "seconds": round(time.perf_counter() - t0, 1)}


__all__ = [
    "METHODS", "apply_baseline", "apply_pruning", "check_apply_args", "learned_kept", "magnitude_kept",
    "pruned_params", "random_kept", "select_units", "teacher_params", "unit_magnitudes", "write_pruned", "SCORES",
    "SHAPE_FIELDS", "score_key", "w_down_key",
]
