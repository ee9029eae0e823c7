"""The native JAX inference engine behind ``--model afm``: packed scoring and KV-cache decoding.

It knows tokens, not text or tasks (``afm.evaluation.harness`` adapts it to lm-eval).
Two jobs:

* :meth:`InferenceEngine.score` — summed log-probability of each request's continuation and
  whether greedy decoding would have produced it. Requests are packed into fixed-shape
  rows (``afm.evaluation.packing``): one compiled program per length bucket.
* :meth:`InferenceEngine.generate` — batched decoding with a KV cache: one prefill of the
  prompts packed several to a row, each row's cache gathered from it, then jit-compiled
  chunks of ``chunk`` decode steps; between chunks the host checks stop *strings*
  (lm-eval's ``until``), which a token-level stop rule cannot see because a stop string
  may span tokens. Rows that hit a stop token or string are frozen.

Both run on a device mesh: the batch is split over the ``data``/``fsdp`` axes and the
parameters are placed with the training sharding rules (``afm.model.distributed.sharding``), so
a model trained on a mesh is evaluated on the same mesh; without one, a large model
decodes on CPU with its weights split (:func:`decoding_mesh_config`). The compiled
programs go through ``afm.evaluation.executables``, so a new process loads them without tracing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from afm.evaluation.executables import call
from afm.evaluation.packing import (
    PackedBatch,
    ScoreRequest,
    TreeBatch,
    bucket_for,
    fit_rows,
    length_buckets,
    pack_prompts,
    pack_requests,
    pack_trees,
    rows_per_bucket,
)
from afm.model.checkpoints.checkpoint import load_model
from afm.model.config import flops_per_token, param_counts
from afm.model.distributed.sharding import MeshConfig, make_mesh, param_shardings
from afm.model.inference.sampling import choose
from afm.model.inference.scoring import score
from afm.model.params import flatten_state, logical_axes
from afm.model.transformer import KVCache

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
def _score_rows(state: Any, tokens: Array, positions: Array, segments: Array, at: Array,
                targets: Array, *, graphdef: Any) -> tuple[Array, Array]:
    """At the slots ``at`` [B, K]: log p(target) (float32) and whether target is the argmax."""

    scores, _ = score(nnx.merge(graphdef, state), tokens, targets, positions=positions, segment_ids=segments,
                      at=at)
    return scores.logprob, scores.correct


def tree_mask(segments: Array, branches: Array) -> Array:
    """Boolean [B, 1, T, T] for tree-packed rows (``afm.evaluation.packing.TreeBatch``):
    key slot <= query slot, the same segment, and the key in the context (branch 0) or in
    the query's own branch. Padding (segment 0, branch 0) sees only padding."""
    slots = jnp.arange(segments.shape[1], dtype=jnp.int32)
    causal = slots[None, :] <= slots[:, None]
    same = segments[:, :, None] == segments[:, None, :]
    visible = (branches[:, None, :] == 0) | (branches[:, None, :] == branches[:, :, None])
    return (causal[None] & same & visible)[:, None]


@partial(jax.jit, static_argnames=("graphdef",))
def _score_trees(state: Any, tokens: Array, positions: Array, segments: Array, branches: Array,
                 at: Array, targets: Array, *, graphdef: Any) -> tuple[Array, Array]:
    """At the slots ``at`` [B, K] of tree-packed rows: log p(target) (float32) and whether it
    is the argmax."""

    scores, _ = score(nnx.merge(graphdef, state), tokens, targets, positions=positions,
                      mask=tree_mask(segments, branches), at=at)
    return scores.logprob, scores.correct


