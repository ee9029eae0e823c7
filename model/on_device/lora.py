"""LoRA adapters on the projections of the AFM transformer (report §5.1).

One frozen base model serves many small adapters swapped at run time. An adapter on a
projection ``W`` (input axes first) adds a low-rank path::

    y = x W + scale * (x A) B        A: [*in, r], B: [r, *out], scale = alpha / r

computed on the activations (never materialising ``W + scale A B``), so the base weight
may be dense or palettized (``afm.model.on_device.palettize``: QLoRA-style training on the frozen
quantized base) and swapping adapters touches only ``A``, ``B`` and ``scale``.

* :class:`LoraConfig`: rank, alpha, which projections (``q k v o gate up down``).
* :class:`LoRA`: the module that stands in place of an adapted weight. Its ``A``/``B`` are
  ``nnx.LoRAParam`` and its scale a :class:`LoRAScale` variable, so they are *data* of the
  compiled forward: adapters with the same rank and targets swap without recompiling.
* :func:`attach` / :func:`detach` / :func:`merge`: model surgery (like PEFT's
  ``inject_adapter`` and ``merge_and_unload``), in place.
* :class:`Adapter`: the weights of one adapter as a flat ``{weight path: (A, B)}`` dict
  with its config; its file format lives in ``afm.model.checkpoints.adapter_io``.

Initialisation is PEFT's default: ``A ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (Kaiming
uniform with a = sqrt(5)), ``B = 0``, so a fresh adapter leaves the model unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from afm.model.on_device.palettize import PROJECTIONS
from afm.model.precision import to_compute

Array = jax.Array

# Adapter target name -> (block sub-module, weight attribute, number of input axes): the
# block's projections, defined once with palettization.
TARGETS: dict[str, tuple[str, str, int]] = PROJECTIONS
ALL_TARGETS: tuple[str, ...] = tuple(TARGETS)
SUITE_RANKS: tuple[int, ...] = (8, 16, 32)  # the report's suite of recovery adapters


@dataclass(frozen=True)
class LoraConfig:
    """Rank, alpha (``scale = alpha / rank``), targets and the layers adapted (all by default)."""

    rank: int = 16
    alpha: float = 32.0
    targets: tuple[str, ...] = ALL_TARGETS
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {self.rank}")
        if not (np.isfinite(self.alpha) and self.alpha > 0):  # alpha 0: an adapter that changes nothing
            raise ValueError(f"LoRA alpha must be a positive number, got {self.alpha}")
        unknown = [t for t in self.targets if t not in TARGETS]
        if unknown or not self.targets:
            raise ValueError(f"LoRA targets must be a non-empty subset of {ALL_TARGETS}, got {list(self.targets)}")
        object.__setattr__(self, "targets", tuple(t for t in ALL_TARGETS if t in self.targets))

    @property
    def scale(self) -> float:
        return float(self.alpha) / self.rank

    def weight_paths(self, n_layers: int) -> list[str]:
        """Flat paths of the adapted weights (``layers/3/attn/wq``), in model order."""
        layers = range(n_layers) if self.layers is None else self.layers
        return [f"layers/{i}/{TARGETS[t][0]}/{TARGETS[t][1]}" for i in layers for t in self.targets]

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "alpha": self.alpha, "targets": list(self.targets),
                "layers": None if self.layers is None else list(self.layers)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoraConfig:
        layers = data.get("layers")
        return cls(rank=int(data["rank"]), alpha=float(data["alpha"]),
                   targets=tuple(data.get("targets") or ALL_TARGETS),
                   layers=None if layers is None else tuple(int(i) for i in layers))


def target_of(path: str) -> tuple[str, int]:
    """``layers/3/attn/wq`` -> (``"q"``, number of input axes)."""
    attr = path.rsplit("/", 1)[-1]
    for name, (_sub, a, n_in) in TARGETS.items():
        if a == attr:
            return name, n_in
    raise ValueError(f"{path} is not an adaptable projection")


def weight_shapes(cfg: Any) -> dict[str, tuple[tuple[int, ...], tuple[str | None, ...]]]:
    """Projection attribute -> (dense shape, logical axes) for a model config."""
    d, n, k, h, f = cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.ffn_dim
    return {
        "wq": ((d, n, h), ("embed", "q_heads", "head_dim")),
        "wk": ((d, k, h), ("embed", "kv_heads", "head_dim")),
        "wv": ((d, k, h), ("embed", "kv_heads", "head_dim")),
        "wo": ((n, h, d), ("q_heads", "head_dim", "embed")),
        "w_gate": ((d, f), ("embed", "mlp")),
        "w_up": ((d, f), ("embed", "mlp")),
        "w_down": ((f, d), ("mlp", "embed")),
    }


def max_rank(cfg: Any, lora: LoraConfig) -> int:
    """The smallest side (inputs or outputs) over the weights ``lora`` adapts in ``cfg``."""
    shapes = weight_shapes(cfg)
    sides = [lora.rank]
    for path in lora.weight_paths(cfg.n_layers):
        shape, n_in = shapes[path.rsplit("/", 1)[-1]][0], target_of(path)[1]
        sides += [int(np.prod(shape[:n_in])), int(np.prod(shape[n_in:]))]
    return min(sides[1:]) if len(sides) > 1 else lora.rank


def adapter_shapes(cfg: Any, lora: LoraConfig) -> dict[str, dict[str, tuple[tuple[int, ...], tuple[str | None, ...]]]]:
    """``weight path -> {"a": (shape, axes), "b": (shape, axes)}`` for every adapted weight.
    The rank axis has no logical name (replicated); A shards like the weight's inputs, B
    like its outputs. A rank above a weight's smaller side adds parameters but no capacity
    (``A @ B`` has at most that rank), so it is refused with the largest that makes sense."""
    shapes = weight_shapes(cfg)
    out = {}
    widest = max_rank(cfg, lora)
    if lora.rank > widest:
        raise ValueError(f"LoRA rank {lora.rank} exceeds what this model's adapted weights hold (at most {widest}: "
                         f"the smaller side of a {cfg.dim}-wide projection); use --rank {widest} or less")
    for path in lora.weight_paths(cfg.n_layers):
        attr = path.rsplit("/", 1)[-1]
        shape, axes = shapes[attr]
        _, n_in = target_of(path)
        out[path] = {
            "a": ((*shape[:n_in], lora.rank), (*axes[:n_in], None)),
            "b": ((lora.rank, *shape[n_in:]), (None, *axes[n_in:])),
        }
    return out


def init_a(rng: Array, shape: tuple[int, ...], n_in: int, dtype: Any = jnp.float32) -> Array:
    """PEFT's default for A: Kaiming uniform (a = sqrt(5)) = U(+-1/sqrt(fan_in))."""
    bound = 1.0 / np.sqrt(int(np.prod(shape[:n_in])))
    return jax.random.uniform(rng, shape, dtype, -bound, bound)


