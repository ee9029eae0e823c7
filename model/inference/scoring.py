"""The one log-probability function: token scores through the tied readout, in chunks.

Every consumer of ``log p(target_t | prefix)`` goes through :func:`token_logprobs` (from
final-norm features) or :func:`score` (from a model and token rows): the training losses
(pre-training, distillation, SFT), DPO/IPO's sequence log-probs, MDLOO's ratios and its
rollouts' log-probs under the policy and the reference, quantization's calibration loss,
``afm score`` and the evaluation engine's log-likelihoods.

At AFM's sizes the full logits do not fit: 4096 tokens x 100k vocabulary x 4 bytes is
1.6 GB per sequence, times the batch, plus their gradient. The readout walks the sequence
in chunks under ``lax.scan``; each chunk's logits are rematerialised in the backward pass
(``jax.checkpoint``), so at most one chunk of ``[B, chunk, V]`` float32 logits is alive
(the cost: the readout matmul runs once more in the backward pass, about ``2 V d`` FLOPs
per token, which MFU does not credit).

The chunk loop runs over the *unsharded* part of the sequence axis: under sequence
parallelism the tokens are first split into the mesh's sequence shards, then chunked
inside each, so no chunk boundary crosses devices.

A ``temperature`` scores the tempered distribution ``softmax(logits / T)``: the one a
sampler at ``T`` draws from, which online RL must score to stay on-policy. A ``top_k``
scores the sampler's top-k distribution (``afm.model.inference.sampling.top_k_filter``): the
tempered logits renormalised over the tokens at or above the k-th largest. A target
outside them (it can fall out once the policy moves) is scored over those tokens and
itself, a finite value whose gradient still pulls it, never -inf; for a token the
sampler drew (inside, by construction) it is exactly the sampler's log-probability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from afm.model.distributed import partitioning
from afm.model.distributed.partitioning import constrain
from afm.model.precision import to_compute

Array = jax.Array


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class TokenScores:
    """Per position (and per target, when several are scored): ``logprob`` of the target,
    whether the target is the ``argmax`` (its logit is the maximum), the ``logsumexp`` of the logits (a z-loss) and,
    when asked for, the ``entropy`` of the predicted distribution."""

    logprob: Array  # float32 [B, T] (or [B, T, K] for K targets per position)
    correct: Array  # bool, shaped like logprob
    logz: Array  # float32 [B, T]
    entropy: Array | None = None  # float32 [B, T]


def chunk_layout(t: int, requested: int) -> tuple[int, int]:
    """``(chunks, size)`` for ``t`` positions in chunks of at most ``requested``: as few
    chunks as the request allows (``ceil(t / requested)``), all of one size, the last one
    padded. A length with no good divisor (DPO's ``seq_len - 1``: 8191 is prime) keeps
    ``requested``-sized chunks instead of falling to chunks of one position."""
    if t < 1:
        raise ValueError(f"nothing to score: {t} positions")
    n = -(-t // max(1, min(requested, t)))
    return n, -(-t // n)


def _chunked_readout(hidden: Array, table: Array, xs: tuple[Array, ...], fn, *, logit_scale: float, chunk: int):
    """Run ``fn(logits [B, S, C, V] float32, *xs_chunk) -> tuple of [B, S, C, ...]`` over
    sequence chunks under ``lax.scan`` with the logits rematerialised in the backward
    pass; ``xs`` are per-position arrays ``[B, T, ...]``. Returns the outputs as
    ``[B, T, ...]``. The one chunk loop behind every readout-based quantity. Positions
    past the end of a shard (the last chunk's padding) are scored on zero features and
    dropped before anything is returned, so they add nothing to a value or a gradient."""
    b, t, d = hidden.shape
    shards = partitioning.shards("seq")
    if t % shards:
        shards = 1
    per_shard = t // shards
    n, size = chunk_layout(per_shard, chunk)
    pad = n * size - per_shard
    table = to_compute(table, hidden.dtype)

    def split(x: Array) -> Array:  # [B, T, ...] -> [n, B, shards, size, ...]
        x = x.reshape(b, shards, per_shard, *x.shape[2:])
        if pad:
            x = jnp.pad(x, [(0, 0), (0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 3))
        return jnp.moveaxis(x.reshape(b, shards, n, size, *x.shape[3:]), 2, 0)

    @jax.checkpoint
    def score_chunk(h_c: Array, *x_c: Array) -> tuple[Array, ...]:
        logits = jnp.einsum("bscd,vd->bscv", h_c, table, preferred_element_type=jnp.float32)
        logits = constrain(logits * logit_scale, ("batch", "seq", None, "vocab"))
        return fn(logits, *x_c)

    def body(carry: None, c: tuple[Array, ...]) -> tuple[None, tuple[Array, ...]]:
        return carry, score_chunk(*c)

    _, outs = jax.lax.scan(body, None, (split(hidden), *(split(x) for x in xs)))

    def back(x: Array) -> Array:  # [n, B, shards, size, ...] -> [B, T, ...]
        x = jnp.moveaxis(x, 0, 2).reshape(b, shards, n * size, *x.shape[4:])
        return x[:, :, :per_shard].reshape(b, t, *x.shape[3:])

    return tuple(back(o) for o in outs)


def token_logprobs(
    hidden: Array, table: Array, targets: Array, *, logit_scale: float, chunk: int = 1024,
    temperature: float = 1.0, entropy: bool = False, top_k: int = 0,
) -> TokenScores:
    """Scores of ``targets`` under ``softmax((hidden @ table.T) * logit_scale / temperature)``.

    ``hidden`` [B, T, D] are the final-norm features (compute dtype), ``table`` [V, D] the
    tied embedding (cast to the compute dtype once). ``targets`` is [B, T], or [B, T, K]
    to score K targets per position from one readout (distillation scores the label and
    the teacher's token together). Logits are float32 per chunk only.
    """
    if targets.ndim not in (2, 3):
        raise ValueError(f"targets must be [B, T] or [B, T, K], got shape {targets.shape}")
    many = targets.ndim == 3
    y = targets if many else targets[..., None]

    vocab = table.shape[0]
    restrict = 0 < top_k < vocab

    def fn(logits: Array, y_c: Array) -> tuple[Array, ...]:
        target = jnp.take_along_axis(logits, y_c, axis=-1)
        if restrict:  # the sampler's top-k support (ties at the k-th kept), and the target
            kth = jax.lax.top_k(logits, top_k)[0][..., -1:]
            logz = jax.nn.logsumexp(jnp.where(logits >= kth, logits, -jnp.inf), axis=-1)
            outside = jnp.where(target < kth, target, -jnp.inf)
            logz_t = jnp.logaddexp(logz[..., None], outside)
        else:
            logz = jax.nn.logsumexp(logits, axis=-1)
            logz_t = logz[..., None]
        # "the target is the greedy token" as "its logit is the maximum": one max reduce
        # (shared with the logsumexp) instead of an argmax, whose variadic (value, index)
        # reduce XLA:CPU runs as a scalar loop, 5x the rest of this function on CPU. The
        # two differ only when another token's logit equals the target's exactly.
        correct = target >= jnp.max(logits, axis=-1, keepdims=True)
        out = (target - logz_t, correct, logz)
        if entropy:  # H = logz - E_p[logit], over the scored distribution's support
            support = jnp.where(logits >= kth, logits, -jnp.inf) if restrict else logits
            p = jnp.exp(support - logz[..., None])
            out += (logz - jnp.sum(p * jnp.where(p > 0, logits, 0.0), axis=-1),)
        return out

    outs = _chunked_readout(hidden, table, (y,), fn, logit_scale=logit_scale / temperature, chunk=chunk)
    logprob, correct, logz = outs[:3]
    if not many:
        logprob, correct = logprob[..., 0], correct[..., 0]
    return TokenScores(logprob, correct, logz, outs[3] if entropy else None)


def token_argmax(hidden: Array, table: Array, *, logit_scale: float, chunk: int = 1024) -> Array:
    """The most likely next token per position, int32 [B, T] (a teacher's top-1 ids), with
    the same chunked readout: never float32 ``[B, T, V]``. Ties go to the lower id."""
    (top,) = _chunked_readout(
        jax.lax.stop_gradient(hidden), jax.lax.stop_gradient(table), (),
        lambda logits: (jnp.argmax(logits, axis=-1).astype(jnp.int32),),
        logit_scale=logit_scale, chunk=chunk,
    )
    return top


def score(
    model: Any, inputs: Array, targets: Array, *, positions: Array | None = None,
    segment_ids: Array | None = None, cache: Any = None, dropout_rng: Array | None = None,
    temperature: float = 1.0, chunk: int = 1024, entropy: bool = False, mask: Array | None = None,
    at: Array | None = None, top_k: int = 0,
) -> tuple[TokenScores, Any]:
    """The model's scores of ``targets`` given ``inputs`` (teacher-forced, one forward):
    :func:`token_logprobs` on the model's features, and the updated KV cache when one is
    given (``None`` otherwise); ``mask`` is an explicit attention mask (see
    ``Transformer.features``). ``at`` ([B, K] slots) scores only those positions and
    ``targets`` is then [B, K]: evaluation needs the continuations' few tokens, and the
    readout (``V x dim`` per token, the largest matmul of a small model) runs on them
    alone. Differentiable; jit it in the caller."""
    hidden, new_cache = model.features(inputs, positions=positions, segment_ids=segment_ids, cache=cache,
                                       dropout_rng=dropout_rng, mask=mask)
    if at is not None:
        hidden = jnp.take_along_axis(hidden, at[..., None].astype(jnp.int32), axis=1)
    scores = token_logprobs(hidden, model.embed[...], targets, logit_scale=model.cfg.logit_scale,
                            chunk=chunk, temperature=temperature, entropy=entropy, top_k=top_k)
    return scores, new_cache


@nnx.jit
def _score_ids(model: Any, tokens: Array) -> Array:
    return score(model, tokens[:, :-1], tokens[:, 1:])[0].logprob


def score_tokens(model: Any, ids: Sequence[int]) -> list[float]:
    """Per-token log-probabilities of ``ids[1:]`` (each given everything before it)."""
    ids = [int(i) for i in ids]
    if len(ids) < 2:
        raise ValueError("need at least two tokens to score (the first is only context)")
    bad = [i for i in ids if not 0 <= i < model.cfg.vocab_size]
    if bad:
        raise ValueError(f"token ids out of range [0, {model.cfg.vocab_size}): {bad[:5]}")
    if len(ids) > model.cfg.max_seq_len:
        raise ValueError(f"{len(ids)} tokens exceed max_seq_len {model.cfg.max_seq_len}")
    out = _score_ids(model, jnp.asarray([ids], jnp.int32))
    return [float(x) for x in np.asarray(out[0])]


__all__ = ["TokenScores", "chunk_layout", "score", "score_tokens", "token_argmax", "token_logprobs"]
