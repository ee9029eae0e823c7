"""Batched, jit-compiled sampling with a KV cache: greedy, temperature, top-k and top-p.

Prompts of different lengths are LEFT-padded (pad slots get segment id 0, so real tokens
never attend to them) to a length bucket (a multiple of 16, so a few shapes cover many
batches and compiles are reused). One prefill call fills the cache, then a
``lax.while_loop`` decodes one token per step for the whole batch and stops early once
every row has produced a stop token.

A draw at temperature ``T`` with ``top_k`` and ``top_p`` is from ``softmax(logits / T)``
restricted to the ``top_k`` most likely tokens (ties at the k-th logit kept), then to the
top-p nucleus of what is left, renormalised: the order Hugging Face and vLLM apply them
in. ``afm.model.inference.scoring.token_logprobs(..., top_k=)`` scores the same distribution, so
online RL that samples with top-k stays on-policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from afm.model.transformer import KVCache, Transformer

Array = jax.Array
_BUCKET = 16


@dataclass
class SampleOutput:
    """Per row: the new tokens (through the first stop token, which is included), their
    log-probabilities, whether a stop token ended the row (False: it ran out of
    ``max_new_tokens``) and the stop token itself (``None`` for a row cut at the limit).

    ``logprobs`` are under the distribution each token was *drawn from*: the logits divided
    by the temperature, then restricted to the top-k tokens and the top-p nucleus and
    renormalised; the
    behaviour policy an importance ratio or a KL estimate needs. Greedy decoding (T = 0)
    draws from no distribution; its ``logprobs`` are the model's at T = 1.
    ``model_logprobs`` are always the model's own (T = 1, no top-p), e.g. for a
    perplexity of what was sampled."""

    tokens: list[list[int]]
    logprobs: list[list[float]]
    stopped: list[bool]
    stop_tokens: list[int | None] | None = None
    model_logprobs: list[list[float]] = field(default_factory=list)


def top_p_filter(logits: Array, top_p: Array) -> Array:
    """Logits with everything outside the nucleus set to -inf.

    The nucleus is the smallest set of most likely tokens whose probability reaches
    ``top_p``; the most likely token is always kept.
    """
    order = jnp.argsort(-logits, axis=-1)
    sorted_logits = jnp.take_along_axis(logits, order, axis=-1)
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs  # mass strictly before each token
    keep_sorted = before < top_p
    keep_sorted = keep_sorted.at[..., 0].set(True)
    keep = jnp.zeros_like(keep_sorted).at[
        jnp.arange(logits.shape[0])[:, None], order
    ].set(keep_sorted)
    return jnp.where(keep, logits, -jnp.inf)


def top_k_filter(logits: Array, top_k: int) -> Array:
    """Logits with everything below the ``top_k``-th largest set to -inf (a token tied
    with the k-th is kept); ``top_k`` 0 (or the whole vocabulary) keeps every token."""
    if top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    kth = jax.lax.top_k(logits, top_k)[0][..., -1:]
    return jnp.where(logits >= kth, logits, -jnp.inf)


def sampling_logits(logits: Array, *, temperature: Array, top_p: Array, top_k: int = 0) -> Array:
    """The logits of the distribution a sampler at ``temperature``, ``top_k`` and
    ``top_p`` draws from (float32 [B, V]): ``logits / T``, everything outside the top-k
    tokens and then the nucleus at -inf. Its log-softmax is the log-probability of a
    drawn token."""
    return top_p_filter(top_k_filter(logits / temperature, top_k), top_p)


def choose(
    logits: Array, key: Array, *, greedy: bool, temperature: Array, top_p: Array, top_k: int = 0
) -> Array:
    """Next token per row from float32 logits [B, V]."""
    return choose_with_logprob(logits, key, greedy=greedy, temperature=temperature, top_p=top_p, top_k=top_k)[0]


def choose_with_logprob(
    logits: Array, key: Array, *, greedy: bool, temperature: Array, top_p: Array, top_k: int = 0
) -> tuple[Array, Array, Array]:
    """Next token per row, its log-probability under the distribution it was drawn from
    (see :class:`SampleOutput`) and under the model (T = 1, no top-p)."""
    model_lp = jax.nn.log_softmax(logits, axis=-1)
    if greedy:
        tok = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        lp = jnp.take_along_axis(model_lp, tok[:, None], axis=-1)[:, 0]
        return tok, lp, lp
    scaled = sampling_logits(logits, temperature=temperature, top_p=top_p, top_k=top_k)
    tok = jax.random.categorical(key, scaled, axis=-1).astype(jnp.int32)
    drawn_lp = jnp.take_along_axis(jax.nn.log_softmax(scaled, axis=-1), tok[:, None], axis=-1)[:, 0]
    return tok, drawn_lp, jnp.take_along_axis(model_lp, tok[:, None], axis=-1)[:, 0]


@partial(jax.jit, static_argnames=("graphdef", "max_new_tokens", "greedy", "top_k"))
def _sample_jit(
    graphdef: Any,
    state: Any,
    tokens: Array,
    segments: Array,
    stop_ids: Array,
    key: Array,
    temperature: Array,
    top_p: Array,
    *,
    max_new_tokens: int,
    greedy: bool,
    top_k: int = 0,
) -> tuple[Array, Array, Array, Array]:
    model = nnx.merge(graphdef, state)
    b, p = tokens.shape
    positions = jnp.maximum(jnp.cumsum(segments, axis=1) - 1, 0)
    cache = KVCache.create(model.cfg, b, p + max_new_tokens)
    hidden, cache = model.features(tokens, positions=positions, segment_ids=segments, cache=cache)
    last = model.readout(hidden[:, -1:])[:, 0]  # the prompt's last position only: no [B, T, V]
    next_pos = positions[:, -1] + 1

    out = jnp.zeros((b, max_new_tokens), jnp.int32)
    out_lp = jnp.zeros((b, max_new_tokens), jnp.float32)
    out_model_lp = jnp.zeros((b, max_new_tokens), jnp.float32)
    done = jnp.zeros((b,), bool)

    def cond(carry: tuple) -> Array:
        step, *_, done = carry
        return (step < max_new_tokens) & ~jnp.all(done)

    def body(carry: tuple) -> tuple:
        step, last, cache, next_pos, key, out, out_lp, out_model_lp, done = carry
        key, sub = jax.random.split(key)
        tok, lp, model_lp = choose_with_logprob(last, sub, greedy=greedy, temperature=temperature, top_p=top_p,
                                                top_k=top_k)
        tok = jnp.where(done, 0, tok)
        out = out.at[:, step].set(tok)
        out_lp = out_lp.at[:, step].set(jnp.where(done, 0.0, lp))
        out_model_lp = out_model_lp.at[:, step].set(jnp.where(done, 0.0, model_lp))
        done = done | jnp.isin(tok, stop_ids)
        logits, cache = model(
            tok[:, None],
            positions=next_pos[:, None],
            segment_ids=jnp.ones((b, 1), jnp.int32),
            cache=cache,
        )
        return step + 1, logits[:, 0], cache, next_pos + 1, key, out, out_lp, out_model_lp, done

    carry = (jnp.zeros((), jnp.int32), last, cache, next_pos, key, out, out_lp, out_model_lp, done)
    _, _, _, _, _, out, out_lp, out_model_lp, done = jax.lax.while_loop(cond, body, carry)
    return out, out_lp, out_model_lp, done


def sample_program(model: Transformer, rows: int, prompt_len: int, *, max_new_tokens: int,
                   greedy: bool = False, top_k: int = 0) -> Any:
    """The sampler's compiled-to-be program for ``rows`` prompts of ``prompt_len`` tokens
    (rounded to the length bucket), lowered on abstract inputs: ``model`` may be abstract
    (``nnx.eval_shape``). For memory plans: nothing runs, nothing is allocated."""
    width = max(prompt_len, min(-(-prompt_len // _BUCKET) * _BUCKET, model.cfg.max_seq_len - max_new_tokens))
    graphdef, state = nnx.split(model)
    ints = jax.ShapeDtypeStruct((rows, width), jnp.int32)
    f32 = jax.ShapeDtypeStruct((), jnp.float32)
    return _sample_jit.lower(graphdef, state, ints, ints, jax.ShapeDtypeStruct((2,), jnp.int32),
                             jax.eval_shape(lambda: jax.random.key(0)), f32, f32,
                             max_new_tokens=max_new_tokens, greedy=greedy, top_k=top_k)


@partial(jax.jit, static_argnames=("graphdef", "k"))
def _first_token_jit(graphdef: Any, state: Any, tokens: Array, segments: Array, *, k: int) -> tuple[Array, Array]:
    model = nnx.merge(graphdef, state)
    positions = jnp.maximum(jnp.cumsum(segments, axis=1) - 1, 0)
    hidden, _ = model.features(tokens, positions=positions, segment_ids=segments)
    logprobs = jax.nn.log_softmax(model.readout(hidden[:, -1:])[:, 0], axis=-1)
    top, ids = jax.lax.top_k(logprobs, k)
    return ids, top


def first_token_logprobs(model: Transformer, prompt_tokens: Sequence[Sequence[int]], k: int,
                         pad_id: int = 0) -> list[list[tuple[int, float]]]:
    """Per prompt, the ``k`` most likely next tokens and their log-probabilities under the
    model (T = 1): what an OpenAI-compatible server's ``top_logprobs`` gives for a reply's
    first token (a judge read by its log-probs, e.g. AlpacaEval's weighted annotator)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    tokens, segments = _pad_prompts(prompt_tokens, pad_id, model.cfg.max_seq_len)
    graphdef, state = nnx.split(model)
    ids, top = _first_token_jit(graphdef, state, jnp.asarray(tokens), jnp.asarray(segments),
                                k=min(k, model.cfg.vocab_size))
    return [list(zip(map(int, i), map(float, t), strict=True)) for i, t in zip(np.asarray(ids), np.asarray(top))]


def _pad_prompts(
    prompts: Sequence[Sequence[int]], pad_id: int, max_width: int
) -> tuple[np.ndarray, np.ndarray]:
    if not prompts:
        raise ValueError("generate: no prompts given")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("generate: every prompt needs at least one token (e.g. BOS)")
    longest = max(len(p) for p in prompts)
    # Round up to the bucket, but never past what the context window allows.
    width = max(longest, min(-(-longest // _BUCKET) * _BUCKET, max_width))
    tokens = np.full((len(prompts), width), pad_id, np.int32)
    segments = np.zeros((len(prompts), width), np.int32)
    for i, p in enumerate(prompts):
        tokens[i, width - len(p):] = p
        segments[i, width - len(p):] = 1
    return tokens, segments


def sample(
    model: Transformer,
    prompt_tokens: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    stop_tokens: Sequence[int] = (),
    seed: int = 0,
    pad_id: int = 0,
    top_k: int = 0,
) -> SampleOutput:
    """Continue every prompt; ``temperature == 0`` is greedy (top_k and top_p are then
    ignored); ``top_k`` 0 keeps every token."""
    if max_new_tokens <= 0:
        raise ValueError("max_new_tokens must be positive")
    if not (temperature >= 0 and math.isfinite(temperature)) or not 0 < top_p <= 1:  # nan fails both
        raise ValueError(f"need a finite temperature >= 0 and 0 < top_p <= 1, got {temperature} and {top_p}")
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
        raise ValueError(f"top_k must be an integer >= 0 (0: off), got {top_k!r}")
    vocab = model.cfg.vocab_size
    for p in prompt_tokens:
        bad = [t for t in p if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"prompt token ids out of range [0, {vocab}): {bad[:5]}")
    limit = model.cfg.max_seq_len
    tokens, segments = _pad_prompts(prompt_tokens, pad_id, limit - max_new_tokens)
    if tokens.shape[1] + max_new_tokens > limit:
        raise ValueError(
            f"longest prompt ({tokens.shape[1]}) + max_new_tokens ({max_new_tokens}) exceeds "
            f"max_seq_len {limit}"
        )
    graphdef, state = nnx.split(model)
    stops = jnp.asarray(list(stop_tokens) or [-1], jnp.int32)
    out, out_lp, out_model_lp, _ = _sample_jit(
        graphdef,
        state,
        jnp.asarray(tokens),
        jnp.asarray(segments),
        stops,
        jax.random.key(seed),
        jnp.asarray(max(temperature, 1e-6), jnp.float32),
        jnp.asarray(top_p, jnp.float32),
        max_new_tokens=max_new_tokens,
        greedy=temperature == 0.0,
        top_k=0 if temperature == 0.0 else int(top_k),
    )
    out_np, lp_np, model_lp_np = np.asarray(out), np.asarray(out_lp), np.asarray(out_model_lp)
    stop_set = set(stop_tokens)
    result = SampleOutput(tokens=[], logprobs=[], stopped=[], stop_tokens=[])
    for row, lps, model_lps in zip(out_np.tolist(), lp_np.tolist(), model_lp_np.tolist()):
        end = next((i + 1 for i, t in enumerate(row) if t in stop_set), None)
        result.stopped.append(end is not None)
        result.stop_tokens.append(None if end is None else row[end - 1])
        end = len(row) if end is None else end
        result.tokens.append(row[:end])
        result.logprobs.append(lps[:end])
        result.model_logprobs.append(model_lps[:end])
    return result


def generate(
    model: Transformer,
    prompt_tokens: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    stop_tokens: Sequence[int] = (),
    seed: int = 0,
    pad_id: int = 0,
    top_k: int = 0,
) -> list[list[int]]:
    """New tokens for every prompt (through the first stop token, included)."""
    return sample(
        model,
        prompt_tokens,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        stop_tokens=stop_tokens,
        seed=seed,
        pad_id=pad_id,
        top_k=top_k,
    ).tokens
