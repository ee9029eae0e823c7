"""The reward model (report §4.3, App. E.1) as a task of the one trainer, and its scorer.

Architecture: the transformer's final-norm hidden state at the *last non-padding token*
of prompt + reply -> one linear head (the reward r) and four MLP heads (3-class logits
for instruction following, verbosity, truthfulness, harmlessness). The heads are the
task's extra parameters (``rm/...``); the whole transformer trains too.

Loss (eq. 3-5), per pair, with ``d = r(chosen) - r(rejected)`` and p_level =
0.95 / 0.85 / 0.75 / 0.65 for significantly / better / slightly / negligibly better::

    L_rank = -p log s(d) - (1 - p) log s(-d)
    L_regu = sum over the 4 gradings of CE(u(chosen), z_c) + CE(u(rejected), z_r)
    L      = L_rank + lambda * L_regu

A missing grading (-1) adds no term. Returned as sums over pairs with weight = pairs.
Metrics: pairwise accuracy (r_c > r_r) overall and per preference level, the mean
margin, and each head's accuracy, so ``eval/heldout/accuracy/<level>`` is the held-out
accuracy by preference level.

Task options (``task_options``): ``tokenizer`` (a directory, required), ``lam``
(lambda, default 0.1), ``levels_p`` (the four targets), ``head_hidden`` (MLP width,
default: the model width), ``heldout`` is the trainer's ``eval.heldout``.

The exported reward model (``afm rm train`` writes ``workdir/reward-model``) is an
``afm.model`` checkpoint in ``model/`` plus ``heads.npz`` and ``reward_model.json``;
:class:`RewardModelScorer` loads it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afm.model.checkpoints.checkpoint import save_params
from afm.training.core.task import (
    Field,
    LossContext,
    LossOutput,
    ParamSpec,
    TaskBase,
    task_tokenizer,
)
from afm.training.data.preferences import (
    GRADES,
    LEVELS,
    PairTaskInputs,
    read_preferences,
    tokenize_pairs,
    usable_heldout_pairs,
)
from afm.training.rl.reward_model import (
    PREFIX,
    RewardModelScorer,
    apply_heads,
    gather_last,
    head_specs,
    last_token_index,
    pairwise_accuracy,
)

SOFT_LABELS = (0.65, 0.75, 0.85, 0.95)  # negligibly, slightly, better, significantly (report)


@dataclass
class RewardModelOptions:
    tokenizer: str = ""
    lam: float = 0.1
    levels_p: tuple[float, float, float, float] = SOFT_LABELS
    head_hidden: int = 0  # 0: the model width


# -- the pieces, each testable on its own ------------------------------------------------------

def soft_label_ranking_loss(r_chosen: jax.Array, r_rejected: jax.Array, p: jax.Array) -> jax.Array:
    """Eq. 3 per pair: ``-p log s(d) - (1-p) log s(-d)``, ``d = r_c - r_r``."""
    d = r_chosen - r_rejected
    return -p * jax.nn.log_sigmoid(d) - (1.0 - p) * jax.nn.log_sigmoid(-d)


def grading_loss(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Sum over the heads of the cross-entropy of logits [B, 4, 3] against labels [B, 4]
    (-1: no label, no term) -> [B]."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(logp, jnp.maximum(labels, 0)[..., None], axis=-1)[..., 0]
    return -jnp.sum(jnp.where(labels >= 0, picked, 0.0), axis=-1)


def reward_model_loss(r_c, r_r, u_c, u_r, level, grades, lam: float,
                      levels_p: Sequence[float] = SOFT_LABELS) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Eq. 5 per pair: (total, ranking, regularisation)."""
    p = jnp.asarray(levels_p, jnp.float32)[level]
    rank = soft_label_ranking_loss(r_c, r_r, p)
    regu = grading_loss(u_c, grades[:, :4]) + grading_loss(u_r, grades[:, 4:])
    return rank + lam * regu, rank, regu


# -- the task -----------------------------------------------------------------------------------