class LoRAScale(nnx.Variable):
    """``alpha / rank`` of an attached adapter: a variable, so a swap needs no recompilation."""


def _lora_param(value: Any, axes: tuple[str | None, ...]) -> nnx.LoRAParam:
    return nnx.LoRAParam(value, out_sharding=axes, eager_sharding=False)


class LoRA(nnx.Module):
    """A projection weight with a LoRA adapter: ``lora(x) = x W + scale (x A) B``.

    ``base`` is the adapted weight as it was (an ``nnx.Param`` or a palettized weight);
    ``lora[...]`` gives the merged dense weight ``W + scale A B``.
    """

    def __init__(self, base: Any, a: Any, b: Any, scale: Any, *, n_in: int,
                 axes: tuple[tuple[str | None, ...], tuple[str | None, ...]] | None = None):
        a_axes, b_axes = axes or ((None,) * np.ndim(a), (None,) * np.ndim(b))
        self.base = base
        self.n_in = n_in
        self.lora_a = _lora_param(jnp.asarray(a), a_axes)
        self.lora_b = _lora_param(jnp.asarray(b), b_axes)
        self.scale = LoRAScale(jnp.asarray(scale, jnp.float32))

    def delta(self) -> Array:
        """``scale * A B`` in float32, the weight's shape."""
        a = self.lora_a[...].astype(jnp.float32)
        b = self.lora_b[...].astype(jnp.float32)
        return jnp.tensordot(a, b, axes=1) * self.scale[...]

    def __getitem__(self, key: Any) -> Array:
        return (self.base[...].astype(jnp.float32) + self.delta())[key]

    def __call__(self, x: Array) -> Array:
        dt = x.dtype
        y = jnp.tensordot(x, to_compute(self.base[...], dt), axes=self.n_in)
        low = jnp.tensordot(x, to_compute(self.lora_a[...], dt), axes=self.n_in)
        return y + jnp.tensordot(low, to_compute(self.lora_b[...], dt), axes=1) * self.scale[...].astype(dt)


