"""Causal self-attention as a small choice of kernel: XLA reference, cuDNN, TPU splash.

One entry point for the full-sequence path (training, scoring, prefill without a cache)::

    causal_attention(q, k, v, segment_ids=None | [B, T], backend="xla" | "cudnn" | "splash")

* ``segment_ids=None`` means plain causal attention and passes **no mask** to any
  kernel, so cuDNN and splash take their fused causal paths (no ``[B, 1, T, T]`` mask
  in memory, the upper triangle never computed).
* ``segment_ids`` (packed documents) keep attention inside a document. Segments must be
  contiguous runs (the loader's packing guarantees it; id 0 marks padding).

Backends (``resolve_backend`` maps ``auto`` to the right one for the platform):

``xla``
    ``jax.nn.dot_product_attention(implementation="xla")``: the reference, any platform.
    With segments it builds the boolean mask. Rows of 256 tokens or more run by query
    blocks (:func:`block_causal_attention`): the score blocks above the diagonal, which
    XLA would otherwise compute and mask, are skipped.
``cudnn`` (GPU)
    Causal: ``jax.nn.dot_product_attention(implementation="cudnn", is_causal=True)``.
    Packed documents: cuDNN's packed ("THD") layout through
    ``jax._src.cudnn.fused_attention_stablehlo.dot_product_attention`` with per-row
    segment lengths and offsets (``q_seqlen/q_offsets [B, M]``) and ``PADDING_CAUSAL``:
    jax 0.10.2's public ``jax.nn.dot_product_attention`` only takes one length per row,
    which cannot express several documents. It needs a static upper bound ``M`` on
    segment runs per row, padding included (``ModelConfig.max_segments``; the trainer sets
    it to the loader's cap on documents + 1) and a Hopper GPU (jax's own check). With ``max_segments == 0`` packed rows
    fall back to cuDNN with a mask (fused, but a bias the size of the score matrix).
``splash`` (TPU)
    ``jax.experimental.pallas.ops.tpu.splash_attention`` with a ``CausalMask`` and
    ``SegmentIds``; grouped-query attention is native. Off TPU it runs the same kernel in
    Pallas *interpret* mode, which is how it is tested on CPU against ``xla``.

Sharding. Under :func:`afm.model.distributed.partitioning.activation_sharding` the kernel runs in a
``shard_map``: batch over the data axes and **heads** over ``tensor x sequence``, with the
whole sequence on every device. When the activations around attention are split along
the sequence (sequence parallelism), entering and leaving this layout is an all-to-all
(DeepSpeed-Ulysses; MaxText's "ulysses" context parallelism). We chose it over all-gather
or ring attention because every kernel then sees an ordinary full causal problem: no
causal offsets per shard (cuDNN's causal mask in jax 0.10.2 is top-left aligned only, and
its partitioner rejects sequence-sharded q/k/v), and splash and cuDNN run unchanged.
KV heads are repeated when there are fewer of them than head shards. If the query heads
do not divide over ``tensor x sequence`` the heads are split over ``tensor`` only and
attention is replicated along ``sequence`` (correct, but the sequence axis then saves
memory only outside attention).
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import jax
import jax.numpy as jnp

from afm.model.distributed import partitioning

Array = jax.Array
Backend = Literal["xla", "cudnn", "splash"]
BACKENDS = ("auto", "xla", "cudnn", "splash")


def resolve_backend(
    requested: str, *, dtype: str, head_dim: int, platform: str | None = None
) -> Backend:
    """The kernel ``requested`` ("auto" or a backend name) means on ``platform``.

    ``auto``: cuDNN on GPU when the compute dtype is 16-bit and ``head_dim`` is a multiple
    of 8 up to 128 (the shapes cuDNN's flash kernel takes on every architecture), splash on
    TPU, XLA elsewhere. Naming ``cudnn`` off a GPU is an error; naming ``splash`` off a TPU
    runs it in interpret mode (slow; for tests).
    """
    platform = platform or jax.default_backend()
    if requested not in BACKENDS:
        raise ValueError(f"unknown attention backend {requested!r}; choose from {BACKENDS}")
    if requested == "auto":
        if platform == "gpu" and dtype in ("bfloat16", "float16") and head_dim % 8 == 0 and head_dim <= 128:
            return "cudnn"
        if platform == "tpu":
            return "splash"
        return "xla"
    if requested == "cudnn" and platform != "gpu":
        raise ValueError(f"attention backend 'cudnn' needs a GPU (this platform is {platform!r})")
    return requested  # type: ignore[return-value]


def segment_mask(q_segments: Array, k_segments: Array, q_slots: Array, k_slots: Array) -> Array:
    """Boolean ``[B, 1, T, S]``: key slot ``s <= `` query slot ``t`` and the same segment."""
    causal = k_slots[None, :] <= q_slots[:, None]
    same = q_segments[:, :, None] == k_segments[:, None, :]
    return (causal[None] & same)[:, None]


def masked_attention(q: Array, k: Array, v: Array, mask: Array) -> Array:
    """XLA attention with an explicit boolean mask: the KV-cache decoding path, and
    evaluation's tree-packed rows (a causal mask over the full sequence: query blocks)."""
    if q.shape[1] == k.shape[1] and causal_blocks(q.shape[1]) > 1:
        return block_causal_attention(q, k, v, lambda s, e: mask[:, :, s:e, :e])
    return _masked_block(q, k, v, mask)


def causal_blocks(t: int) -> int:
    """Query blocks for :func:`block_causal_attention` on ``t`` tokens: for ``t >= 256``,
    blocks of 128 tokens or more (64 when 128 does not divide ``t``), at most 8 of them;
    1 (no blocking) for shorter or odd lengths."""
    if t < 256:
        return 1
    for size in (128, 64):
        if t % size == 0:
            n = t // size
            while n > 8 and n % 2 == 0:
                n //= 2
            return n
    return 1


def block_causal_attention(q: Array, k: Array, v: Array, mask_block) -> Array:
    """Causal attention computed by query blocks: block ``i`` reads only the keys up to its
    own end, so about half the ``T x T`` score matrix (everything above the diagonal
    blocks) is never computed. ``mask_block(start, end)`` gives the boolean mask
    ``[B, 1, end - start, end]`` of queries ``start:end`` over keys ``0:end``, which must
    already be causal. Why: XLA on CPU has no fused attention kernel; it materialises the
    scores, and for 256-2048-token rows that is most of a small model's time (2.1x faster
    at 512 tokens, the same values)."""
    t = q.shape[1]
    size = t // causal_blocks(t)
    outs = []
    for start in range(0, t, size):
        end = start + size
        outs.append(_masked_block(q[:, start:end], k[:, :end], v[:, :end], mask_block(start, end)))
    return jnp.concatenate(outs, axis=1)


def _masked_block(q: Array, k: Array, v: Array, mask: Array) -> Array:
    """Softmax attention of ``q`` [B, T, N, H] over ``k``/``v`` [B, S, K, H] (grouped-query:
    ``N`` a multiple of ``K``) under a boolean ``mask`` [B, 1, T, S], float32 scores.
    The float32 softmax is normalised after the value product (one division per output
    element, not one per score): on CPU every pass over the score block costs as much as
    the matmuls, and this saves one (1.3-2x :func:`jax.nn.dot_product_attention` here).
    16-bit inputs round the normalised probabilities, as jax's kernel does, so the paths
    of a bfloat16 model (blocks, decoding, the kernel) agree to within summation order."""
    b, t, n, h = q.shape
    kv = k.shape[2]
    qg = q.reshape(b, t, kv, n // kv, h)
    scores = jnp.einsum("btkgh,bskh->bkgts", qg, k, preferred_element_type=jnp.float32) * (h ** -0.5)
    scores = jnp.where(mask[:, :, None], scores, jnp.finfo(jnp.float32).min)
    p = jnp.exp(scores - jnp.max(scores, axis=-1, keepdims=True))
    total = jnp.sum(p, axis=-1)  # [B, K, G, T]
    if v.dtype != jnp.float32:  # 16-bit: probabilities rounded after normalising, as jax's kernel does
        probs = (p / total[..., None]).astype(v.dtype)
        out = jnp.einsum("bkgts,bskh->bkgth", probs, v, preferred_element_type=jnp.float32)
    else:
        out = jnp.einsum("bkgts,bskh->bkgth", p, v) / total[..., None]
    return jnp.einsum("bkgth->btkgh", out).reshape(b, t, n, h).astype(q.dtype)


# -- the kernels, on local (per-device) shapes ---------------------------------------------
def _xla(q: Array, k: Array, v: Array, segment_ids: Array | None) -> Array:
    scale = q.shape[-1] ** -0.5
    t = q.shape[1]
    slots = jnp.arange(t, dtype=jnp.int32)
    if causal_blocks(t) > 1:  # XLA on CPU: the blocks above the diagonal are never computed
        if segment_ids is None:
            def mask_block(s: int, e: int) -> Array:
                return (slots[:e][None, :] <= slots[s:e][:, None])[None, None]
        else:
            def mask_block(s: int, e: int) -> Array:
                return segment_mask(segment_ids[:, s:e], segment_ids[:, :e], slots[s:e], slots[:e])
        return block_causal_attention(q, k, v, mask_block)
    if segment_ids is None:
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, scale=scale, implementation="xla")
    mask = segment_mask(segment_ids, segment_ids, slots, slots)
    return jax.nn.dot_product_attention(q, k, v, mask=mask, scale=scale, implementation="xla")


def packed_layout(segment_ids: Array, max_segments: int) -> tuple[Array, Array]:
    """Per-row run lengths ``[B, M]`` and start offsets ``[B, M + 1]`` of the segment runs,
    in the form cuDNN's packed layout takes (unused entries are -1).

    A run is a maximal stretch of equal ids; padding (id 0) is a run of its own. Runs
    past ``max_segments`` are not described: the caller guarantees there are none.
    """
    b, t = segment_ids.shape
    starts = jnp.concatenate(
        [jnp.ones((b, 1), bool), segment_ids[:, 1:] != segment_ids[:, :-1]], axis=1
    )
    run = jnp.cumsum(starts, axis=1, dtype=jnp.int32) - 1  # [B, T] run index per token
    rows = jnp.broadcast_to(jnp.arange(b)[:, None], (b, t))
    m = max_segments
    lengths = jnp.zeros((b, m), jnp.int32).at[rows, run].add(1, mode="drop")
    offsets = jnp.full((b, m), t, jnp.int32).at[rows, run].min(
        jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t)), mode="drop"
    )
    used = jnp.arange(m)[None, :] < (run[:, -1:] + 1)
    lengths = jnp.where(used, lengths, -1)
    offsets = jnp.where(used, offsets, -1)
    return lengths, jnp.concatenate([offsets, jnp.full((b, 1), -1, jnp.int32)], axis=1)


