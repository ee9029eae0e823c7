"""The AFM transformer (report §2) as a Flax NNX module, plus its decoding cache.

``Transformer(cfg, rngs=nnx.Rngs(0))(tokens)`` returns float32 logits ``[B, T, V]``.

Attention masking, one rule for every use:
    query ``t`` may attend to key slot ``s`` iff ``s <= t`` (causal, by slot) AND both
    carry the same segment id.
Training packs several documents into a row with ``segment_ids`` (one id per document,
contiguous runs; attention never crosses documents) and ``positions`` that restart at 0
per document. On the full-sequence path the ids go to the attention kernel
(``afm.model.attention``: XLA, cuDNN or splash); without ``segment_ids`` attention is
plain causal and no mask is built at all, so the fused kernels take their causal path.
Decoding keeps keys/values in a :class:`KVCache`; batched prompts of different lengths
are LEFT-padded with segment id 0 (real tokens use 1), so a pad never enters a real
token's attention and every row writes its new token into the same slot.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from afm.model import remat
from afm.model.attention import segment_mask
from afm.model.blocks.layers import Block, RMSNorm, dropout, param, rope_tables
from afm.model.config import ModelConfig
from afm.model.distributed.partitioning import constrain
from afm.model.on_device.palettize import palettize_structure
from afm.model.params import leaf_paths
from afm.model.precision import to_compute

Array = jax.Array


def scan_storage(x: Array, dtype: Any) -> Array:
    """How a parameter is held for compute: float weight matrices (ndim >= 2) in the
    compute ``dtype`` (every use casts them to it first, so the rounding is the same
    wherever it happens), 1-D norm scales and integer (palettized) storage as they are
    (norms are applied in float32). The layer scan stacks by this rule, and so does a
    frozen copy of the model (a DPO/MDLOO reference), so the copy computes exactly what
    the model computes."""
    if x.ndim >= 2 and jnp.issubdtype(x.dtype, jnp.floating):
        return to_compute(x, dtype)
    return x


def layer_paths(layer_state: Any) -> list[str]:
    """The '/'-joined path of each leaf of one layer's state, in leaf order (``attn/wq``):
    the names under which pre-stacked layer parameters are handed to
    :meth:`Transformer.features`."""

    return leaf_paths(layer_state)

@flax.struct.dataclass
class KVCache:
    """Keys/values of every layer for ``max_len`` slots, and what each slot holds.

    k, v: [n_layers, B, max_len, n_kv_heads, head_dim] (compute dtype).
    segment_ids: int32 [B, max_len], the segment of the token in each slot
    (0 = padding; unwritten slots lie in the future, so the causal rule hides them).
    index: int32 scalar, the next slot to write.

    The caller sizes the cache for prompt + new tokens (``afm.model.inference.sampling`` does):
    writes past ``max_len`` cannot raise inside ``jit`` (``dynamic_update_slice`` clamps).
    """

    k: Array
    v: Array
    segment_ids: Array
    index: Array

    @classmethod
    def create(cls, cfg: ModelConfig, batch: int, max_len: int) -> KVCache:
        shape = (cfg.n_layers, batch, max_len, cfg.n_kv_heads, cfg.head_dim)
        dtype = jnp.dtype(cfg.dtype)
        return cls(
            k=jnp.zeros(shape, dtype),
            v=jnp.zeros(shape, dtype),
            segment_ids=jnp.zeros((batch, max_len), jnp.int32),
            index=jnp.zeros((), jnp.int32),
        )

    @property
    def max_len(self) -> int:
        return self.k.shape[2]

    def grown(self, max_len: int) -> KVCache:
        """The same cache with empty slots appended up to ``max_len``. A prefill into a
        cache exactly the prompt's length is a square causal problem, which attention
        computes by blocks (``afm.model.attention.block_causal_attention``); the decode
        steps then need the room."""
        extra = max_len - self.max_len
        if extra < 0:
            raise ValueError(f"cannot shrink a cache of {self.max_len} slots to {max_len}")
        pad = ((0, 0), (0, 0), (0, extra), (0, 0), (0, 0))
        return KVCache(k=jnp.pad(self.k, pad), v=jnp.pad(self.v, pad),
                       segment_ids=jnp.pad(self.segment_ids, ((0, 0), (0, extra))), index=self.index)


def attention_mask(
    q_slots: Array, k_slots: Array, q_segments: Array, k_segments: Array
) -> Array:
    """Boolean [B, 1, T, S]: causal by slot AND same segment (the decoding-path mask)."""
    return segment_mask(q_segments, k_segments, q_slots, k_slots)


def embedding(cfg: ModelConfig, rngs: nnx.Rngs) -> nnx.Param:
    """The tied embedding table [vocab, dim], std ``embed_init_std`` (muParam simple)."""
    return param(rngs, (cfg.vocab_size, cfg.dim), cfg.embed_init_std, ("vocab", "embed"), cfg.param_dtype)


def final_norm(cfg: ModelConfig, rngs: nnx.Rngs) -> RMSNorm:
    """The RMSNorm before the readout."""
    return RMSNorm(cfg.dim, cfg.norm_eps, param_dtype=cfg.param_dtype, rngs=rngs)


class Transformer(nnx.Module):
    """Dense decoder-only AFM transformer with a tied embedding.

    ``cfg.scan_layers`` runs the blocks under one ``lax.scan`` (the per-layer parameters
    are stacked at trace time; the parameter tree is the same either way, so checkpoints
    and exports do not depend on it). ``cfg.remat`` wraps each block in
    ``jax.checkpoint`` with the chosen policy.
    """

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        # The draw order (embedding, each block, final norm) fixes every parameter's key:
        # ``afm.model.initializer`` replays it one block per program, so keep the two in step.
        self.embed = embedding(cfg, rngs)
        self.layers = nnx.List([Block(cfg, rngs=rngs) for _ in range(cfg.n_layers)])
        self.final_norm = final_norm(cfg, rngs)
        if cfg.palettization is not None:  # quantized storage: values come from a checkpoint

            palettize_structure(self, cfg.palettization)

    # -- the forward pass, in two halves ------------------------------------------------
    def features(
        self,
        tokens: Array,
        *,
        positions: Array | None = None,
        segment_ids: Array | None = None,
        cache: KVCache | None = None,
        dropout_rng: Array | None = None,
        mask: Array | None = None,
        stacked_layers: dict[str, Array] | None = None,
    ) -> tuple[Array, KVCache | None]:
        """Final-norm hidden states [B, T, dim] (compute dtype) and the updated cache.

        Reward heads and chunked losses start from here; :meth:`readout` makes logits.
        ``dropout_rng`` (training only) turns on ``cfg.dropout`` on the embedding and on
        every sublayer output; without it the pass is deterministic. ``mask`` (boolean
        [B, 1, T, T], full sequence only) replaces the causal/segment rule with an
        explicit one, e.g. evaluation's tree-packed rows where several continuations
        share one context (``afm.evaluation.packing``); it runs the XLA reference kernel.
        ``stacked_layers`` (``scan_layers`` only) are every layer's parameters already
        stacked ``[n_layers, ...]`` by :func:`scan_storage`, keyed by :func:`layer_paths`:
        a frozen copy stored that way is scanned as it is, instead of being stacked again
        (a copy of every layer) in every step.
        """
        cfg = self.cfg
        dtype = jnp.dtype(cfg.dtype)
        tokens = jnp.asarray(tokens, jnp.int32)
        b, t = tokens.shape
        start = cache.index if cache is not None else jnp.zeros((), jnp.int32)
        if positions is None:
            positions = jnp.broadcast_to(start + jnp.arange(t, dtype=jnp.int32), (b, t))
        seg = None if segment_ids is None else jnp.asarray(segment_ids, jnp.int32)

        # Full sequence: the attention kernel gets the segment ids (or nothing: plain
        # causal, no mask anywhere). Decoding: an explicit mask over the cache slots.
        if mask is not None and cache is not None:
            raise ValueError("features: an explicit mask is for the full-sequence path, not with a cache")
        if cache is not None:
            q_seg = jnp.ones((b, t), jnp.int32) if seg is None else seg
            k_seg = jax.lax.dynamic_update_slice(cache.segment_ids, q_seg, (0, start))
            q_slots = start + jnp.arange(t, dtype=jnp.int32)
            mask = attention_mask(q_slots, jnp.arange(cache.max_len, dtype=jnp.int32), q_seg, k_seg)

        drop = dropout_rng is not None and cfg.dropout > 0.0
        x = to_compute(jnp.take(self.embed[...], tokens, axis=0), dtype)
        if drop:
            x = dropout(x, cfg.dropout, jax.random.fold_in(dropout_rng, cfg.n_layers))
        x = constrain(x, ("batch", "seq", "embed"))
        cos, sin = rope_tables(positions, cfg.head_dim, cfg.rope_base)

        # Each layer keeps its own structure (a palettized model may give layers different
        # bit widths, an adapter may target some layers only); the scan needs them equal.
        split = [nnx.split(layer) for layer in self.layers]
        graphdefs, layer_states = [g for g, _ in split], [s for _, s in split]
        policy = remat.jax_policy(cfg.remat)

        def make_block_fn(graphdef: Any):
            def block_fn(state: Any, x: Array, kv: tuple[Array, ...] | None, layer: Array | int = 0):
                block = nnx.merge(graphdef, state)
                # (k, v) of this layer, or (k_all, v_all, layer): every layer's, stacked
                kv_cache = None if kv is None else (kv[0], kv[1], start, *kv[2:])
                key = jax.random.fold_in(dropout_rng, layer) if drop else None
                return block(x, cos, sin, segment_ids=seg, mask=mask, kv_cache=kv_cache,
                             dropout_rate=cfg.dropout, dropout_key=key)

            if policy is not None:
                return jax.checkpoint(block_fn, policy=policy, prevent_cse=not cfg.scan_layers)
            return block_fn

        new_k = new_v = None
        if stacked_layers is not None and not cfg.scan_layers:
            raise ValueError("stacked_layers are for a model that scans its layers (scan_layers=True)")
        if cfg.scan_layers:
            if any(g != graphdefs[0] for g in graphdefs[1:]):
                raise ValueError("scan_layers needs layers of one structure (e.g. one bit width "
                                 "for every palettized layer): set scan_layers=False")
            block_fn = make_block_fn(graphdefs[0])
            # Stack the per-layer parameters along a new leading axis for the scan, each
            # held as scan_storage says (weight matrices in the compute dtype: the stacked
            # copy costs half the f32 size), unless they come stacked already.
            _, treedef = jax.tree.flatten(layer_states[0])
            if stacked_layers is not None:
                stacked = [stacked_layers[p] for p in layer_paths(layer_states[0])]
            else:
                stacked = [jnp.stack([scan_storage(x, dtype) for x in xs])
                           for xs in zip(*(jax.tree.leaves(s) for s in layer_states), strict=True)]

            def body(x: Array, xs: Any):
                leaves, kv, layer = xs
                state = jax.tree.unflatten(treedef, leaves)
                x, new_kv = block_fn(state, x, kv, layer)
                return x, new_kv

            kv_xs = None if cache is None else (cache.k, cache.v)
            layers = jnp.arange(cfg.n_layers, dtype=jnp.int32)
            x, new_kv = jax.lax.scan(body, x, (stacked, kv_xs, layers))
            if cache is not None:
                new_k, new_v = new_kv
        else:
            # Each layer writes its new keys/values straight into the stacked cache (in
            # place); a layer's slice copied out and stacked back would copy the whole
            # cache once per decoded token.
            new_k = None if cache is None else cache.k
            new_v = None if cache is None else cache.v
            for i, (graphdef, state) in enumerate(zip(graphdefs, layer_states, strict=True)):
                kv = None if cache is None else (new_k, new_v, i)
                x, new_kv = make_block_fn(graphdef)(state, x, kv, i)
                if new_kv is not None:
                    new_k, new_v = new_kv

        h = constrain(self.final_norm(x), ("batch", "seq", "embed"))
        if cache is None:
            return h, None
        new_cache = KVCache(k=new_k, v=new_v, segment_ids=k_seg, index=start + t)
        return h, new_cache

    def readout(self, h: Array) -> Array:
        """Float32 logits from hidden states through the tied table, times the muParam
        logit scale (see ``afm.model.config``)."""
        table = to_compute(self.embed[...], h.dtype)
        logits = jnp.einsum("btd,vd->btv", h, table, preferred_element_type=jnp.float32)
        return logits * self.cfg.logit_scale

    def __call__(
        self,
        tokens: Array,
        *,
        positions: Array | None = None,
        segment_ids: Array | None = None,
        cache: KVCache | None = None,
        dropout_rng: Array | None = None,
    ) -> Array | tuple[Array, KVCache]:
        """Logits float32 [B, T, V]; with a ``cache``, ``(logits, updated_cache)``."""
        h, new_cache = self.features(
            tokens, positions=positions, segment_ids=segment_ids, cache=cache, dropout_rng=dropout_rng
        )
        logits = self.readout(h)
        if cache is None:
            return logits
        return logits, new_cache


class StackedLayersView:
    """A model whose layers are scanned from parameters stored pre-stacked (a frozen
    reference): ``features``, ``readout``, ``embed`` and ``cfg`` as the model's, every
    forward handed ``stacked_layers``. What reads a model through those (the chunked
    scoring, DPO's sequence log-probs) reads this the same way."""

    def __init__(self, model: Transformer, stacked_layers: dict[str, Array]):
        self.model, self.stacked_layers = model, stacked_layers

    @property
    def cfg(self) -> ModelConfig:
        return self.model.cfg

    @property
    def embed(self) -> Any:
        return self.model.embed

    def features(self, tokens: Array, **kwargs: Any) -> tuple[Array, KVCache | None]:
        return self.model.features(tokens, stacked_layers=self.stacked_layers, **kwargs)

    def readout(self, h: Array) -> Array:
        return self.model.readout(h)


RUNTIME_FIELDS = frozenset(
    {"dtype", "remat", "scan_layers", "attention_impl", "max_segments", "max_seq_len",
     "rope_base", "dropout", "fp8", "name", "notes"}
)


def with_config(model: Transformer, **changes: Any) -> Transformer:
    """The same parameters under other run-time settings: ``dtype``, ``remat``,
    ``scan_layers``, ``attention_impl``, ``max_seq_len``, ``rope_base`` (e.g. 500k ->
    6,315,089 for context lengthening). Shapes cannot change. The new model shares the
    parameter arrays (no copy)."""
    bad = set(changes) - RUNTIME_FIELDS
    if bad:
        raise ValueError(f"with_config: {sorted(bad)} change parameter shapes or dtypes")
    cfg = model.cfg.replace(**changes)
    abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
    graphdef, _ = nnx.split(abstract)
    return nnx.merge(graphdef, nnx.state(model))

