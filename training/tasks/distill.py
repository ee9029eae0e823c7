"""Top-1 distillation (report §3.2.1): the student's targets mix the teacher's top-1 token
and the true label.

AFM-on-device's core pre-training "replac[es] the target labels with a convex combination
of the true labels and the teacher model's top-1 predictions (with 0.9 weight assigned to
the teacher's labels)". Per position ``t`` with label ``y_t`` and teacher token
``k_t = argmax_v p_teacher(v | x_<=t)`` the target distribution is

    q_t = alpha * onehot(k_t) + beta * onehot(y_t),    alpha = tw / (tw + lw), beta = lw / (tw + lw)

(``teacher_weight`` tw = 0.9, ``label_weight`` lw = 0.1 by default; any non-negative
pair, normalised), and the loss is the cross-entropy ``-alpha log p(k_t) - beta log p(y_t)``
summed over the loss mask. Where no teacher token exists (-1: the slot after a
document's EOS, padding) the target is the label alone. Both log-probabilities come from
one chunked readout (``losses.token_logprobs`` with two targets per position), so no
float32 ``[B, T, V]`` exists, and packing, segment ids and the loss mask are the
pre-training task's.

Where the teacher's tokens come from (``task_options``):

* ``teacher: <checkpoint>`` -- on the fly: the teacher's parameters are frozen extra
  parameters ``teacher/<path>`` of the run (sharded by their logical axes beside the
  student's, no gradient, no optimizer state; read once from the checkpoint at the start
  of a fresh run, then kept in the run's own checkpoints), and each step runs its forward
  pass on the same packed rows (same segment ids and positions) before the student's.
* no ``teacher`` -- precomputed: the token shards carry a per-token column (``column``,
  default ``teacher_top1``) written by ``afm distill targets``: one int32 per token instead
  of a teacher forward pass per step (cheaper at scale; the teacher then sees each
  document from its start, in windows of its context length).

Held-out evaluation reports the plain next-token cross-entropy on the labels as ``loss``
(comparable with any pre-training run; the distillation objective is not a quality
measure) and, where teacher tokens exist, ``teacher_agreement`` (student argmax == teacher
top-1). Training reports the distillation loss as ``loss`` and ``label_loss`` beside it.
The report does not distil in continued pre-training; the stages follow it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from afm.config import ConfigError
from afm.model.inference.scoring import token_argmax, token_logprobs
from afm.parquet import schema_of
from afm.training.compress.teacher import Teacher, same_shapes_but_ffn
from afm.training.core.task import Field, LossContext, LossOutput, ParamSpec, parse_task_options
from afm.training.data.loader import make_loader
from afm.training.data.shards import expand_paths
from afm.training.tasks.pretrain import PretrainTask

TEACHER = "teacher/"
Array = jax.Array


@dataclass
class DistillOptions:
    """``task_options`` of the distillation task."""

    teacher: str = ""  # checkpoint for top-1 on the fly; "" = precomputed `column` in the shards
    column: str = "teacher_top1"  # the per-token column `afm distill targets` writes
    teacher_weight: float = 0.9
    label_weight: float = 0.1

    def check(self) -> None:
        if self.teacher_weight < 0 or self.label_weight < 0 or self.teacher_weight + self.label_weight <= 0:
            raise ConfigError("task_options.teacher_weight and label_weight must be >= 0, not both 0")


def distillation_sums(
    label_logprob: Array, teacher_logprob: Array, teacher_ids: Array, weights: Array,
    *, teacher_weight: float, label_weight: float,
) -> tuple[Array, Array]:
    """``(sum, weight)`` of the top-1 distillation cross-entropy (module docstring):
    per position ``-(alpha log p(teacher token) + beta log p(label))`` where a teacher token
    exists (``teacher_ids >= 0``), ``-log p(label)`` elsewhere, weighted by ``weights``."""
    total = teacher_weight + label_weight
    alpha, beta = teacher_weight / total, label_weight / total
    has = teacher_ids >= 0
    per_token = jnp.where(has, -(alpha * teacher_logprob + beta * label_logprob), -label_logprob)
    w = weights.astype(jnp.float32)
    return jnp.sum(per_token * w), jnp.sum(w)


class DistillTask(PretrainTask):
    """Pre-training with targets 0.9 x teacher top-1 + 0.1 x label (module docstring)."""

    name = "distill"
    Options = DistillOptions

    def __init__(self, config: Any):
        self.options = parse_task_options(DistillOptions, config.task_options, self.name)
        if not self.options.teacher:  # precomputed: the loader packs the column beside tokens
            data = config.data
            if self.options.column not in data.aligned_columns:
                data = dataclasses.replace(data, aligned_columns=[*data.aligned_columns, self.options.column])
            config = dataclasses.replace(config, data=data)
        super().__init__(config)
        self.teacher: Any = None
        self._eval_has_teacher = True  # false when held-out shards carry no teacher column

    @property
    def on_the_fly(self) -> bool:
        return bool(self.options.teacher)

    # -- model and parameters ----------------------------------------------------------------
    def configure_model(self, model_config: Any) -> Any:
        model_config = super().configure_model(model_config)
        if self.on_the_fly:
            self.teacher = Teacher.open(
                self.options.teacher,
                max_seq_len=max(model_config.max_seq_len, self.config.data.seq_len),
                attention_impl=model_config.attention_impl, max_segments=model_config.max_segments,
                remat="none", scan_layers=model_config.scan_layers,
            )
            differ = same_shapes_but_ffn(model_config, self.teacher.config)
            if differ:
                raise ConfigError(f"teacher {self.options.teacher} does not fit this student: {', '.join(differ)} "
                                  "(teacher vs student; only ffn_dim may differ)")
        return model_config

    def extra_params(self, model_config: Any) -> dict[str, ParamSpec]:
        if not self.on_the_fly:
            return {}
        parts = self.teacher.parts

        def spec(key: str) -> ParamSpec:
            shape = parts.shapes[key]
            return ParamSpec(shape, parts.names[key] or (None,) * len(shape),
                             lambda rng, model_params, s=shape: jnp.zeros(s, jnp.float32), trainable=False)

        return {TEACHER + k: spec(k) for k in parts.layout.keys}

    def restore_extra_params(self, like: dict[str, Any]) -> dict[str, Array]:
        if not self.on_the_fly:
            return {}
        restored = self.teacher.restore({k[len(TEACHER):]: v for k, v in like.items() if k.startswith(TEACHER)})
        return {TEACHER + k: v for k, v in restored.items()}

    def is_trainable(self, path: str) -> bool:
        return not path.startswith(TEACHER)

    # -- data ----------------------------------------------------------------------------------
    def batch_fields(self) -> dict[str, Field]:
        fields = super().batch_fields()
        if not self.on_the_fly:
            fields[self.options.column] = Field("int32")
        return fields

    def make_eval_input(self, paths: list[str], *, vocab_size: int, process_index: int, process_count: int):
        """Held-out shards with the teacher column read it (for ``teacher_agreement``);
        plain token shards get -1 (no teacher token): the held-out loss is the label CE."""
        if self.on_the_fly:
            return super().make_eval_input(paths, vocab_size=vocab_size, process_index=process_index,
                                           process_count=process_count)
        column = self.options.column
        files = expand_paths(list(paths))
        has_column = all(column in schema_of(f).names for f in files)
        self._eval_has_teacher = has_column
        aligned = [c for c in self.config.data.aligned_columns if has_column or c != column]
        cfg = dataclasses.replace(self.config.data, paths=list(paths), prefetch=0, index_cache="",
                                  aligned_columns=aligned)

        loader = make_loader(cfg, vocab_size=vocab_size, process_index=process_index, process_count=process_count)
        return loader if has_column else _WithoutTeacher(loader, column)

    # -- loss ----------------------------------------------------------------------------------
    def teacher_ids(self, params: dict[str, Array], batch: dict[str, Array], ctx: LossContext) -> Array:
        """The teacher's top-1 token per position (int32 [B, T], -1 = none)."""
        if not self.on_the_fly:
            return batch[self.options.column]
        teacher = self.teacher.model({k: jax.lax.stop_gradient(params[TEACHER + k]) for k in self.teacher.keys})
        kwargs = {"positions": batch["positions"], "segment_ids": batch["segment_ids"]} if self._document else {}
        hidden, _ = teacher.features(batch["inputs"], **kwargs)
        return token_argmax(hidden, teacher.embed[...], logit_scale=self.teacher.config.logit_scale,
                            chunk=self.config.loss_chunk)

    def loss(self, params, batch, ctx: LossContext) -> LossOutput:
        teacher_ids = self.teacher_ids(params, batch, ctx)
        model = ctx.model(params)
        if self._document:
            hidden, _ = model.features(batch["inputs"], positions=batch["positions"], segment_ids=batch["segment_ids"])
        else:
            hidden, _ = model.features(batch["inputs"])
        targets = jnp.stack([batch["targets"], jnp.maximum(teacher_ids, 0)], axis=-1)
        scores = token_logprobs(hidden, model.embed[...], targets, logit_scale=ctx.model_config.logit_scale,
                                chunk=self.config.loss_chunk)
        label_lp, teacher_lp = scores.logprob[..., 0], scores.logprob[..., 1]
        w = batch["loss_mask"].astype(jnp.float32)
        has = (teacher_ids >= 0).astype(jnp.float32) * w
        label_loss = (-jnp.sum(label_lp * w), jnp.sum(w))
        metrics = {
            "accuracy": (jnp.sum(scores.correct[..., 0].astype(jnp.float32) * w), jnp.sum(w)),
            "teacher_agreement": (jnp.sum(scores.correct[..., 1].astype(jnp.float32) * has), jnp.sum(has)),
        }
        if not ctx.train:
            if not (self.on_the_fly or self._eval_has_teacher):
                del metrics["teacher_agreement"]  # plain held-out shards: nothing to agree with
            return LossOutput(label_loss, metrics)
        o = self.options
        loss = distillation_sums(label_lp, teacher_lp, teacher_ids, w,
                                 teacher_weight=o.teacher_weight, label_weight=o.label_weight)
        return LossOutput(loss, {**metrics, "label_loss": label_loss})


class _WithoutTeacher:
    """A held-out input without a teacher column: adds it as -1 everywhere."""

    def __init__(self, source: Any, column: str):
        self.source, self.column = source, column

    def __next__(self) -> dict[str, Any]:
        import numpy as np

        batch = next(self.source)
        batch[self.column] = np.full(batch["inputs"].shape, -1, np.int32)
        return batch

    def state(self) -> Any:
        return self.source.state()

    def describe(self) -> dict[str, Any]:
        return self.source.describe()

    def close(self) -> None:
        self.source.close()


__all__ = ["DistillOptions", "DistillTask", "distillation_sums"]
