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
    """Per position (and per target, when several are scored): ``logprob`` of the target,
    whether the target is the ``argmax``, and the ``logsumexp`` of the logits (for a
    z-loss or entropy terms)."""

    logprob: Array  # float32 [B, T] (or [B, T, K] for K targets per position)
    correct: Array  # bool, shaped like logprob
    logz: Array  # float32 [B, T]


def _chunk_size(t: int, requested: int) -> int:
    """The largest divisor of ``t`` that is at most ``requested``."""
    size = max(1, min(requested, t))
    while t % size:
        size -= 1
    return size


def _chunked_readout(hidden: Array, table: Array, xs: tuple[Array, ...], fn, *, logit_scale: float, chunk: int):
    """Run ``fn(logits [B, S, C, V] float32, *xs_chunk) -> tuple of [B, S, C, ...]`` over
    sequence chunks under ``lax.scan`` with the logits rematerialised in the backward
    pass; ``xs`` are per-position arrays ``[B, T, ...]``. Returns the outputs as
    ``[B, T, ...]``. The one chunk loop behind every readout-based quantity."""
    b, t, d = hidden.shape
    shards = partitioning.shards("seq")
    if t % shards:
        shards = 1
    per_shard = t // shards
    size = _chunk_size(per_shard, chunk)
    n = per_shard // size
    table = table.astype(hidden.dtype)

    def split(x: Array) -> Array:  # [B, T, ...] -> [n, B, shards, size, ...]
        return jnp.moveaxis(x.reshape(b, shards, n, size, *x.shape[2:]), 2, 0)

    @jax.checkpoint
    def score(h_c: Array, *x_c: Array) -> tuple[Array, ...]:
        logits = jnp.einsum("bscd,vd->bscv", h_c, table, preferred_element_type=jnp.float32)
        logits = constrain(logits * logit_scale, ("batch", "seq", None, "vocab"))
        return fn(logits, *x_c)

    def body(carry: None, c: tuple[Array, ...]) -> tuple[None, tuple[Array, ...]]:
        return carry, score(*c)

    _, outs = jax.lax.scan(body, None, (split(hidden), *(split(x) for x in xs)))

    def back(x: Array) -> Array:  # [n, B, shards, size, ...] -> [B, T, ...]
        return jnp.moveaxis(x, 0, 2).reshape(b, t, *x.shape[4:])

    return tuple(back(o) for o in outs)


def token_logprobs(
    hidden: Array, table: Array, targets: Array, *, logit_scale: float, chunk: int = 1024
) -> TokenScores:
    """Scores of ``targets`` under ``(hidden @ table.T) * logit_scale``.

    ``hidden`` [B, T, D] are the final-norm features (compute dtype), ``table`` [V, D] the
    tied embedding (cast to the compute dtype once). ``targets`` is [B, T], or [B, T, K]
    to score K targets per position from one readout (distillation scores the label and
    the teacher's token together). Logits are float32 per chunk only.
    """
    if targets.ndim not in (2, 3):
        raise ValueError(f"targets must be [B, T] or [B, T, K], got shape {targets.shape}")
    many = targets.ndim == 3
    y = targets if many else targets[..., None]

    def fn(logits: Array, y_c: Array) -> tuple[Array, Array, Array]:
        logz = jax.nn.logsumexp(logits, axis=-1)
        target = jnp.take_along_axis(logits, y_c, axis=-1)
        correct = jnp.argmax(logits, axis=-1)[..., None] == y_c
        return target - logz[..., None], correct, logz

    logprob, correct, logz = _chunked_readout(hidden, table, (y,), fn, logit_scale=logit_scale, chunk=chunk)
    if not many:
        logprob, correct = logprob[..., 0], correct[..., 0]
    return TokenScores(logprob, correct, logz)


def token_argmax(hidden: Array, table: Array, *, logit_scale: float, chunk: int = 1024) -> Array:
    """The most likely next token per position, int32 [B, T] (a teacher's top-1 ids), with
    the same chunked readout: never float32 ``[B, T, V]``. Ties go to the lower id."""
    (top,) = _chunked_readout(
        jax.lax.stop_gradient(hidden), jax.lax.stop_gradient(table), (), lambda logits: (jnp.argmax(logits, axis=-1).astype(jnp.int32),),
        logit_scale=logit_scale, chunk=chunk,
    )
    return top


def cross_entropy_sums(scores: TokenScores, weights: Array) -> dict[str, tuple[Array, Array]]:
    """Weighted sums for next-token cross-entropy: ``loss`` (nats) and ``accuracy``, each
    as ``(sum, weight)`` so that microbatches and hosts add up exactly."""
    w = weights.astype(jnp.float32)
    total = jnp.sum(w)
    return {
        "loss": (-jnp.sum(scores.logprob * w), total),
        "accuracy": (jnp.sum(scores.correct.astype(jnp.float32) * w), total),
    }
