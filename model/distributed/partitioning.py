"""Activation sharding hints: logical axis names on activations, mapped to a mesh by the caller.

The model names the axes of its activations (``batch``, ``seq``, ``embed``, ``heads``,
``kv_heads``, ``mlp``, ``vocab``) and calls :func:`constrain`; it never sees a mesh. The
trainer activates a mesh and a rule table for the duration of tracing::

    with activation_sharding(mesh, {"batch": ("data", "fsdp"), "seq": ("sequence",), ...}):
        jax.jit(step)(...)

Outside such a block (evaluation, sampling, export, unit tests) every hint is a no-op,
so the same module runs unchanged on one device. Without these hints GSPMD has to guess
activation layouts from the parameter shardings alone, which it does badly for
sequence parallelism (it tends to all-gather the sequence right after the embedding).

A dimension is only constrained when it divides evenly over its mesh axes (a tiny
eval batch on a big mesh stays replicated instead of failing), the rule MaxText's
logical-axis rules follow too. A mesh axis is used at most once per array.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

Array = jax.Array
Logical = Sequence[str | None]


@dataclass(frozen=True)
class ActivationRules:
    """A mesh and, per logical activation axis, the mesh axes it is split over."""

    mesh: Mesh
    rules: Mapping[str, tuple[str, ...]]

    def axes(self, name: str | None) -> tuple[str, ...]:
        """Mesh axes (of size > 1) a logical axis maps to."""
        if name is None:
            return ()
        return tuple(a for a in self.rules.get(name, ()) if self.mesh.shape.get(a, 1) > 1)

    def size(self, name: str | None) -> int:
        """How many shards the logical axis is split into (1 = replicated)."""
        return math.prod(self.mesh.shape[a] for a in self.axes(name))

    def spec(self, logical: Logical, shape: Sequence[int] | None = None) -> PartitionSpec:
        """PartitionSpec for ``logical`` names; uneven or repeated axes stay replicated."""
        used: set[str] = set()
        out: list[Any] = []
        for i, name in enumerate(logical):
            axes = tuple(a for a in self.axes(name) if a not in used)
            size = math.prod(self.mesh.shape[a] for a in axes)
            if not axes or (shape is not None and shape[i] % size):
                out.append(None)
                continue
            used.update(axes)
            out.append(axes[0] if len(axes) == 1 else axes)
        return PartitionSpec(*out)


_ACTIVE: contextvars.ContextVar[ActivationRules | None] = contextvars.ContextVar(
    "afm_activation_rules", default=None
)


@contextlib.contextmanager
def activation_sharding(mesh: Mesh, rules: Mapping[str, tuple[str, ...]]) -> Iterator[ActivationRules]:
    """Make :func:`constrain` shard activations over ``mesh`` while tracing inside."""
    active = ActivationRules(mesh, dict(rules))
    token = _ACTIVE.set(active)
    try:
        yield active
    finally:
        _ACTIVE.reset(token)


def current() -> ActivationRules | None:
    """The active rules, or None outside :func:`activation_sharding`."""
    return _ACTIVE.get()


def constrain(x: Array, logical: Logical) -> Array:
    """``with_sharding_constraint`` by logical names; a no-op without active rules."""
    active = _ACTIVE.get()
    if active is None:
        return x
    if len(logical) != x.ndim:
        raise ValueError(f"constrain: {len(logical)} names for an array of rank {x.ndim}")
    spec = active.spec(logical, x.shape)
    return jax.lax.with_sharding_constraint(x, NamedSharding(active.mesh, spec))


def shards(name: str) -> int:
    """Number of shards of a logical axis under the active rules (1 without rules)."""
    active = _ACTIVE.get()
    return 1 if active is None else active.size(name)