def _cudnn(q: Array, k: Array, v: Array, segment_ids: Array | None, max_segments: int) -> Array:
    scale = q.shape[-1] ** -0.5
    if segment_ids is None:
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, scale=scale, implementation="cudnn")
    if max_segments <= 0:
        slots = jnp.arange(q.shape[1], dtype=jnp.int32)
        mask = segment_mask(segment_ids, segment_ids, slots, slots)
        return jax.nn.dot_product_attention(q, k, v, mask=mask, scale=scale, implementation="cudnn")
    from jax._src.cudnn.fused_attention_stablehlo import MaskType, dot_product_attention

    lengths, offsets = packed_layout(segment_ids, max_segments)
    return dot_product_attention(
        q, k, v, None, None, lengths, lengths, offsets, offsets,
        scale=scale, mask_type=MaskType.PADDING_CAUSAL, qkv_layout="BTNH",
    )


_SPLASH_LANES = 128  # splash tiles are multiples of the TPU's 128 lanes


def _splash_block(t: int) -> int:
    """Largest tile <= 512 that divides the (padded) sequence."""
    return next(b for b in (512, 256, 128) if t % b == 0)


@functools.lru_cache(maxsize=32)
def _splash_kernel(t: int, heads: int, interpret: bool):
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm

    b = _splash_block(t)
    sizes = sk.BlockSizes(
        block_q=b, block_kv=b, block_kv_compute=b,
        block_q_dkv=b, block_kv_dkv=b, block_kv_dkv_compute=b,
        block_q_dq=b, block_kv_dq=b,
    )
    mask = sm.MultiHeadMask([sm.CausalMask((t, t))] * heads)
    # Saving the kernel's residuals under the name the remat policies know lets
    # "attention" policies keep them instead of re-running the forward kernel. The mask
    # metadata is computed eagerly (it is cached across traces, so it must not be a tracer).
    with jax.ensure_compile_time_eval():
        return sk.make_splash_mha(
            mask, head_shards=1, q_seq_shards=1, block_sizes=sizes,
            residual_checkpoint_name="attn_context", interpret=interpret,
        )


