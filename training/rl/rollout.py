"""Rollouts for online RL: K sampled responses per prompt, and their log-probabilities.

:func:`sample_groups` encodes each conversation once with the chat template, repeats it K
times and hands the whole ``n * K`` batch to the KV-cache sampler
(``afm.model.inference.sampling.sample``: one prefill, one decode step per token for every row, each
row stopping at the end token on its own), so a group costs one batched call rather than
``n * K`` single ones; the throughput (new tokens per second) is measured on every call.

:func:`pack_responses` lays prompt + response out as right-padded rows with a mask on the
response tokens, and :func:`response_logprobs` scores them teacher-forced (the same
forward the loss uses), so the policy's log-probs at the start of an iteration, the
reference model's and the ones being optimised come from one code path.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afm.finish import Reply, is_cut
from afm.model.inference.sampling import SampleOutput, sample
from afm.model.inference.scoring import score

Conversation = list[dict[str, Any]]


@dataclass
class Rollout:
    """``n * K`` responses, grouped: row ``i * K + j`` is the ``j``-th response to prompt ``i``."""

    prompts: list[Conversation]  # n conversations
    k: int
    prompt_ids: list[list[int]]  # n
    response_ids: list[list[int]]  # n * K, through the end token when one was produced
    texts: list[str]  # n * K decoded responses (without the end token)
    stopped: np.ndarray  # [n * K] bool: the row ended with a stop token
    # log-probs under the distribution each token was drawn from (temperature, top-p)
    sampler_logprobs: list[list[float]] = field(default_factory=list)
    seconds: float = 0.0
    stop_reasons: list[str] = field(default_factory=list)  # end_of_turn | end_of_text | length

    def finished(self) -> np.ndarray:
        """[n * K] bool: the reply ended on its own (not cut at ``max_new_tokens``, the one
        rule of ``afm.finish``): the only replies that may win a reranking or become a
        complete training turn."""

        return np.asarray([not is_cut(r) for r in self.stop_reasons], bool)

    def replies(self) -> list[Any]:
        """Every response as an ``afm.finish.Reply`` (its text and why it stopped)."""

        return [Reply(t, r) for t, r in zip(self.texts, self.stop_reasons, strict=True)]

    @property
    def new_tokens(self) -> int:
        return sum(len(r) for r in self.response_ids)

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else float("nan")

    def group_prompts(self) -> list[Conversation]:
        """The conversation of every response (each prompt repeated K times)."""
        return [p for p in self.prompts for _ in range(self.k)]


def sample_groups(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Conversation],
    *,
    k: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    batch_size: int | None = None,
    top_k: int = 0,
) -> Rollout:
    """K responses per conversation: one batched KV-cache sampling call (or calls of
    ``batch_size`` rows each, which bounds the cache's memory), each reply with why it
    stopped."""

    if k < 1:
        raise ValueError("k must be at least 1")
    prompt_ids = [tokenizer.encode_chat(list(p), add_generation_prompt=True)[0] for p in prompts]
    batch = [ids for ids in prompt_ids for _ in range(k)]
    step = batch_size or len(batch)
    start = time.perf_counter()
    out = SampleOutput(tokens=[], logprobs=[], stopped=[], stop_tokens=[])
    for at in range(0, len(batch), step):
        part = sample(model, batch[at:at + step], max_new_tokens=max_new_tokens, temperature=temperature,
                      top_p=top_p, stop_tokens=(tokenizer.end_id, tokenizer.eos_id), seed=seed + at,
                      pad_id=tokenizer.pad_id, top_k=top_k)
        out.tokens += part.tokens
        out.logprobs += part.logprobs
        out.model_logprobs += part.model_logprobs
        out.stopped += part.stopped
        out.stop_tokens += part.stop_tokens or []
    seconds = time.perf_counter() - start
    stops = {tokenizer.end_id, tokenizer.eos_id}
    # A model's embedding table may be padded past the tokenizer's vocabulary; an id there
    # has no text (it decodes to nothing, as control tokens do).
    known = getattr(tokenizer, "vocab_size", None) or model.cfg.vocab_size
    texts = [tokenizer.decode([t for t in row if t not in stops and t < known]).strip() for row in out.tokens]
    reasons = ["length" if t is None else "end_of_turn" if t == tokenizer.end_id else "end_of_text"
               for t in out.stop_tokens or [None] * len(out.tokens)]
    return Rollout(prompts=[list(p) for p in prompts], k=k, prompt_ids=prompt_ids,
                   response_ids=out.tokens, texts=texts, stopped=np.asarray(out.stopped, bool),
                   sampler_logprobs=out.logprobs, seconds=seconds, stop_reasons=reasons)


def pack_responses(
    prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], *, pad_id: int,
    width: int | None = None,
) -> dict[str, np.ndarray]:
    """Right-padded ``inputs``/``targets`` [B, T] (next-token pairs of prompt + response),
    ``response_mask`` (1 where the target is a response token), ``segment_ids`` and
    ``positions``. ``width`` defaults to the longest row rounded up to 16 (few shapes)."""
    if len(prompt_ids) != len(response_ids):
        raise ValueError("one prompt per response is needed")
    rows = [list(p) + list(r) for p, r in zip(prompt_ids, response_ids)]
    longest = max(len(r) for r in rows) - 1
    t = width or -(-longest // 16) * 16
    if longest > t:
        raise ValueError(f"a prompt + response of {longest + 1} tokens does not fit width {t + 1}")
    b = len(rows)
    inputs = np.full((b, t), pad_id, np.int32)
    targets = np.full((b, t), pad_id, np.int32)
    mask = np.zeros((b, t), np.float32)
    segs = np.zeros((b, t), np.int32)
    pos = np.zeros((b, t), np.int32)
    for i, (p, row) in enumerate(zip(prompt_ids, rows)):
        n = len(row) - 1
        inputs[i, :n] = row[:-1]
        targets[i, :n] = row[1:]
        mask[i, len(p) - 1:n] = 1.0
        segs[i, :n] = 1
        pos[i, :n] = np.arange(n)
    return {"inputs": inputs, "targets": targets, "response_mask": mask, "segment_ids": segs,
            "positions": pos}


def response_logprobs_of(model: Any, batch: dict[str, Any], temperature: float = 1.0, chunk: int = 1024,
                         top_k: int = 0) -> jax.Array:
    """log pi(target | prefix) per position [B, T] (float32), 0 off the response: the one
    chunked scoring function (``afm.model.inference.scoring.score``, never float32 ``[B, T, V]``).

    ``temperature`` != 1 scores the *tempered* policy softmax(logits / T), the distribution
    the sampler draws from at that temperature, and ``top_k`` its top-k restriction: RL
    that samples at T (with top-k) must score (and optimise) the same distribution, or its
    ratios and KL terms are off-policy."""

    scores, _ = score(model, batch["inputs"], batch["targets"], positions=batch["positions"],
                      segment_ids=batch["segment_ids"], temperature=temperature, chunk=chunk, top_k=top_k)
    return scores.logprob * batch["response_mask"]


def response_logprobs(model: Any, batch: dict[str, np.ndarray], temperature: float = 1.0, top_k: int = 0) -> np.ndarray:
    """:func:`response_logprobs_of` for a model outside a run (host arrays in and out)."""
    from flax import nnx

    graphdef, state = nnx.split(model)
    return np.asarray(_logprobs_jit(graphdef, state, {k: jnp.asarray(v) for k, v in batch.items()},
                                    jnp.float32(temperature), top_k))


def _logprobs_impl(graphdef: Any, state: Any, batch: dict[str, jax.Array], temperature: jax.Array,
                   top_k: int) -> jax.Array:
    from flax import nnx

    return response_logprobs_of(nnx.merge(graphdef, state), batch, temperature, top_k=top_k)


_logprobs_jit = jax.jit(_logprobs_impl, static_argnums=(0, 4))


__all__ = ["Rollout", "pack_responses", "response_logprobs", "response_logprobs_of", "sample_groups"]
