"""A trained model used as a teacher: its config and its parameters, from any afm checkpoint.

Pruning (``afm prune learn``), on-the-fly distillation (``task: distill`` with
``task_options.teacher``) and precomputed targets (``afm distill targets``) all start from
"the teacher": a run's ``workdir`` (its latest step checkpoint), a step directory, or an
``afm.model`` checkpoint (``workdir/model``, ``afm prune apply``'s output). This module is
the one reader of all three, so every command accepts the same paths and fails the same
way when a path holds no model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jax
from afm.training.core.checkpoint import is_model_checkpoint, resolve_init_from, restore_params_only

from afm import fs

Array = jax.Array


def checkpoint_model_config(path: str) -> Any:
    """The ``ModelConfig`` a checkpoint was trained with (shapes and all run-time fields).

    ``path``: an ``afm.model`` checkpoint (``config.json``), or a training workdir /
    ``checkpoints/`` / step directory (the ``meta`` item the trainer saves)."""
    from afm.model.checkpoint import load_config
    from afm.model.config import ModelConfig

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


@dataclass
class Teacher:
    """A frozen model beside the one being trained: its config, structure and source."""

    path: str
    config: Any  # ModelConfig (run-time fields as the caller wants them)
    parts: Any  # afm.training.core.engine.ModelParts of the teacher's shapes

    @classmethod
    def open(cls, path: str, **runtime: Any) -> Teacher:
        """The teacher at ``path``; ``runtime`` may change run-time fields (``max_seq_len``,
        ``attention_impl``, ``remat``...), never shapes."""
        from afm.training.core.engine import ModelParts

        if not str(path):
            raise ValueError("no teacher checkpoint given")
        if not fs.as_path(str(path)).exists():
            raise FileNotFoundError(f"teacher checkpoint not found: {path}")
        config = checkpoint_model_config(str(path))
        if runtime:
            config = config.replace(**runtime)
        return cls(str(path), config, ModelParts.build(config, seed=0))

    @property
    def keys(self) -> list[str]:
        return list(self.parts.layout.keys)

    def restore(self, like: dict[str, Any]) -> dict[str, Array]:
        """The teacher's parameters, read straight into the shardings/dtypes of ``like``
        (flat model paths -> abstract arrays)."""
        params, _ = restore_params_only(self.path, like, self.parts.layout)
        return params

    def model(self, params: dict[str, Array]) -> Any:
        """The teacher ``Transformer`` over flat ``params`` (model paths)."""
        return self.parts.build_model(params)


def same_shapes_but_ffn(student: Any, teacher: Any) -> list[str]:
    """The shape fields (other than ``ffn_dim``) in which two model configs differ: the
    teacher of a pruned or distilled student must share its vocabulary, width, heads and
    depth (the report prunes the FFN hidden dimension only, and top-1 targets are ids of
    one vocabulary)."""
    fields = ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim")
    return [f"{f} {getattr(teacher, f)} vs {getattr(student, f)}" for f in fields
            if getattr(teacher, f) != getattr(student, f)]


__all__ = ["Teacher", "checkpoint_meta", "checkpoint_model_config", "same_shapes_but_ffn"]