def _splash(q: Array, k: Array, v: Array, segment_ids: Array | None) -> Array:
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk

    _, t, n, h = q.shape
    # Splash tiles are multiples of 128 tokens: pad the sequence at the end. Causality
    # keeps every real query away from the padded keys; padded queries are cut off.
    pad = -t % _SPLASH_LANES
    if pad:
        q, k, v = (jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))) for x in (q, k, v))
        if segment_ids is not None:
            segment_ids = jnp.pad(segment_ids, ((0, 0), (0, pad)), constant_values=-1)
    kernel = _splash_kernel(t + pad, n, jax.default_backend() != "tpu")
    # Splash has no scale argument: fold 1/sqrt(d) into q, in [heads, seq, dim] layout.
    qt = jnp.swapaxes(q * jnp.asarray(h**-0.5, q.dtype), 1, 2)
    kt, vt = jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2)
    if segment_ids is None:
        out = jax.vmap(lambda a, b_, c: kernel(a, b_, c))(qt, kt, vt)
    else:
        out = jax.vmap(lambda a, b_, c, s: kernel(a, b_, c, sk.SegmentIds(s, s)))(qt, kt, vt, segment_ids)
    return jnp.swapaxes(out, 1, 2)[:, :t]


def _local(backend: str, max_segments: int):
    if backend == "xla":
        return _xla
    if backend == "cudnn":
        return functools.partial(_cudnn, max_segments=max_segments)
    if backend == "splash":
        return _splash
    raise ValueError(f"unknown attention backend {backend!r}")


