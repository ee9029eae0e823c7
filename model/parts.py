"""The model split for functional steps: the graph definition, the flat parameter layout,
logical axes and float32 master dtypes of a model config, and how to rebuild a
``Transformer`` from a flat ``{path: array}`` dict. The trainer's engine, the tasks that
add parameters (LoRA, reward heads), pruning and the teacher of distillation all build
their model through it, so it sits beside the model rather than in any one of them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding

from afm.model.initializer import init_params
from afm.model.params import ParamLayout, flatten_state, logical_axes
from afm.model.transformer import Transformer

Params = dict[str, jax.Array]


@dataclass
class ModelParts:
    """The model split for functional steps: structure, flat parameter layout, logical
    axes, and how to rebuild a ``Transformer`` from a flat parameter dict."""

    config: Any
    graphdef: Any
    rest: Any
    layout: ParamLayout
    shapes: dict[str, tuple[int, ...]]
    names: dict[str, tuple[str | None, ...] | None]
    seed: int
    dtypes: dict[str, Any]

    @classmethod
    def build(cls, mcfg: Any, seed: int) -> ModelParts:
        abstract = nnx.eval_shape(lambda: _create(mcfg, seed))
        graphdef, abs_params, rest = nnx.split(abstract, nnx.Param, ...)
        flat_abs, layout = flatten_state(abs_params)
        if jax.tree.leaves(rest):
            rest = jax.jit(lambda: nnx.split(_create(mcfg, seed), nnx.Param, ...)[2])()
        shapes = {k: tuple(v.shape) for k, v in flat_abs.items()}
        # float32 masters; integer storage (a palettized base) keeps its dtype
        dtypes = {k: v.dtype if not jnp.issubdtype(v.dtype, jnp.floating) else jnp.float32 for k, v in flat_abs.items()}
        return cls(mcfg, graphdef, rest, layout, shapes, logical_axes(abs_params), seed, dtypes)

    @staticmethod
    def layout_of(mcfg: Any) -> ParamLayout:
        """The flat parameter layout of a model config (traced once per config)."""
        return _layout(mcfg)

    def build_model(self, params: Params) -> Any:
        """A ``Transformer`` over ``params``' model entries (other keys are ignored)."""
        return nnx.merge(self.graphdef, self.layout.unflatten({k: params[k] for k in self.layout.keys}), self.rest)

    def init(self, shardings: dict[str, NamedSharding] | None = None) -> Params:
        """Fresh float32 parameters (muParam-simple init), made directly in ``shardings``
        one block at a time (``afm.model.initializer``: the compile does not grow with depth)."""

        params = init_params(self.config, self.seed, shardings)
        return {k: v if v.dtype == self.dtypes[k] else v.astype(self.dtypes[k]) for k, v in params.items()}


@functools.lru_cache(maxsize=16)
def _layout(mcfg: Any) -> ParamLayout:
    abstract = nnx.eval_shape(lambda: _create(mcfg, 0))
    return flatten_state(nnx.split(abstract, nnx.Param, ...)[1])[1]


def _create(mcfg: Any, seed: int) -> Any:
    return Transformer(mcfg, rngs=nnx.Rngs(params=seed))


__all__ = ["ModelParts", "Params"]
