"""Orbax checkpoints of a training run: parameters, optimizer state, data position, meta.

One step directory holds five or six items:

* ``params``      flat ``{path: float32 array}``, trainable and frozen (sharded save and
                  restore into any mesh, so a run resumes on another device count);
* ``opt_state``   the optimizer state's leaves as ``{"0": ..., "1": ...}`` in tree order
                  (restored into the structure of a fresh ``optimizer.init``);
* ``data_lanes``  every host's loader lanes, gathered: ``int64 [lanes, fields]`` with the
                  lane id in column 0 (``afm.training.data.loader``), so any host count that
                  divides the lanes picks its rows on resume;
* ``data_spec``   what those lanes were reading (JSON: lanes, seq_len, sources, seed,
                  shard fingerprint), checked on resume;
* ``meta``        step, stage, model config (JSON);
* ``data_arrays`` (when the input has any) batches an input generated and cannot re-read:
                  online RL's rollout batch of the iteration under way.

Paths go through ``etils.epath`` (``gs://`` works). Saves are asynchronous: the step
loop continues while arrays are written; ``wait`` blocks until the last is durable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from afm import fs
from afm.model.checkpoints.checkpoint import CheckpointError, load_config, restore_tree
from afm.model.config import ModelConfig
from afm.training.core.step import TrainState
from afm.training.data.loader import LoaderState

ITEMS = ("params", "opt_state", "data_lanes", "data_spec", "meta", "data_arrays")


def _leaves_dict(tree: Any) -> dict[str, Any]:
    return {str(i): x for i, x in enumerate(jax.tree.leaves(tree))}


def _abstract(tree: Any) -> Any:
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None)), tree
    )


def gather_data_state(local: LoaderState) -> LoaderState:
    """Every host's lanes in one state (an all-gather when there are several hosts)."""
    if jax.process_count() == 1:
        return local
    from jax.experimental import multihost_utils

    gathered = np.asarray(multihost_utils.process_allgather(local.lanes, tiled=True))
    return LoaderState.merge([LoaderState(local.spec, gathered, local.arrays)])


class Checkpointer:
    """A ``CheckpointManager`` over ``workdir/checkpoints`` with the items above."""

    def __init__(self, workdir: str | Path | epath.Path, *, keep: int = 3, async_save: bool = True):
        self.directory = fs.as_path(str(workdir)) / "checkpoints"
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=async_save
        )
        self.manager = ocp.CheckpointManager(self.directory, options=options, item_names=ITEMS)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def step_dir(self, step: int) -> epath.Path:
        return self.directory / str(step)

    def save(self, step: int, state: TrainState, data: LoaderState, meta: dict[str, Any]) -> None:
        """Save (collective: every host calls it; ``data`` is already gathered)."""
        self.manager.save(
            step,
            args=ocp.args.Composite(
                params=ocp.args.StandardSave({**state.params, **state.frozen}),
                opt_state=ocp.args.StandardSave(_leaves_dict(state.opt_state)),
                data_lanes=ocp.args.StandardSave({"lanes": np.asarray(data.lanes, np.int64)}),
                data_spec=ocp.args.JsonSave(data.spec),
                meta=ocp.args.JsonSave(meta),
                **({"data_arrays": ocp.args.StandardSave({k: np.asarray(v) for k, v in data.arrays.items()})}
                   if data.arrays else {}),
            ),
            force=True,
        )

    def restore(self, step: int, like: TrainState) -> tuple[TrainState, LoaderState, dict[str, Any]]:
        """Restore ``step`` into the shardings/dtypes of the (abstract) state ``like``."""
        leaves_like, treedef = jax.tree.flatten(like.opt_state)
        params_like = {**like.params, **like.frozen}
        has_arrays = (self.step_dir(step) / "data_arrays").exists()
        try:
            out = self.manager.restore(
                step,
                args=ocp.args.Composite(
                    params=ocp.args.StandardRestore(_abstract(params_like)),
                    opt_state=ocp.args.StandardRestore(_abstract(_leaves_dict(like.opt_state))),
                    data_lanes=ocp.args.StandardRestore(),
                    data_spec=ocp.args.JsonRestore(),
                    meta=ocp.args.JsonRestore(),
                    **({"data_arrays": ocp.args.StandardRestore()} if has_arrays else {}),
                ),
            )
        except Exception as exc:  # noqa: BLE001 - one line naming the step, whatever Orbax raised
            text = " ".join(str(exc).split())[:300]
            raise CheckpointError(f"{self.step_dir(step)}: cannot resume from this checkpoint, damaged or "
                                  f"written by another run's config ({type(exc).__name__}: {text}); move it "
                                  "aside to resume from an earlier step") from None
        params = out["params"]
        leaves = [out["opt_state"][str(i)] for i in range(len(leaves_like))]
        state = TrainState(
            {k: params[k] for k in like.params},
            {k: params[k] for k in like.frozen},
            jax.tree.unflatten(treedef, leaves),
        )
        arrays = {k: np.asarray(v) for k, v in out["data_arrays"].items()} if has_arrays else {}
        data = LoaderState(dict(out["data_spec"]), np.asarray(out["data_lanes"]["lanes"], np.int64), arrays)
        return state, data, dict(out["meta"])

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()