def heldout_prepared(config: Any, select: tuple[str, str] | None = None) -> Any:
    """A pair task's held-out evaluation: its batch count covers every usable held-out pair;
    ``select`` (metric, mode) picks the best checkpoint by it; without held-out pairs there is
    nothing to select by, so a held-out selection metric is turned off."""

    ev = config.eval
    if select is not None:
        ev = dataclasses.replace(ev, select_metric=select[0], select_mode=select[1])
    if ev.heldout:
        n = usable_heldout_pairs(list(ev.heldout))
        ev = dataclasses.replace(ev, heldout_batches=max(1, -(-n // config.data.global_batch_size)))
    elif ev.select_metric.startswith("eval/heldout/"):
        ev = dataclasses.replace(ev, select_metric="")
    return dataclasses.replace(config, eval=ev)


class RewardModelTask(PairTaskInputs, TaskBase):
    """See the module docstring."""

    name = "reward_model"
    artifact = "reward-model"
    Options = RewardModelOptions

    @classmethod
    def prepare_config(cls, config: Any, workdir: str) -> Any:
        """Held-out evaluation over every usable held-out pair (its batch count computed here);
        without held-out pairs, selection by a held-out metric is off."""
        return heldout_prepared(config)

    def finish_run(self, workdir: str, result: dict[str, Any]) -> dict[str, Any]:
        """The exported reward model's path, and its held-out pairwise accuracy by preference
        level (``workdir/rm-eval.json``) when the run has held-out pairs."""
        out = result.get("model_checkpoint") or str(Path(workdir) / self.artifact)
        result = {**result, "reward_model": str(out), "rejects": self.rejects_summary()}
        if self.config.eval.heldout:
            scorer = RewardModelScorer(out, self.options.tokenizer)
            result["heldout"] = pairwise_accuracy(scorer, list(self.config.eval.heldout))
            (Path(workdir) / "rm-eval.json").write_text(json.dumps(result["heldout"], indent=2) + "\n")
        return result

    tokenizer = property(task_tokenizer)

    def batch_fields(self) -> dict[str, Field]:
        seq = {k: Field("int32") for k in ("chosen", "chosen_segments", "rejected", "rejected_segments")}
        seq |= {k: Field("float32") for k in ("chosen_response", "rejected_response")}
        return {**seq, "level": Field("int32", ("batch",)), "grades": Field("int32", ("batch", 8)),
                "weight": Field("float32", ("batch",))}

    def _pairs(self, paths: list[str]) -> Any:
        read = read_preferences(paths)
        return tokenize_pairs(read.pairs, self.tokenizer, self.config.data.seq_len, read.rejects)

    def extra_params(self, model_config: Any) -> dict[str, ParamSpec]:
        return head_specs(model_config.dim, self.options.head_hidden or model_config.dim)

    def score(self, params: dict[str, Any], tokens, segments, ctx: LossContext, train: bool):
        """Rewards [B] and grading logits [B, 4, 3] of right- or left-padded rows."""
        model = ctx.model(params)
        positions = jnp.maximum(jnp.cumsum(segments != 0, axis=-1) - 1, 0).astype(jnp.int32)
        hidden, _ = model.features(tokens, positions=positions, segment_ids=segments,
                                   dropout_rng=ctx.rng if train else None)
        feats = gather_last(hidden, last_token_index(segments))
        return apply_heads({k: v for k, v in params.items() if k.startswith(PREFIX)}, feats)

    def loss(self, params: dict[str, Any], batch: dict[str, Any], ctx: LossContext) -> LossOutput:
        b = batch["chosen"].shape[0]
        tokens = jnp.concatenate([batch["chosen"], batch["rejected"]])
        segments = jnp.concatenate([batch["chosen_segments"], batch["rejected_segments"]])
        reward, logits = self.score(params, tokens, segments, ctx, ctx.train)
        r_c, r_r, u_c, u_r = reward[:b], reward[b:], logits[:b], logits[b:]
        total, rank, regu = reward_model_loss(r_c, r_r, u_c, u_r, batch["level"], batch["grades"],
                                              self.options.lam, self.options.levels_p)
        w = batch["weight"]
        pairs = jnp.sum(w)
        correct = (r_c > r_r).astype(jnp.float32) * w
        metrics = {"accuracy": (jnp.sum(correct), pairs), "ranking_loss": (jnp.sum(rank * w), pairs),
                   "grading_loss": (jnp.sum(regu * w), pairs), "margin": (jnp.sum((r_c - r_r) * w), pairs)}
        for i, level in enumerate(LEVELS):
            at = (batch["level"] == i).astype(jnp.float32) * w
            metrics[f"accuracy/{level}"] = (jnp.sum(correct * at), jnp.sum(at))
        for j, g in enumerate(GRADES):
            for u, labels in ((u_c, batch["grades"][:, j]), (u_r, batch["grades"][:, 4 + j])):
                has = (labels >= 0).astype(jnp.float32) * w
                hit = (jnp.argmax(u[:, j], -1) == labels).astype(jnp.float32)
                key = f"head_accuracy/{g}"
                s, n = metrics.get(key, (0.0, 0.0))
                metrics[key] = (s + jnp.sum(hit * has), n + jnp.sum(has))
        return LossOutput(loss=(jnp.sum(total * w), pairs), metrics=metrics)


    def export(self, directory: Path, params: dict[str, Any], model_config: Any, info: dict[str, Any]) -> Path:
        """The reward model (``workdir/reward-model`` at the end, ``workdir/best`` for the
        best evaluation): ``model/`` (``afm.model`` format) + ``heads.npz`` +
        ``reward_model.json``, what :class:`RewardModelScorer` loads."""

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        save_params(self.model_params(params, model_config), out / "model", model_config, overwrite=True)
        heads = {k[len(PREFIX):]: np.asarray(jax.device_get(v)) for k, v in params.items() if k.startswith(PREFIX)}
        np.savez(out / "heads.npz", **heads)
        opts = self.options
        meta = {"format": "afm-reward-model-1", "tokenizer": opts.tokenizer, "lam": opts.lam,
                "levels_p": list(opts.levels_p), "gradings": list(GRADES), "seq_len": self.config.data.seq_len,
                **info}
        (out / "reward_model.json").write_text(json.dumps(meta, indent=2) + "\n")
        return out


__all__ = ["SOFT_LABELS", "RewardModelOptions", "RewardModelTask", "grading_loss", "heldout_prepared",
           "reward_model_loss", "soft_label_ranking_loss"]