# -- the sharded entry point ----------------------------------------------------------------
def _head_layout(rules: partitioning.ActivationRules, n_heads: int, n_kv: int) -> tuple[tuple[str, ...], int]:
    """Mesh axes the heads are split over inside attention, and how often to repeat KV heads."""
    for axes in (rules.axes("heads") + rules.axes("seq"), rules.axes("heads"), ()):
        shards = math.prod(rules.mesh.shape[a] for a in axes)
        if n_heads % shards:
            continue
        repeat = shards // math.gcd(n_kv, shards)
        if (n_heads // n_kv) % repeat == 0:
            return axes, repeat
    return (), 1


def causal_attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    segment_ids: Array | None,
    backend: Backend,
    max_segments: int = 0,
) -> Array:
    """Causal (and, with ``segment_ids``, document-local) attention, [B,T,N,H] x [B,T,K,H]
    -> [B,T,N,H], on the chosen kernel; sharded as described in the module docstring."""
    local = _local(backend, max_segments)
    rules = partitioning.current()
    if rules is None:
        return local(q, k, v, segment_ids)

    b, _, n, _ = q.shape
    head_axes, repeat = _head_layout(rules, n, k.shape[2])
    if repeat > 1:  # each repeated KV head serves a contiguous block of its query heads
        k, v = jnp.repeat(k, repeat, axis=2), jnp.repeat(v, repeat, axis=2)
    batch_axes = rules.axes("batch")
    if batch_axes and b % math.prod(rules.mesh.shape[a] for a in batch_axes):
        batch_axes = ()
    spec_batch = batch_axes if len(batch_axes) != 1 else batch_axes[0]
    spec_heads = head_axes if len(head_axes) != 1 else head_axes[0]
    P = jax.sharding.PartitionSpec
    qkv_spec = P(spec_batch or None, None, spec_heads or None, None)
    seg_spec = P(spec_batch or None, None)

    if segment_ids is None:
        fn = jax.shard_map(
            lambda a, b_, c: local(a, b_, c, None), mesh=rules.mesh,
            in_specs=(qkv_spec, qkv_spec, qkv_spec), out_specs=qkv_spec, check_vma=False,
        )
        return fn(q, k, v)
    fn = jax.shard_map(
        local, mesh=rules.mesh,
        in_specs=(qkv_spec, qkv_spec, qkv_spec, seg_spec), out_specs=qkv_spec, check_vma=False,
    )
    return fn(q, k, v, segment_ids)


def attention_flops_per_token(n_heads: int, head_dim: int, seq_len: int, *, causal: bool = True) -> float:
    """Training FLOPs per token per layer of QK^T and PV (forward + backward).

    Full attention is ``2 matmuls x 2 FLOPs x T x N x H`` forward, x3 with the backward:
    ``12 N H T``. A causal mask leaves half of the score matrix to compute, and the
    fused kernels skip the other half, so causal attention is credited ``6 N H T``.
    """
    full = 12.0 * n_heads * head_dim * seq_len
    return full / 2 if causal else full


__all__ = [
    "BACKENDS",
    "attention_flops_per_token",
    "causal_attention",
    "masked_attention",
    "packed_layout",
    "resolve_backend",
    "segment_mask",
]