def resolve_init_from(path: str | Path) -> tuple[epath.Path, int]:
    """A previous stage's workdir (latest step), its ``checkpoints`` dir, or a step dir."""
    p = fs.as_path(str(path))
    for candidate in (p / "checkpoints", p):
        if candidate.is_dir():
            steps = sorted(int(c.name) for c in candidate.iterdir() if c.name.isdigit() and (c / "params").exists())
            if steps:
                return candidate, steps[-1]
    if (p / "params").exists() and p.name.isdigit():
        return p.parent, int(p.name)
    raise FileNotFoundError(f"init_from {path}: no checkpoint found (expected a workdir, its checkpoints/ or a step dir)")


def _flatten_nested(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten_nested(v, f"{prefix}{k}/"))
        return out
    return {prefix[:-1]: tree}


def is_model_checkpoint(path: str | Path) -> bool:
    """An ``afm.model.checkpoints.checkpoint`` directory (``config.json`` + ``params/``)."""
    p = fs.as_path(str(path))
    return (p / "config.json").is_file() and (p / "params").is_dir()


def restore_model_checkpoint(path: str | Path, params_like: dict[str, Any], layout: Any) -> dict[str, Any]:
    """Parameters from an ``afm.model`` checkpoint, as this trainer's flat dict."""
    from flax import nnx

    target = nnx.to_pure_dict(layout.unflatten(_abstract(params_like)))
    restored = restore_tree(fs.as_path(str(path)) / "params", target)
    flat = _flatten_nested(restored)
    missing = set(params_like) - set(flat)
    if missing:
        raise ValueError(f"{path}: model checkpoint lacks parameters {sorted(missing)[:5]}")
    return {k: flat[k] for k in params_like}


def restore_params_only(
    path: str | Path, params_like: dict[str, Any], layout: Any = None
) -> tuple[dict[str, Any], epath.Path]:
    """The model parameters of a previous stage, resharded: a training workdir, its
    ``checkpoints/`` or a step dir, or an ``afm.model`` checkpoint (``workdir/model``)."""
    try:
        if is_model_checkpoint(path) and layout is not None:
            return restore_model_checkpoint(path, params_like, layout), fs.as_path(str(path))
        directory, step = resolve_init_from(path)
        step_dir = directory / str(step)
        params = restore_tree(step_dir / "params", _abstract(params_like))
    except CheckpointError as exc:
        if "do not fit" not in str(exc):
            raise
        raise CheckpointError(f"{exc}; a checkpoint of a wider teacher is pruned first (afm prune apply), "
                              "or train with its model") from None
    return {k: params[k] for k in params_like}, step_dir


def checkpoint_model_config(path: str) -> Any:
    """The ``ModelConfig`` a checkpoint was trained with (shapes and all run-time fields).

    ``path``: an ``afm.model`` checkpoint (``config.json``), or a training workdir /
    ``checkpoints/`` / step directory (the ``meta`` item the trainer saves)."""

    if is_model_checkpoint(path):
        return load_config(path)
    try:
        directory, step = resolve_init_from(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: not a model checkpoint (no config.json + params/) nor a training run "
            "(no checkpoints/<step>/); pass a workdir of `afm train` or its model/ directory"
        ) from None
    meta_file = directory / str(step) / "meta" / "metadata"
    if not meta_file.exists():
        raise FileNotFoundError(f"{directory / str(step)}: checkpoint has no meta item (written by an old afm?)")
    meta = json.loads(meta_file.read_text())
    # max_segments is a setting of the run that wrote it (its loader's cap), not the model's
    return ModelConfig.from_dict(meta["model"]).replace(max_segments=0)


def checkpoint_meta(path: str) -> tuple[dict[str, Any], Any]:
    """``(meta, step_dir)`` of a training run's latest (or given) step checkpoint."""
    directory, step = resolve_init_from(path)
    step_dir = directory / str(step)
    meta_file = step_dir / "meta" / "metadata"
    if not meta_file.exists():
        raise FileNotFoundError(f"{step_dir}: checkpoint has no meta item")
    return json.loads(meta_file.read_text()), step_dir


def read_run_params(step_dir: Any) -> dict[str, np.ndarray]:
    """Every parameter a run's step checkpoint holds (model and task extras, e.g. pruning
    scores), as float32 host arrays, without knowing the run's shapes in advance."""
    restored = restore_tree(fs.as_path(str(step_dir)) / "params")
    return {k: np.asarray(jax.device_get(v), np.float32) for k, v in restored.items()}
