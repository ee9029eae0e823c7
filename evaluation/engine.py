"""The native JAX inference engine behind ``--model afm``: packed scoring and KV-cache decoding.

It knows tokens, not text or tasks (``afm.evaluation.harness`` adapts it to lm-eval).
Two jobs:

* :meth:`InferenceEngine.score` — summed log-probability of each request's continuation and
  whether greedy decoding would have produced it. Requests are packed into fixed-shape
  rows (``afm.evaluation.packing``): one compiled program per length bucket.
* :meth:`InferenceEngine.generate` — batched decoding with a KV cache: one prefill, then
  jit-compiled chunks of ``chunk`` decode steps; between chunks the host checks stop
  *strings* (lm-eval's ``until``), which a token-level stop rule cannot see because a stop
  string may span tokens. Rows that hit a stop token or string are frozen.

Both run on a device mesh: the batch is split over the ``data``/``fsdp`` axes and the
parameters are placed with the training sharding rules (``afm.model.sharding``), so
a model trained on a mesh is evaluated on the same mesh.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from afm.evaluation.packing import (
    PackedBatch,
    ScoreRequest,
    bucket_for,
    fit_rows,
    length_buckets,
    pack_requests,
    rows_per_bucket,
)
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

Array = jax.Array
ProgressFn = Callable[[int], None]


@dataclass
class EngineStats:
    """Counters for the summary and the benchmark (real vs padded tokens, time per job)."""

    score_requests: int = 0
    score_batches: int = 0
    real_tokens: int = 0
    slot_tokens: int = 0
    generated_rows: int = 0
    generated_tokens: int = 0
    seconds: dict[str, float] = field(default_factory=lambda: {"score": 0.0, "generate": 0.0})
    shapes: set[tuple[str, tuple[int, ...]]] = field(default_factory=set)

    @property
    def packing_efficiency(self) -> float:
        return self.real_tokens / self.slot_tokens if self.slot_tokens else 0.0


# ------------------------------------------------------------------------ jitted kernels


@partial(jax.jit, static_argnames=("graphdef",))
def _score_rows(graphdef: Any, state: Any, tokens: Array, positions: Array, segments: Array,
                targets: Array) -> tuple[Array, Array]:
    """Per position: log p(target) (float32) and whether target is the argmax."""
    from afm.model.scoring import score

    scores, _ = score(nnx.merge(graphdef, state), tokens, targets, positions=positions, segment_ids=segments)
    return scores.logprob, scores.correct


@partial(jax.jit, static_argnames=("graphdef",))
def _score_shared(graphdef: Any, state: Any, prefix: Array, prefix_seg: Array, owner: Array,
                  suffix: Array, suffix_seg: Array, targets: Array) -> tuple[Array, Array]:
    """Score many continuations of few contexts: each context (left-padded ``prefix``) is
    run once into a KV cache, the cache rows are repeated for their continuations
    (``owner[c]`` = the prefix row of continuation ``c``), and only the (right-padded)
    ``suffix`` tokens run per continuation. Per suffix position: log p(target), greedy."""
    from afm.model.scoring import score
    from afm.model.transformer import KVCache

    model = nnx.merge(graphdef, state)
    width, steps = prefix.shape[1], suffix.shape[1]
    positions = jnp.maximum(jnp.cumsum(prefix_seg, axis=1) - 1, 0)
    cache = KVCache.create(model.cfg, prefix.shape[0], width + steps)
    _, cache = model.features(prefix, positions=positions, segment_ids=prefix_seg, cache=cache)
    cache = KVCache(k=jnp.take(cache.k, owner, axis=1), v=jnp.take(cache.v, owner, axis=1),
                    segment_ids=jnp.take(cache.segment_ids, owner, axis=0), index=cache.index)
    start = jnp.sum(prefix_seg, axis=1)[owner]
    pos = start[:, None] + jnp.arange(steps, dtype=jnp.int32)[None, :]
    scores, _ = score(model, suffix, targets, positions=pos, segment_ids=suffix_seg, cache=cache)
    return scores.logprob, scores.correct


@partial(jax.jit, static_argnames=("graphdef", "cache_len"))
def _prefill(graphdef: Any, state: Any, tokens: Array, segments: Array, *, cache_len: int):
    from afm.model.transformer import KVCache

    model = nnx.merge(graphdef, state)
    positions = jnp.maximum(jnp.cumsum(segments, axis=1) - 1, 0)
    cache = KVCache.create(model.cfg, tokens.shape[0], cache_len)
    hidden, cache = model.features(tokens, positions=positions, segment_ids=segments, cache=cache)
    last = model.readout(hidden[:, -1:])[:, 0]  # the prompt's last position only: no [B, T, V]
    return last.astype(jnp.float32), cache, positions[:, -1] + 1


@partial(jax.jit, static_argnames=("graphdef", "steps", "greedy"), donate_argnames=("cache",))
def _decode_chunk(graphdef: Any, state: Any, last: Array, cache: Any, next_pos: Array,
                  done: Array, key: Array, stop_ids: Array, temperature: Array, top_p: Array,
                  *, steps: int, greedy: bool):
    """``steps`` decode steps for every row; rows already ``done`` emit padding."""
    from afm.model.sampling import choose

    model = nnx.merge(graphdef, state)
    b = last.shape[0]

    def body(carry: tuple, _: Any) -> tuple:
        last, cache, pos, done, key = carry
        key, sub = jax.random.split(key)
        tok = choose(last, sub, greedy=greedy, temperature=temperature, top_p=top_p)
        tok = jnp.where(done, 0, tok)
        emitted = ~done
        done = done | jnp.isin(tok, stop_ids)
        logits, cache = model(tok[:, None], positions=pos[:, None],
                              segment_ids=jnp.ones((b, 1), jnp.int32), cache=cache)
        return (logits[:, 0].astype(jnp.float32), cache, pos + 1, done, key), (tok, emitted)

    carry = (last, cache, next_pos, done, key)
    (last, cache, next_pos, done, key), (toks, emitted) = jax.lax.scan(body, carry, None, length=steps)
    return toks.T, emitted.T, last, cache, next_pos, done, key


# ------------------------------------------------------------------------ the engine


class InferenceEngine:
    """A model placed on a mesh, ready to score and generate.

    ``tokens_per_batch`` sets the scoring batch (rows x bucket length); ``gen_batch`` the
    number of prompts decoded together; ``chunk`` the decode steps between stop checks.
    """

    def __init__(
        self,
        model: Any,
        *,
        mesh: Any | None = None,
        tokens_per_batch: int = 8192,
        gen_batch: int = 16,
        chunk: int = 16,
        smallest_bucket: int = 64,
        max_length: int | None = None,
    ) -> None:
        from afm.model.sharding import MeshConfig, make_mesh

        self.cfg = model.cfg
        self.max_length = int(max_length or model.cfg.max_seq_len)
        self.mesh = mesh if mesh is not None else make_mesh(MeshConfig(data=-1))
        self.data_width = int(self.mesh.shape["data"] * self.mesh.shape["fsdp"])
        self.graphdef, state = nnx.split(model)
        self.state = self._place(state)
        self.buckets = length_buckets(self.max_length, smallest_bucket)
        self.tokens_per_batch = tokens_per_batch
        self.rows_for = rows_per_bucket(self.buckets, tokens_per_batch, self.data_width)
        self.gen_batch = -(-max(1, gen_batch) // self.data_width) * self.data_width
        self.chunk = max(1, chunk)
        self.stats = EngineStats()
        self._batch_sharding = NamedSharding(self.mesh, PartitionSpec(("data", "fsdp"), None))

    @classmethod
    def from_checkpoint(cls, path: str, *, dtype: str = "float32", max_length: int | None = None,
                        **kwargs: Any) -> InferenceEngine:
        """Load an afm checkpoint (``afm.model.checkpoint``) with the compute ``dtype``."""
        from afm.model.checkpoint import load_model

        overrides: dict[str, Any] = {"dtype": dtype}
        if max_length:
            overrides["max_seq_len"] = int(max_length)
        model, _ = load_model(path, **overrides)
        return cls(model, **kwargs)

    def _place(self, state: Any) -> Any:
        """Parameters sharded by the training rules; other state replicated."""
        from afm.model.params import flatten_state, logical_axes
        from afm.model.sharding import param_shardings

        names = logical_axes(state)
        flat, layout = flatten_state(state)
        shapes = {k: tuple(v.shape) for k, v in flat.items()}
        shardings = param_shardings(shapes, {k: names.get(k) for k in flat}, self.mesh)
        placed = {k: jax.device_put(v, shardings[k]) for k, v in flat.items()}
        return layout.unflatten(placed)

    def _put(self, *arrays: np.ndarray) -> list[Array]:
        return [jax.device_put(a, self._batch_sharding) for a in arrays]

    # -- scoring ----------------------------------------------------------------------
    def check_length(self, n_tokens: int) -> None:
        if n_tokens > self.max_length:
            raise ValueError(f"{n_tokens} tokens exceed the model's context of {self.max_length}")

    def score(self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
              ) -> list[tuple[float, bool]]:
        """(sum of continuation log-probs, continuation is the greedy output) per request."""
        for r in requests:
            self.check_length(len(r.inputs))
        out: list[tuple[float, bool]] = [(0.0, False)] * len(requests)
        start = time.perf_counter()
        for batch in pack_requests(requests, self.buckets, self.rows_for, min_rows=self.data_width):
            self._score_batch(batch, out)
            if progress is not None:
                progress(len(batch.placements))
        self.stats.seconds["score"] += time.perf_counter() - start
        self.stats.score_requests += len(requests)
        return out

    def _score_batch(self, batch: PackedBatch, out: list[tuple[float, bool]]) -> None:
        self.stats.shapes.add(("score", batch.shape))
        arrays = self._put(batch.tokens, batch.positions, batch.segment_ids, batch.targets)
        logp, greedy = _score_rows(self.graphdef, self.state, *arrays)
        logp, greedy = np.asarray(logp), np.asarray(greedy)
        for i, row, at, n, scored in batch.placements:
            span = slice(at + n - scored, at + n)
            out[i] = (float(logp[row, span].astype(np.float64).sum()), bool(greedy[row, span].all()))
        self.stats.score_batches += 1
        self.stats.real_tokens += batch.real_tokens
        self.stats.slot_tokens += batch.tokens.size

    def score_shared(self, prefixes: Sequence[Sequence[int]],
                     items: Sequence[tuple[int, Sequence[int], Sequence[int]]],
                     progress: ProgressFn | None = None) -> list[tuple[float, bool]]:
        """Like :meth:`score` for continuations that share a context.

        ``items[i] = (prefix index, suffix inputs, targets)``: the model reads
        ``prefixes[p] + suffix`` and every suffix position is scored. Each prefix is
        computed once for all its continuations (multiple-choice items: one context, two to
        five choices), which is where most of the tokens of such tasks are.
        """
        members: dict[int, list[int]] = {}
        for i, (p, inp, tgt) in enumerate(items):
            if len(inp) != len(tgt) or not inp:
                raise ValueError("suffix inputs and targets must be non-empty and of equal length")
            self.check_length(len(prefixes[p]) + len(inp))
            members.setdefault(p, []).append(i)
        # Finer buckets than for packed rows: a padded prefix or suffix slot is pure waste here.
        prefix_buckets = length_buckets(self.max_length, 32)
        suffix_buckets = length_buckets(self.max_length, 4)
        keyed: dict[tuple[int, int, int], list[int]] = {}
        for p, idx in members.items():
            w = bucket_for(max(1, len(prefixes[p])), prefix_buckets)
            s = bucket_for(max(len(items[i][1]) for i in idx), suffix_buckets)
            k = 2 if len(idx) <= 2 else 4 if len(idx) <= 4 else len(idx)  # continuations per context
            keyed.setdefault((w, s, k), []).append(p)
        out: list[tuple[float, bool]] = [(0.0, False)] * len(items)
        start = time.perf_counter()
        for (w, s, k), groups in sorted(keyed.items()):
            n_groups = max(1, self.tokens_per_batch // (w + k * s))
            n_groups = -(-n_groups // self.data_width) * self.data_width
            for lo in range(0, len(groups), n_groups):
                batch = groups[lo:lo + n_groups]
                g = fit_rows(len(batch), n_groups, self.data_width)
                self._score_shared_batch(prefixes, items, members, batch, w, s, g, k * g, out)
                if progress is not None:
                    progress(sum(len(members[p]) for p in batch))
        self.stats.seconds["score"] += time.perf_counter() - start
        self.stats.score_requests += len(items)
        return out

    def _score_shared_batch(self, prefixes: Sequence[Sequence[int]], items: Sequence[tuple[int, Sequence[int], Sequence[int]]],
                            members: dict[int, list[int]], batch: list[int], w: int, s: int,
                            n_groups: int, n_rows: int, out: list[tuple[float, bool]]) -> None:
        prefix = np.zeros((n_groups, w), np.int32)
        prefix_seg = np.zeros((n_groups, w), np.int32)
        owner = np.zeros((n_rows,), np.int32)
        suffix = np.zeros((n_rows, s), np.int32)
        suffix_seg = np.zeros((n_rows, s), np.int32)
        targets = np.zeros((n_rows, s), np.int32)
        where: list[tuple[int, int, int]] = []
        row = 0
        for g, p in enumerate(batch):
            pre = prefixes[p]
            if pre:
                prefix[g, w - len(pre):] = pre
                prefix_seg[g, w - len(pre):] = 1
            for i in members[p]:
                _, inp, tgt = items[i]
                owner[row] = g
                suffix[row, :len(inp)] = inp
                suffix_seg[row, :len(inp)] = 1
                targets[row, :len(tgt)] = tgt
                where.append((i, row, len(inp)))
                row += 1
        self.stats.shapes.add(("score_shared", (n_groups, w, n_rows, s)))
        put = self._put
        pre_d, preseg_d = put(prefix, prefix_seg)
        suf_d, sufseg_d, tgt_d = put(suffix, suffix_seg, targets)
        owner_d = jax.device_put(owner, NamedSharding(self.mesh, PartitionSpec(("data", "fsdp"))))
        logp, greedy = _score_shared(self.graphdef, self.state, pre_d, preseg_d, owner_d, suf_d, sufseg_d, tgt_d)
        logp, greedy = np.asarray(logp), np.asarray(greedy)
        for i, r, n in where:
            out[i] = (float(logp[r, :n].astype(np.float64).sum()), bool(greedy[r, :n].all()))
        self.stats.score_batches += 1
        self.stats.real_tokens += int(prefix_seg.sum() + suffix_seg.sum())
        self.stats.slot_tokens += prefix.size + suffix.size

    # -- generation -------------------------------------------------------------------
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        stop_token_ids: Sequence[int] = (),
        is_finished: Callable[[int, list[int]], bool] | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        pad_id: int = 0,
        progress: ProgressFn | None = None,
    ) -> list[list[int]]:
        """New tokens per prompt, cut after the first stop token (which is dropped).

        ``is_finished(i, tokens_so_far)`` is asked between chunks for rows still running
        (stop strings); a row it accepts stops there. Its tokens may run a few past the stop
        string; the caller cuts the text (as lm-eval does for every backend).
        """
        if max_new_tokens <= 0:
            raise ValueError("max_new_tokens must be positive")
        if not (temperature >= 0 and math.isfinite(temperature)) or not 0 < top_p <= 1:  # nan fails both
            raise ValueError(f"need a finite temperature >= 0 and 0 < top_p <= 1, got {temperature} and {top_p}")
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        order = sorted(range(len(prompts)), key=lambda i: (-len(prompts[i]), i))
        results: list[list[int]] = [[] for _ in prompts]
        start = time.perf_counter()
        key = jax.random.key(seed)
        for s in range(0, len(order), self.gen_batch):
            idx = order[s:s + self.gen_batch]
            key, sub = jax.random.split(key)
            rows = self._generate_batch(
                [prompts[i] for i in idx], [i for i in idx], max_new_tokens, stop_token_ids,
                is_finished, temperature, top_p, sub, pad_id,
            )
            for i, toks in zip(idx, rows):
                results[i] = toks
            if progress is not None:
                progress(len(idx))
        self.stats.seconds["generate"] += time.perf_counter() - start
        self.stats.generated_rows += len(prompts)
        self.stats.generated_tokens += sum(len(r) for r in results)
        return results

    def _generate_batch(self, prompts: list[Sequence[int]], ids: list[int], max_new: int,
                        stop_ids: Sequence[int], is_finished: Callable[[int, list[int]], bool] | None,
                        temperature: float, top_p: float, key: Array, pad_id: int) -> list[list[int]]:
        longest = max(len(p) for p in prompts)
        width = bucket_for(longest, length_buckets(max(self.max_length, longest), 64))
        n_rows = self.gen_batch
        tokens = np.full((n_rows, width), pad_id, np.int32)
        segments = np.zeros((n_rows, width), np.int32)
        for r in range(n_rows):
            p = prompts[r] if r < len(prompts) else prompts[0][-1:]  # filler rows: one token
            tokens[r, width - len(p):] = p
            segments[r, width - len(p):] = 1
        steps = -(-max_new // self.chunk) * self.chunk
        self.stats.shapes.add(("generate", (n_rows, width, width + steps)))
        tok_d, seg_d = self._put(tokens, segments)
        last, cache, next_pos = _prefill(self.graphdef, self.state, tok_d, seg_d, cache_len=width + steps)
        done = np.zeros((n_rows,), bool)
        done[len(prompts):] = True
        stops = jnp.asarray(list(stop_ids) or [-1], jnp.int32)
        greedy = temperature <= 0.0
        temp = jnp.asarray(max(temperature, 1e-6), jnp.float32)
        topp = jnp.asarray(top_p, jnp.float32)
        out: list[list[int]] = [[] for _ in prompts]
        stop_set = set(stop_ids)
        produced = 0
        while produced < max_new and not done.all():
            toks, emitted, last, cache, next_pos, done_d, key = _decode_chunk(
                self.graphdef, self.state, last, cache, next_pos, jnp.asarray(done), key, stops,
                temp, topp, steps=self.chunk, greedy=greedy,
            )
            toks, emitted, done = np.asarray(toks), np.asarray(emitted), np.array(done_d)
            produced += self.chunk
            for r in range(len(prompts)):
                new = [int(t) for t, e in zip(toks[r], emitted[r]) if e]
                out[r].extend(new)
                if not done[r] and is_finished is not None and is_finished(ids[r], out[r]):
                    done[r] = True
        for r in range(len(prompts)):
            row = out[r][:max_new]
            cut = next((k for k, t in enumerate(row) if t in stop_set), None)
            out[r] = row if cut is None else row[:cut]
        return out
