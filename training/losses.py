"""Token log-probabilities through the tied readout without float32 ``[B, T, V]`` logits.

Every language-model loss here (next-token cross-entropy, distillation on a teacher's
top-1 token, SFT, the sequence log-probabilities DPO/IPO/MDLOO compare) needs the same
thing: ``log p(target_t | prefix)`` per position. At AFM's sizes the full logits do not
fit: 4096 tokens x 100k vocabulary x 4 bytes is 1.6 GB per sequence, times the batch,
plus their gradient. :func:`token_logprobs` walks the sequence in chunks under
``lax.scan``; each chunk's logits are rematerialised in the backward pass
(``jax.checkpoint``), so at most one chunk of ``[B, chunk, V]`` float32 logits is alive
(the cost: the readout matmul runs once more in the backward pass, about ``2 V d`` FLOPs
per token, which MFU does not credit).

The chunk loop runs over the *unsharded* part of the sequence axis: under sequence
parallelism the tokens are first split into the mesh's sequence shards, then chunked
inside each, so no chunk boundary crosses devices.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from afm.model import partitioning
from afm.model.partitioning import constrain

Array = jax.Array


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class TokenScores:
    """Per position: ``logprob`` of the target, whether the target is the ``argmax``, and
    the ``logsumexp`` of the logits (for a z-loss or entropy terms)."""

    logprob: Array  # float32 [B, T]
    correct: Array  # bool [B, T]
    logz: Array  # float32 [B, T]


def _chunk_size(t: int, requested: int) -> int:
    """The largest divisor of ``t`` that is at most ``requested``."""
    size = max(1, min(requested, t))
    while t % size:
        size -= 1
    return size


def token_logprobs(
    hidden: Array, table: Array, targets: Array, *, logit_scale: float, chunk: int = 1024
) -> TokenScores:
    """Scores of ``targets`` [B, T] under ``(hidden @ table.T) * logit_scale``.

    ``hidden`` [B, T, D] are the final-norm features (compute dtype), ``table`` [V, D] the
    tied embedding (cast to the compute dtype once). Logits are float32 per chunk only.
    """
    b, t, d = hidden.shape
    shards = partitioning.shards("seq")
    if t % shards:
        shards = 1
    per_shard = t // shards
    size = _chunk_size(per_shard, chunk)
    n = per_shard // size
    table = table.astype(hidden.dtype)

    # [B, T, D] -> [n, B, shards, size, D]: scan over n, the sequence shards stay put.
    h = jnp.moveaxis(hidden.reshape(b, shards, n, size, d), 2, 0)
    y = jnp.moveaxis(targets.reshape(b, shards, n, size), 2, 0)

    @jax.checkpoint
    def score(h_c: Array, y_c: Array) -> tuple[Array, Array, Array]:
        logits = jnp.einsum("bscd,vd->bscv", h_c, table, preferred_element_type=jnp.float32)
        logits = constrain(logits * logit_scale, ("batch", "seq", None, "vocab"))
        logz = jax.nn.logsumexp(logits, axis=-1)
        target = jnp.take_along_axis(logits, y_c[..., None], axis=-1)[..., 0]
        correct = jnp.argmax(logits, axis=-1) == y_c
        return target - logz, correct, logz

    def body(carry: None, xs: tuple[Array, Array]) -> tuple[None, tuple[Array, Array, Array]]:
        return carry, score(*xs)

    _, (logprob, correct, logz) = jax.lax.scan(body, None, (h, y))

    def back(x: Array) -> Array:  # [n, B, shards, size] -> [B, T]
        return jnp.moveaxis(x, 0, 2).reshape(b, t)

    return TokenScores(back(logprob), back(correct), back(logz))


def cross_entropy_sums(scores: TokenScores, weights: Array) -> dict[str, tuple[Array, Array]]:
    """Weighted sums for next-token cross-entropy: ``loss`` (nats) and ``accuracy``, each
    as ``(sum, weight)`` so that microbatches and hosts add up exactly."""
    w = weights.astype(jnp.float32)
    total = jnp.sum(w)
    return {
        "loss": (-jnp.sum(scores.logprob * w), total),
        "accuracy": (jnp.sum(scores.correct.astype(jnp.float32) * w), total),
    }
