"""Random initialisation in programs whose size does not grow with depth.

Why: building the whole ``Transformer`` under one ``jit`` puts every parameter's random
draw (threefry plus the normal's inverse error function) into one program, so the
program grows with the number of layers and its compile time with it: on an H200 the
26-layer ``afm-on-device`` init compiled for 3 min 39 s before the first step. Here the
blocks are made by ONE small compiled program, called once per layer, plus one program
for the embedding and the final norm; the compile cost is that of a single block at any
depth, and the per-layer outputs land directly in their shardings (no full-model copy).

The values are exactly those of the eager ``Transformer(cfg, rngs=nnx.Rngs(params=seed))``:
``nnx.Rngs`` draws key ``fold_in(key(seed), n)`` for the ``n``-th parameter, and each
program starts the stream at the count the previous one ended with (embedding 0, then
each block, then the final norm). The count is passed on as a device scalar, so the
layers are launched without waiting for each other. Random bits come from the
partitionable threefry (``jax_threefry_partitionable``, on by default), so a parameter
has the same value whatever mesh it is sharded over (``tests/unit/model``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec, Sharding

from afm.model.blocks.layers import Block
from afm.model.config import ModelConfig, check_fits
from afm.model.params import flatten_state
from afm.model.transformer import Transformer, embedding, final_norm

Array = jax.Array
Params = dict[str, Array]

LAYER_PREFIX = "layers"


def _stream(seed: Array, count: Array) -> nnx.Rngs:
    """``nnx.Rngs(params=seed)`` advanced to ``count`` draws (both may be traced)."""
    rngs = nnx.Rngs(params=jax.random.key(seed))
    rngs.params.count[...] = jnp.asarray(count, jnp.uint32)
    return rngs


def _flat_params(module: nnx.Module) -> Params:
    _, params, _ = nnx.split(module, nnx.Param, ...)
    return flatten_state(params)[0]


Placement = tuple[tuple[str, Sharding], ...] | None


def _placement(shardings: Mapping[str, Sharding] | None, prefix: str, skip: str = "") -> Placement:
    """The shardings of the paths under ``prefix`` (prefix removed), hashable, or None."""
    if shardings is None:
        return None
    return tuple(sorted(
        (k[len(prefix):], s) for k, s in shardings.items()
        if k.startswith(prefix) and not (skip and k.startswith(skip))
    ))


@functools.lru_cache(maxsize=32)
def _block_jit(cfg: ModelConfig, placement: Placement) -> Callable[[Array, Array], tuple[Params, Array]]:
    """One block's initialiser, compiled once per config and placement (every layer)."""

    def make(seed: Array, count: Array) -> tuple[Params, Array]:
        rngs = _stream(seed, count)
        block = Block(cfg, rngs=rngs)
        return _flat_params(block), rngs.params.count[...]

    if placement is None:
        return jax.jit(make)
    return jax.jit(make, out_shardings=(dict(placement), _replicated(placement)))


@functools.lru_cache(maxsize=32)
def _ends_jit(cfg: ModelConfig, placement: Placement) -> Callable[[Array, Array], Params]:
    """The embedding (draw 0) and the final norm (after the blocks), compiled."""

    def make(seed: Array, count_after_blocks: Array) -> Params:
        table = embedding(cfg, _stream(seed, 0))  # the first draw of the stream
        norm = final_norm(cfg, _stream(seed, count_after_blocks))
        return {"embed": table[...], **{f"final_norm/{k}": v for k, v in _flat_params(norm).items()}}

    return jax.jit(make) if placement is None else jax.jit(make, out_shardings=dict(placement))


def init_params(
    cfg: ModelConfig,
    seed: int,
    shardings: Mapping[str, Sharding] | None = None,
) -> Params:
    """Fresh parameters as a flat ``{path: array}`` dict, each made in ``shardings[path]``
    (default placement without). A palettized config (whose values come from a
    checkpoint) is built the plain way, as one program. A model whose parameters alone
    exceed the memory here is refused first (:func:`~afm.model.config.check_fits`)."""

    check_fits(cfg, "initialising the model")
    if cfg.palettization is not None:
        return _whole_model(cfg, seed, shardings)
    seed_arr = jnp.asarray(seed, jnp.uint32)
    out: Params = {}
    count: Array = jnp.ones((), jnp.uint32)  # draw 0 is the embedding
    for i in range(cfg.n_layers):
        params, count = _block_jit(cfg, _placement(shardings, f"{LAYER_PREFIX}/{i}/"))(seed_arr, count)
        out.update({f"{LAYER_PREFIX}/{i}/{k}": v for k, v in params.items()})
    outer = _placement(shardings, "", skip=f"{LAYER_PREFIX}/")
    out.update(_ends_jit(cfg, outer)(seed_arr, count))
    if shardings is not None:
        if set(out) != set(shardings):
            raise ValueError(
                "init_params: the per-block initialiser and the Transformer disagree on the "
                f"parameters (only made: {sorted(set(out) - set(shardings))[:3]}, "
                f"missing: {sorted(set(shardings) - set(out))[:3]})"
            )
    return out


def _replicated(placement: tuple[tuple[str, Sharding], ...]) -> Sharding:
    """A scalar's placement beside ``placement`` (replicated over the same devices)."""
    first = placement[0][1]
    if isinstance(first, NamedSharding):
        return NamedSharding(first.mesh, PartitionSpec())
    return first


def _whole_model(cfg: ModelConfig, seed: int, shardings: Mapping[str, Sharding] | None) -> Params:
    def make() -> Params:
        return _flat_params(Transformer(cfg, rngs=nnx.Rngs(params=seed)))

    return jax.jit(make, out_shardings=None if shardings is None else dict(shardings))()


def init_model(cfg: ModelConfig, seed: int = 0) -> Any:
    """A ``Transformer`` over :func:`init_params` (the structure traced abstractly)."""

    abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(params=seed)))
    graphdef, abs_params, rest = nnx.split(abstract, nnx.Param, ...)
    if jax.tree.leaves(rest):  # non-parameter state (palettized storage): the plain way
        return nnx.jit(lambda: Transformer(cfg, rngs=nnx.Rngs(params=seed)))()
    flat_abs, layout = flatten_state(abs_params)
    params = init_params(cfg, seed)
    if set(params) != set(flat_abs):
        raise ValueError("init_model: the per-block initialiser and the Transformer disagree on the parameters")
    return nnx.merge(graphdef, layout.unflatten(params), rest)
