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
from afm.training.core.task import (
    Field,
    LossContext,
    LossOutput,
    ParamSpec,
    TaskBase,
    task_tokenizer,
)
from afm.training.data.preferences import GRADES, LEVELS, PairTaskInputs

from afm.config import load_config

SOFT_LABELS = (0.65, 0.75, 0.85, 0.95)  # negligibly, slightly, better, significantly (report)
PREFIX = "rm/"


@dataclass
class RewardModelOptions:
    tokenizer: str = ""
    lam: float = 0.1
    levels_p: tuple[float, float, float, float] = SOFT_LABELS
    head_hidden: int = 0  # 0: the model width


# -- the pieces, each testable on its own ------------------------------------------------------

def last_token_index(segment_ids: jax.Array) -> jax.Array:
    """Per row, the index of the last non-padding slot (segment id != 0), for left- or
    right-padded rows; 0 for an all-padding row."""
    real = segment_ids != 0
    t = segment_ids.shape[-1]
    from_end = jnp.argmax(real[..., ::-1], axis=-1)
    return jnp.where(real.any(-1), t - 1 - from_end, 0)


def segment_last_index(segment_ids: jax.Array, max_segments: int) -> tuple[jax.Array, jax.Array]:
    """For packed rows: the index of the last token of segments 1..max_segments per row
    ([B, S]) and whether that segment is present ([B, S])."""
    t = segment_ids.shape[-1]
    seg = jnp.arange(1, max_segments + 1)[None, :, None]  # [1, S, 1]
    hit = segment_ids[:, None, :] == seg  # [B, S, T]
    pos = jnp.where(hit, jnp.arange(t)[None, None, :], -1)
    last = pos.max(-1)
    return jnp.maximum(last, 0), last >= 0


def gather_last(hidden: jax.Array, index: jax.Array) -> jax.Array:
    """``hidden`` [B, T, D] at ``index`` [B] -> [B, D] float32."""
    return jnp.take_along_axis(hidden, index[:, None, None], axis=1)[:, 0].astype(jnp.float32)


def head_specs(dim: int, hidden: int) -> dict[str, ParamSpec]:
    """The linear reward head and the four MLP heads."""

    def zeros(shape):
        return lambda rng, _: jnp.zeros(shape, jnp.float32)

    def normal(shape, scale):
        return lambda rng, _: scale * jax.random.normal(rng, shape, jnp.float32)

    specs = {
        f"{PREFIX}reward/w": ParamSpec((dim,), (None,), zeros((dim,))),
        f"{PREFIX}reward/b": ParamSpec((), (), zeros(())),
    }
    for g in GRADES:
        specs |= {
            f"{PREFIX}{g}/w1": ParamSpec((dim, hidden), (None, None), normal((dim, hidden), dim ** -0.5)),
            f"{PREFIX}{g}/b1": ParamSpec((hidden,), (None,), zeros((hidden,))),
            f"{PREFIX}{g}/w2": ParamSpec((hidden, 3), (None, None), normal((hidden, 3), hidden ** -0.5)),
            f"{PREFIX}{g}/b2": ParamSpec((3,), (None,), zeros((3,))),
        }
    return specs