def scored_slots(spans: Sequence[tuple[int, int, int]], rows: int, length: int
                 ) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """The slots a batch scores, as ``at`` [rows, K] for the kernels, and where each span's
    scores land in the ``[rows, K]`` output: ``spans[j] = (row, start, n)`` ->
    ``(row, k, n)``. ``K`` is the fullest row's count rounded up to ``length`` / 8, / 4,
    / 2 or ``length``: a handful of shapes per bucket, and the readout runs on the
    continuations, not on every context token (unused entries point at slot 0)."""
    used = np.zeros(rows, np.int64)
    for row, _, n in spans:
        used[row] += n
    need = int(used.max()) if rows else 0
    k = next((length // d for d in (8, 4, 2) if length // d >= max(need, 1)), length)
    at = np.zeros((rows, k), np.int32)
    fill = np.zeros(rows, np.int64)
    where: list[tuple[int, int, int]] = []
    for row, start, n in spans:
        f = int(fill[row])
        at[row, f:f + n] = np.arange(start, start + n)
        where.append((row, f, n))
        fill[row] = f + n
    return at, where


@partial(jax.jit, static_argnames=("graphdef", "cache_len"))
def _prefill(state: Any, tokens: Array, positions: Array, segments: Array, source: Array,
             last: Array, *, graphdef: Any, cache_len: int):
    """Prompts packed several to a row (``tokens`` [P, W]) run once; then each generation
    row's cache is gathered from the packed one, left-padded: ``source[r, j]`` is the
    packed (row, slot) whose keys/values fill slot ``j`` of row ``r`` (-1: padding), and
    ``last[r]`` the slot of its prompt's last token, whose logits start decoding."""

    model = nnx.merge(graphdef, state)
    packed = KVCache.create(model.cfg, tokens.shape[0], tokens.shape[1])  # square: attention by blocks
    hidden, packed = model.features(tokens, positions=positions, segment_ids=segments, cache=packed)
    valid = source[..., 0] >= 0
    rows, slots = jnp.maximum(source[..., 0], 0), jnp.maximum(source[..., 1], 0)
    keep = valid[None, :, :, None, None]
    cache = KVCache(
        k=jnp.where(keep, packed.k[:, rows, slots], 0), v=jnp.where(keep, packed.v[:, rows, slots], 0),
        segment_ids=valid.astype(jnp.int32), index=jnp.asarray(source.shape[1], jnp.int32),
    ).grown(cache_len)
    logits = model.readout(hidden[last[:, 0], last[:, 1]][:, None])[:, 0]  # no [B, T, V]
    return logits.astype(jnp.float32), cache


@partial(jax.jit, static_argnames=("graphdef", "steps", "greedy"), donate_argnames=("cache",))
def _decode_chunk(state: Any, last: Array, cache: Any, next_pos: Array, done: Array, key: Array,
                  stop_ids: Array, temperature: Array, top_p: Array, *, graphdef: Any, steps: int,
                  greedy: bool):
    """``steps`` decode steps for every row; rows already ``done`` emit padding."""

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


def default_tokens_per_batch() -> int:
    """Scoring batch size in tokens: 4,096 on CPU, where smaller batches stay in cache
    (``afm bench eval``'s items, tiny model, 2 devices on a quiet 2-core box: 1,590-1,640
    requests/s vs 1,355 at 8,192 and 1,405-1,472 at 2,048), 8,192 on accelerators."""
    return 4096 if jax.default_backend() == "cpu" else 8192


def prompt_width(longest: int, max_length: int) -> int:
    """The row width a batch of prompts is left-padded to: a multiple of 64 up to 512
    tokens (the prefill pads at most 63 slots: GSM8K's longest prompts then take 320
    slots, not 384, and the prefill is most of a generation pass), then the 1.5x buckets
    (fewer programs for long prompts)."""
    if longest <= 512:
        return -(-longest // 64) * 64
    return bucket_for(longest, length_buckets(max(max_length, longest), 64, midpoints=True))


@dataclass
class _InFlight:
    """A dispatched scoring batch: device results not yet read, and where they go."""

    logp: Array
    greedy: Array
    owners: list[int]
    where: list[tuple[int, int, int]]


# ------------------------------------------------------------------------ the engine


ENGINE_PACKAGES = ("afm.model", "afm.evaluation")
"""The packages whose code the engine's programs run (part of a stored program's key)."""

TENSOR_PARALLEL_DECODE_BYTES = 64 << 20
"""Parameters (in the compute dtype) above which CPU generation splits the weights over
the cores instead of the rows: a decode step reads every weight for a few rows, so a
model far larger than the caches is bound by memory bandwidth, and split weights halve
what each core reads (``100m``, 450 MB, two cores: 16 decode steps 0.71 s split vs
1.12 s by rows); a small one is bound by per-step overheads, which splitting adds to
(``tiny``: 468 vs 355 requests/s by rows)."""


def decoding_mesh_config(cfg: Any, n_devices: int, backend: str) -> Any:
    """The mesh generation runs on when the caller names none: rows over every device,
    except a CPU model above :data:`TENSOR_PARALLEL_DECODE_BYTES`, whose heads (and FFN
    and vocabulary, by the training sharding rules) are split over as many devices as
    the key/value heads allow."""

    weight_bytes = param_counts(cfg)["total"] * jnp.dtype(cfg.dtype).itemsize
    tensor = math.gcd(n_devices, cfg.n_kv_heads)
    if backend != "cpu" or tensor == 1 or weight_bytes < TENSOR_PARALLEL_DECODE_BYTES:
        return MeshConfig(data=-1)
    return MeshConfig(data=-1, tensor=tensor)


@dataclass
class Placement:
    """The parameters on one mesh, and how that mesh splits a batch's rows."""

    mesh: Any
    state: Any
    data_width: int
    rows: NamedSharding

    @classmethod
    def on(cls, mesh: Any, state: Any) -> Placement:
        """Parameters sharded by the training rules; other state replicated."""

        names = logical_axes(state)
        flat, layout = flatten_state(state)
        shapes = {k: tuple(v.shape) for k, v in flat.items()}
        shardings = param_shardings(shapes, {k: names.get(k) for k in flat}, mesh)
        placed = layout.unflatten({k: jax.device_put(v, shardings[k]) for k, v in flat.items()})
        width = int(mesh.shape["data"] * mesh.shape["fsdp"])
        return cls(mesh, placed, width, NamedSharding(mesh, PartitionSpec(("data", "fsdp"), None)))

    def put(self, *arrays: np.ndarray) -> list[Array]:
        """Host arrays onto the mesh, rows split over the data axes."""
        return [jax.device_put(a, self.rows) for a in arrays]


class InferenceEngine:
    """A model placed on a mesh, ready to score and generate.

    ``tokens_per_batch`` sets the scoring batch (rows x bucket length; default
    :func:`default_tokens_per_batch`); ``gen_batch`` the number of prompts decoded
    together; ``chunk`` the decode steps between stop checks. ``mesh`` serves both jobs;
    without one, scoring splits rows over every device and generation runs on
    :func:`decoding_mesh_config`'s mesh (a second copy of the parameters only when that
    differs).
    """

    def __init__(
        self,
        model: Any,
        *,
        mesh: Any | None = None,
        tokens_per_batch: int | None = None,
        gen_batch: int = 16,
        chunk: int = 16,
        smallest_bucket: int = 64,
        max_length: int | None = None,
    ) -> None:
        self.cfg = model.cfg
        self.max_length = int(max_length or model.cfg.max_seq_len)
        self.graphdef, state = nnx.split(model)
        self.scoring = Placement.on(mesh if mesh is not None else make_mesh(MeshConfig(data=-1)), state)
        self.decoding = self.scoring
        if mesh is None:
            gen_mesh = decoding_mesh_config(self.cfg, len(jax.devices()), jax.default_backend())
            if gen_mesh != MeshConfig(data=-1):
                self.decoding = Placement.on(make_mesh(gen_mesh), state)
        self.mesh = self.scoring.mesh
        self.buckets = length_buckets(self.max_length, smallest_bucket, midpoints=True)
        self.tokens_per_batch = tokens_per_batch or default_tokens_per_batch()
        self.rows_for = rows_per_bucket(self.buckets, self.tokens_per_batch, self.scoring.data_width)
        width = self.decoding.data_width
        self.gen_batch = -(-max(1, gen_batch) // width) * width
        self.chunk = max(1, chunk)
        self.stats = EngineStats()

    @classmethod
    def from_checkpoint(cls, path: str, *, dtype: str = "float32", max_length: int | None = None,
                        **kwargs: Any) -> InferenceEngine:
        """Load an afm checkpoint (``afm.model.checkpoints.checkpoint``) with the compute ``dtype``."""

        overrides: dict[str, Any] = {"dtype": dtype}
        if max_length:
            overrides["max_seq_len"] = int(max_length)
        model, _ = load_model(path, **overrides)
        return cls(model, **kwargs)

    def _run(self, program: Callable[..., Any], static: dict[str, Any], *args: Any) -> Any:
        """One of this module's jitted programs through :func:`afm.evaluation.executables.call`: a
        program compiled by an earlier process is loaded, not traced and lowered again."""

        return call(program, {"graphdef": self.graphdef, **static}, *args, packages=ENGINE_PACKAGES)

    # -- scoring ----------------------------------------------------------------------
    def check_length(self, n_tokens: int) -> None:
        if n_tokens > self.max_length:
            raise ValueError(f"{n_tokens} tokens exceed the model's context of {self.max_length}")

    def score(self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
              ) -> list[tuple[float, bool]]:
        """(sum of continuation log-probs, continuation is the greedy output) per request."""
        for r in requests:
            self.check_length(len(r.inputs))
        batches = pack_requests(requests, self.buckets, self.rows_for, min_rows=self.scoring.data_width)
        return self._run_scoring(batches, self._dispatch_rows, len(requests), progress)

    def _dispatch_rows(self, batch: PackedBatch) -> _InFlight:
        rows, length = batch.shape
        spans = [(row, start + n - scored, scored) for _, row, start, n, scored in batch.placements]
        at, where = scored_slots(spans, rows, length)
        self.stats.shapes.add(("score", (rows, length, at.shape[1])))
        targets = np.take_along_axis(batch.targets, at, axis=1)
        arrays = self.scoring.put(batch.tokens, batch.positions, batch.segment_ids, at, targets)
        logp, greedy = self._run(_score_rows, {}, self.scoring.state, *arrays)
        return _InFlight(logp, greedy, [p[0] for p in batch.placements], where)

    def score_shared(self, prefixes: Sequence[Sequence[int]],
                     items: Sequence[tuple[int, Sequence[int], Sequence[int]]],
                     progress: ProgressFn | None = None) -> list[tuple[float, bool]]:
        """Like :meth:`score` for continuations that share a context.

        ``items[i] = (prefix index, suffix inputs, targets)``: the model reads
        ``prefixes[p] + suffix`` and every suffix position is scored. Each context is
        computed once for all its continuations (multiple-choice items: one context, two
        to five choices), which is where most of the tokens of such tasks are: a context
        and its continuations are packed as one tree into rows of the packed-row buckets
        (``afm.evaluation.packing.pack_trees``), so there is one compiled program per
        bucket (and partial-batch size), whatever the mix of lengths and choice counts.
        """
        for p, inp, tgt in items:
            if len(inp) != len(tgt) or not inp:
                raise ValueError("suffix inputs and targets must be non-empty and of equal length")
            self.check_length(len(prefixes[p]) + len(inp))
        batches = pack_trees(prefixes, items, self.buckets, self.rows_for, min_rows=self.scoring.data_width)
        return self._run_scoring(batches, self._dispatch_trees, len(items), progress)

    def _dispatch_trees(self, batch: TreeBatch) -> _InFlight:
        rows, length = batch.shape
        at, where = scored_slots([(row, start, n) for _, row, start, n in batch.placements], rows, length)
        self.stats.shapes.add(("score_trees", (rows, length, at.shape[1])))
        targets = np.take_along_axis(batch.targets, at, axis=1)
        arrays = self.scoring.put(batch.tokens, batch.positions, batch.segment_ids, batch.branch_ids, at, targets)
        logp, greedy = self._run(_score_trees, {}, self.scoring.state, *arrays)
        return _InFlight(logp, greedy, [p[0] for p in batch.placements], where)

    def _run_scoring(self, batches: Iterator[PackedBatch] | Iterator[TreeBatch],
                     dispatch: Callable[[Any], _InFlight], n: int, progress: ProgressFn | None
                     ) -> list[tuple[float, bool]]:
        """Dispatch each batch, then collect the one before it: JAX runs a program
        asynchronously, so the next batch is packed, copied in and (the first time its
        shape is seen) traced and compiled while the device works on the previous one."""
        out: list[tuple[float, bool]] = [(0.0, False)] * n
        start = time.perf_counter()
        pending: _InFlight | None = None
        for batch in batches:
            current = dispatch(batch)
            self.stats.score_batches += 1
            self.stats.real_tokens += batch.real_tokens
            self.stats.slot_tokens += batch.tokens.size
            if pending is not None:
                self._collect(pending, out, progress)
            pending = current
        if pending is not None:
            self._collect(pending, out, progress)
        self.stats.seconds["score"] += time.perf_counter() - start
        self.stats.score_requests += n
        return out

    @staticmethod
    def _collect(batch: _InFlight, out: list[tuple[float, bool]], progress: ProgressFn | None) -> None:
        """Sum each span's log-probs (float64) and AND its greedy flags into ``out``."""
        logp, greedy = np.asarray(batch.logp), np.asarray(batch.greedy)
        for i, (row, k, n) in zip(batch.owners, batch.where, strict=True):
            out[i] = (float(logp[row, k:k + n].astype(np.float64).sum()), bool(greedy[row, k:k + n].all()))
        if progress is not None:
            progress(len(batch.owners))

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

    def _prefill_cost(self, rows: int, width: int) -> float:
        """Forward FLOPs of a prefill of ``rows`` x ``width`` slots (no readout: only each
        prompt's last position is read out), the measure :func:`pack_prompts` minimises."""

        per_token = flops_per_token(self.cfg, width) - 6.0 * self.cfg.vocab_size * self.cfg.dim
        return rows * width * per_token

    def _generate_batch(self, prompts: list[Sequence[int]], ids: list[int], max_new: int,
                        stop_ids: Sequence[int], is_finished: Callable[[int, list[int]], bool] | None,
                        temperature: float, top_p: float, key: Array, pad_id: int) -> list[list[int]]:
        lengths = [len(p) for p in prompts]
        width = prompt_width(max(lengths), self.max_length)
        placed = self.decoding
        n_rows = fit_rows(len(prompts), self.gen_batch, placed.data_width)  # no rows of filler beyond a power of two
        packed_rows, packed_width, where = pack_prompts(lengths, placed.data_width, self._prefill_cost)
        tokens = np.full((packed_rows, packed_width), pad_id, np.int32)
        positions = np.zeros((packed_rows, packed_width), np.int32)
        segments = np.zeros((packed_rows, packed_width), np.int32)
        source = np.full((n_rows, width, 2), -1, np.int32)  # filler rows: padding only
        last = np.zeros((n_rows, 2), np.int32)
        for r, (p, (row, start)) in enumerate(zip(prompts, where, strict=True)):
            n = len(p)
            tokens[row, start:start + n] = p
            positions[row, start:start + n] = np.arange(n)
            segments[row, start:start + n] = r + 1
            source[r, width - n:] = np.stack([np.full(n, row), np.arange(start, start + n)], axis=1)
            last[r] = (row, start + n - 1)
        steps = -(-max_new // self.chunk) * self.chunk
        self.stats.shapes.add(("generate", (packed_rows, packed_width, n_rows, width + steps)))
        tok_d, pos_d, seg_d, src_d, last_d = placed.put(tokens, positions, segments, source, last)
        last, cache = self._run(_prefill, {"cache_len": width + steps}, placed.state, tok_d, pos_d, seg_d,
                                src_d, last_d)
        next_pos = jnp.asarray(lengths + [1] * (n_rows - len(prompts)), jnp.int32)
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
            toks, emitted, last, cache, next_pos, done_d, key = self._run(
                _decode_chunk, {"steps": self.chunk, "greedy": greedy}, placed.state, last, cache,
                next_pos, jnp.asarray(done), key, stops, temp, topp,
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