@dataclass
class Adapter:
    """One adapter's weights (``{weight path: (A, B)}``), its config and provenance."""

    config: LoraConfig
    weights: dict[str, tuple[Any, Any]]
    meta: dict[str, Any] = field(default_factory=dict)

    def check_fits(self, cfg: Any) -> None:
        """Raise unless every weight exists in ``cfg``'s model with the right shapes."""
        expected = adapter_shapes(cfg, self.config)
        missing = set(expected) - set(self.weights)
        extra = set(self.weights) - set(expected)
        if missing or extra:
            raise ValueError(f"adapter does not match its config: missing {sorted(missing)[:3]}, "
                             f"unexpected {sorted(extra)[:3]}")
        for path, (a, b) in self.weights.items():
            want_a, want_b = expected[path]["a"][0], expected[path]["b"][0]
            if tuple(np.shape(a)) != want_a or tuple(np.shape(b)) != want_b:
                raise ValueError(f"adapter weight {path}: shapes {np.shape(a)}/{np.shape(b)} do not fit "
                                 f"this model ({want_a}/{want_b}): another base or rank")

    @property
    def num_params(self) -> int:
        return int(sum(np.size(a) + np.size(b) for a, b in self.weights.values()))


def _owner(model: Any, path: str) -> tuple[Any, str]:
    parts = path.split("/")
    return getattr(model.layers[int(parts[1])], parts[2]), parts[3]


def attach(model: Any, adapter: Adapter, *, scale: Any = None) -> Any:
    """Put ``adapter`` on ``model`` in place (replacing any adapter already there) and
    return the model. ``scale`` overrides ``alpha / rank`` (a traced value is fine)."""
    cfg = model.cfg
    shapes = adapter_shapes(cfg, adapter.config)
    s = adapter.config.scale if scale is None else scale
    for path, (a, b) in adapter.weights.items():
        owner, attr = _owner(model, path)
        base = getattr(owner, attr)
        if isinstance(base, LoRA):
            base = base.base
        _, n_in = target_of(path)
        axes = (shapes[path]["a"][1], shapes[path]["b"][1]) if path in shapes else None
        setattr(owner, attr, LoRA(base, a, b, s, n_in=n_in, axes=axes))
    return model


def adapted_paths(model: Any) -> list[str]:
    """Paths of the weights that carry an adapter now."""
    out = []
    for i, layer in enumerate(model.layers):
        for sub, attr, _ in TARGETS.values():
            if isinstance(getattr(getattr(layer, sub), attr), LoRA):
                out.append(f"layers/{i}/{sub}/{attr}")
    return out


def detach(model: Any) -> Any:
    """Remove every adapter (the base weights are untouched); returns the model."""
    for path in adapted_paths(model):
        owner, attr = _owner(model, path)
        setattr(owner, attr, getattr(owner, attr).base)
    return model


def merge(model: Any) -> Any:
    """Fold every adapter into its weight (``W <- W + scale A B``, float32), in place.

    The base must be dense: a palettized weight plus a delta is no longer on its palette
    (merge a dequantized copy, or keep the adapter separate as the report serves it)."""
    for path in adapted_paths(model):
        owner, attr = _owner(model, path)
        lora = getattr(owner, attr)
        if not isinstance(lora.base, nnx.Param):
            raise ValueError(f"{path}: cannot merge into a palettized weight; dequantize the base first")
        merged = lora.base[...].astype(jnp.float32) + lora.delta()
        lora.base[...] = merged.astype(lora.base[...].dtype)
        setattr(owner, attr, lora.base)
    return model


def extract(model: Any, config: LoraConfig, *, meta: dict[str, Any] | None = None) -> Adapter:
    """The adapter currently attached to ``model`` as host arrays."""
    weights = {}
    for path in adapted_paths(model):
        lora = getattr(*_owner(model, path))
        weights[path] = (np.asarray(jax.device_get(lora.lora_a[...])), np.asarray(jax.device_get(lora.lora_b[...])))
    return Adapter(config, weights, dict(meta or {}))


def adapter_filter() -> Any:
    """The NNX filter of an attached adapter's state (``nnx.state(model, adapter_filter())``)."""
    return nnx.Any(nnx.LoRAParam, LoRAScale)


def flat_adapter_params(prefix: str, paths: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Trainer-side naming: ``{prefix}/{path}/a`` and ``/b`` keys for each weight path."""
    return {path: (f"{prefix}/{path}/a", f"{prefix}/{path}/b") for path in paths}
