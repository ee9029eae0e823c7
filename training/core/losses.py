"""Loss sums of the language-model tasks, from the one chunked scoring function.

The token scores themselves (``log p(target)``, argmax hits, ``logsumexp``, entropy) come
from :func:`afm.model.scoring.token_logprobs`, the chunked readout every consumer shares
(never float32 ``[B, T, V]`` logits). Here: how a task turns them into ``(sum, weight)``
pairs, so that microbatches and hosts add up exactly (see ``afm.training.core.step``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from afm.model.scoring import TokenScores

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
