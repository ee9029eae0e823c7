"""Log-probabilities of given tokens under the model (checks, evaluation, DPO-style losses)."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from afm.model.transformer import Transformer
from flax import nnx

Array = jax.Array


def token_logprobs(model: Transformer, tokens: Array, segment_ids: Array | None = None) -> Array:
    """float32 [B, T-1]: log p(tokens[:, t+1] | tokens[:, :t+1]). Differentiable."""
    logits = model(tokens[:, :-1], segment_ids=None if segment_ids is None else segment_ids[:, :-1])
    logp = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0]


@nnx.jit
def _score(model: Transformer, tokens: Array) -> Array:
    return token_logprobs(model, tokens)


def score_tokens(model: Transformer, ids: Sequence[int]) -> list[float]:
    """Per-token log-probabilities of ``ids[1:]`` (each given everything before it)."""
    ids = [int(i) for i in ids]
    if len(ids) < 2:
        raise ValueError("need at least two tokens to score (the first is only context)")
    bad = [i for i in ids if not 0 <= i < model.cfg.vocab_size]
    if bad:
        raise ValueError(f"token ids out of range [0, {model.cfg.vocab_size}): {bad[:5]}")
    if len(ids) > model.cfg.max_seq_len:
        raise ValueError(f"{len(ids)} tokens exceed max_seq_len {model.cfg.max_seq_len}")
    out = _score(model, jnp.asarray([ids], jnp.int32))
    return [float(x) for x in np.asarray(out[0])]
