"""Loss sums of the language-model tasks, from the one chunked scoring function.

The token scores themselves (``log p(target)``, argmax hits, ``logsumexp``, entropy) come
from :func:`afm.model.inference.scoring.token_logprobs`, the chunked readout every consumer shares
(never float32 ``[B, T, V]`` logits). Here: how a task turns them into ``(sum, weight)``
pairs, so that microbatches and hosts add up exactly (see ``afm.training.core.step``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from afm.model.inference.scoring import TokenScores, token_logprobs
from afm.training.core.task import LossOutput

Array = jax.Array


def cross_entropy_sums(scores: TokenScores, weights: Array) -> dict[str, tuple[Array, Array]]:
    """Weighted sums for next-token cross-entropy: ``loss`` (nats) and ``accuracy``, each
    as ``(sum, weight)`` so that microbatches and hosts add up exactly."""
    w = weights.astype(jnp.float32)
    total = jnp.sum(w)
    return {
        "loss": (-jnp.sum(scores.logprob * w), total),
        "accuracy": (jnp.sum(scores.correct.astype(jnp.float32) * w), total),
    }


def next_token_loss(params: dict[str, Array], batch: dict[str, Array], ctx: Any, *, chunk: int,
                    segments: bool, dropout: bool = False) -> Any:
    """The language-model loss every next-token task shares (pre-training, SFT): the model's
    features (with ``segment_ids`` / ``positions`` when rows are packed documents or
    conversations, dropout from ``ctx.rng`` when asked and training), the chunked readout,
    cross-entropy and accuracy over ``loss_mask`` as ``(sum, weight)`` pairs."""

    model = ctx.model(params)
    kwargs: dict[str, Any] = {}
    if segments:
        kwargs = {"positions": batch["positions"], "segment_ids": batch["segment_ids"]}
    if dropout and ctx.train:
        kwargs["dropout_rng"] = ctx.rng
    hidden, _ = model.features(batch["inputs"], **kwargs)
    scores = token_logprobs(hidden, model.embed[...], batch["targets"],
                            logit_scale=ctx.model_config.logit_scale, chunk=chunk)
    sums = cross_entropy_sums(scores, batch["loss_mask"])
    return LossOutput(loss=sums["loss"], metrics={"accuracy": sums["accuracy"]})
