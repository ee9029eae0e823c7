"""The trained reward model as a reward: its heads over the transformer's features and the
scorer that loads an exported reward model (report §4.3, App. E.1).

Architecture: the transformer's final-norm hidden state at the *last non-padding token*
of prompt + reply -> one linear head (the reward r) and four MLP heads (3-class logits
for instruction following, verbosity, truthfulness, harmlessness). The reward-model task
(``afm.training.tasks.reward_model``) trains these heads with the transformer; the scorer
here is what every consumer of a reward model calls (online RL, best-of-n, iTeC, the
evaluation's reward-model judge), so it sits below the tasks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afm.model.checkpoints.checkpoint import load_model
from afm.model.text.tokenizer import Tokenizer
from afm.training.core.task import ParamSpec
from afm.training.data.preferences import GRADES, LEVELS, encode_response, read_preferences

PREFIX = "rm/"


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


class RewardModelScorer:
    """A trained reward model as a function: ``scorer(prompts, responses)`` -> float32 [N],
    the reward of each (conversation, reply) pair. Rows are right-padded to a length bucket
    and scored ``batch_size`` at a time with a jitted forward."""

    def __init__(self, checkpoint: str | Path, tokenizer: Any = None, *, batch_size: int = 16,
                 max_len: int | None = None):
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


__all__ = ["PREFIX", "RewardModelScorer", "apply_heads", "gather_last", "head_specs", "last_token_index",
           "pairwise_accuracy", "segment_last_index"]
