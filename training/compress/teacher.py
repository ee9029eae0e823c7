"""A trained model used as a teacher: its config and its parameters, from any afm checkpoint.

Pruning (``afm prune learn``), on-the-fly distillation (``task: distill`` with
``task_options.teacher``) and precomputed targets (``afm distill targets``) all start from
"the teacher": a run's ``workdir`` (its latest step checkpoint), a step directory, or an
``afm.model`` checkpoint (``workdir/model``, ``afm prune apply``'s output). This module is
the one reader of all three, so every command accepts the same paths and fails the same
way when a path holds no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax

from afm import fs
from afm.model.parts import ModelParts
from afm.training.core.checkpoint import (
    checkpoint_meta,
    checkpoint_model_config,
    restore_params_only,
)

Array = jax.Array


@dataclass
class Teacher:
    """A frozen model beside the one being trained: its config, structure and source."""

    path: str
    config: Any  # ModelConfig (run-time fields as the caller wants them)
    parts: Any  # afm.model.parts.ModelParts of the teacher's shapes

    @classmethod
    def open(cls, path: str, **runtime: Any) -> Teacher:
        """The teacher at ``path``; ``runtime`` may change run-time fields (``max_seq_len``,
        ``attention_impl``, ``remat``...), never shapes."""

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