def apply_heads(heads: dict[str, jax.Array], features: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Reward [B] and grading logits [B, 4, 3] from last-token features [B, D]."""
    reward = features @ heads[f"{PREFIX}reward/w"] + heads[f"{PREFIX}reward/b"]
    logits = []
    for g in GRADES:
        h = jax.nn.gelu(features @ heads[f"{PREFIX}{g}/w1"] + heads[f"{PREFIX}{g}/b1"])
        logits.append(h @ heads[f"{PREFIX}{g}/w2"] + heads[f"{PREFIX}{g}/b2"])
    return reward, jnp.stack(logits, axis=1)


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

class RewardModelTask(PairTaskInputs, TaskBase):
    """See the module docstring."""

    name = "reward_model"
    artifact = "reward-model"

    def __init__(self, config: Any):
        super().__init__(config)
        self.options = load_config(RewardModelOptions, dict(config.task_options or {}))

    tokenizer = property(task_tokenizer)

    def batch_fields(self) -> dict[str, Field]:
        seq = {k: Field("int32") for k in ("chosen", "chosen_segments", "rejected", "rejected_segments")}
        seq |= {k: Field("float32") for k in ("chosen_response", "rejected_response")}
        return {**seq, "level": Field("int32", ("batch",)), "grades": Field("int32", ("batch", 8)),
                "weight": Field("float32", ("batch",))}

    def _pairs(self, paths: list[str]) -> Any:
        from afm.training.data.preferences import read_preferences, tokenize_pairs

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
        from afm.model.checkpoint import save_params

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


# -- export and scoring --------------------------------------------------------------------------

class RewardModelScorer:
    """A trained reward model as a function: ``scorer(prompts, responses)`` -> float32 [N],
    the reward of each (conversation, reply) pair. Rows are right-padded to a length bucket
    and scored ``batch_size`` at a time with a jitted forward."""

    def __init__(self, checkpoint: str | Path, tokenizer: Any = None, *, batch_size: int = 16,
                 max_len: int | None = None):
        from afm.model.checkpoint import load_model
        from afm.model.tokenizer import Tokenizer

        root = Path(checkpoint)
        meta_path = root / "reward_model.json"
        if not meta_path.is_file():
            raise FileNotFoundError(f"not a reward model (no reward_model.json): {root}")
        self.root = root
        self.meta = json.loads(meta_path.read_text())
        if tokenizer is None:
            tokenizer = self.meta.get("tokenizer")
        self.tokenizer = Tokenizer.load(tokenizer) if isinstance(tokenizer, (str, Path)) else tokenizer
        # float32 compute: a reward must not depend on the padding bucket it was scored in
        self.model, self.model_config = load_model(root / "model", dropout=0.0, dtype="float32")
        with np.load(root / "heads.npz") as z:
            self.heads = {PREFIX + k: jnp.asarray(z[k]) for k in z.files}
        self.batch_size = batch_size
        self.max_len = max_len or int(self.meta.get("seq_len") or self.model_config.max_seq_len)
        model = self.model

        @jax.jit
        def forward(heads, tokens, segments):
            positions = jnp.maximum(jnp.cumsum(segments != 0, axis=-1) - 1, 0).astype(jnp.int32)
            hidden, _ = model.features(tokens, positions=positions, segment_ids=segments)
            reward, logits = apply_heads(heads, gather_last(hidden, last_token_index(segments)))
            return reward, logits

        self._forward = forward

    def encode(self, prompt: list[dict], response: str, stopped: bool = True) -> list[int]:
        """The conversation with the reply; a reply cut at the token limit (``stopped``
        False) without the end-of-turn token, so it is scored as the unfinished text it is."""
        from afm.training.data.preferences import encode_response

        ids, _ = encode_response(self.tokenizer, list(prompt), response)
        if not stopped and ids and ids[-1] == self.tokenizer.end_id:
            ids = ids[:-1]
        return ids

    def score_with_gradings(self, prompts: Sequence[list[dict]], responses: Sequence[str],
                            stopped: Sequence[bool] | None = None):
        """Rewards (NaN for a conversation longer than the model's window: the reason is
        in ``last_reasons``) and the grading heads' classes."""
        from collections import Counter

        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
        flags = [True] * len(responses) if stopped is None else [bool(s) for s in stopped]
        rewards = np.full(len(prompts), np.nan, np.float32)
        grades = np.full((len(prompts), len(GRADES)), -1, np.int32)
        encoded = [self.encode(p, r, s) for p, r, s in zip(prompts, responses, flags, strict=True)]
        self.last_reasons = Counter()
        fits = [i for i, ids in enumerate(encoded) if len(ids) <= self.max_len]
        if len(fits) < len(encoded):
            self.last_reasons[f"longer than the reward model's window ({self.max_len} tokens)"] = len(encoded) - len(fits)
        for at in range(0, len(fits), self.batch_size):
            rows = fits[at : at + self.batch_size]
            chunk = [encoded[i] for i in rows]
            longest = max(len(x) for x in chunk)
            width = min(self.max_len, -(-longest // 16) * 16)
            tokens = np.zeros((self.batch_size, width), np.int32) + self.tokenizer.pad_id
            segments = np.zeros((self.batch_size, width), np.int32)
            for i, ids in enumerate(chunk):
                tokens[i, : len(ids)] = ids
                segments[i, : len(ids)] = 1
            reward, logits = self._forward(self.heads, tokens, segments)
            rewards[rows] = np.asarray(reward)[: len(chunk)]
            grades[rows] = np.asarray(jnp.argmax(logits, -1))[: len(chunk)]
        return rewards, grades

    def __call__(self, prompts: Sequence[list[dict]], responses: Sequence[str],
                 stopped: Sequence[bool] | None = None) -> np.ndarray:
        return self.score_with_gradings(prompts, responses, stopped)[0]

    def __repr__(self) -> str:
        return f"reward model {self.root}"


def pairwise_accuracy(scorer: RewardModelScorer, paths: Sequence[str]) -> dict[str, Any]:
    """Held-out pairwise accuracy of a scorer, overall and by preference level."""
    from afm.training.data.preferences import read_preferences

    read = read_preferences(list(paths))
    pairs = read.pairs
    r_c = scorer([p.prompt for p in pairs], [p.chosen for p in pairs])
    r_r = scorer([p.prompt for p in pairs], [p.rejected for p in pairs])
    levels = np.asarray([p.level for p in pairs])
    # A pair longer than the scorer's window cannot be scored (training drops such pairs as
    # too_long): counted, and left out of the accuracy.
    scorable = np.isfinite(r_c) & np.isfinite(r_r)
    correct = r_c > r_r
    out: dict[str, Any] = {"pairs": len(pairs), "rejects": len(read.rejects),
                           "unscored_pairs": int((~scorable).sum()),
                           "accuracy": float(correct[scorable].mean()) if scorable.any() else float("nan")}
    levels = np.where(scorable, levels, -1)
    for i, level in enumerate(LEVELS):
        at = levels == i
        out[f"accuracy/{level}"] = float(correct[at].mean()) if at.any() else None
        out[f"pairs/{level}"] = int(at.sum())
    return out


# -- the run ---------------------------------------------------------------------------------

def with_options(config: Any, **options: Any) -> Any:
    """``config`` with ``task_options`` updated (``None`` values leave an option alone)."""
    extra = {k: v for k, v in options.items() if v is not None}
    return dataclasses.replace(config, task_options={**dict(config.task_options or {}), **extra})


def run_rm(config: str | Path | Any, workdir: str | Path, *, data: Sequence[str], tokenizer: str,
           heldout: Sequence[str] = (), init_from: str | None = None, steps: int | None = None,
           overrides: Sequence[str] = (), quiet: bool = False) -> dict[str, Any]:
    """``afm rm train``: train the reward-model task, export ``workdir/reward-model`` and
    measure its held-out accuracy by preference level."""
    from afm.training.core.config import TrainConfig, get_train_config
    from afm.training.core.trainer import train
    from afm.training.data.preferences import usable_heldout_pairs

    cfg = config if isinstance(config, TrainConfig) else get_train_config(config, overrides, task="reward_model")
    cfg = with_options(cfg, tokenizer=str(tokenizer))
    ev = cfg.eval
    if heldout:
        n = usable_heldout_pairs(list(heldout))
        ev = dataclasses.replace(ev, heldout=list(heldout),
                                 heldout_batches=max(1, -(-n // cfg.data.global_batch_size)))
    elif ev.select_metric.startswith("eval/heldout/"):
        ev = dataclasses.replace(ev, select_metric="")
    changes: dict[str, Any] = {"data": dataclasses.replace(cfg.data, paths=list(data)), "eval": ev}
    if init_from:
        changes["init_from"] = str(init_from)
    cfg = dataclasses.replace(cfg, **changes)
    summary = train(cfg, workdir, steps=steps, quiet=quiet)
    out = summary["model_checkpoint"] or str(Path(workdir) / RewardModelTask.artifact)
    summary["reward_model"] = str(out)
    if heldout:
        scorer = RewardModelScorer(out, tokenizer)
        summary["heldout"] = pairwise_accuracy(scorer, list(heldout))
        (Path(workdir) / "rm-eval.json").write_text(json.dumps(summary["heldout"], indent=2) + "\n")
    return summary


__all__ = ["SOFT_LABELS", "RewardModelOptions", "RewardModelScorer", "RewardModelTask", "apply_heads",
           "run_rm", "with_options", "gather_last", "grading_loss", "head_specs", "last_token_index",
           "pairwise_accuracy", "reward_model_loss", "segment_last_index", "soft_label_ranking_loss"]
