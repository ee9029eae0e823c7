"""Parameters as a flat ``{"path/to/param": array}`` dict, and their fingerprint.

The trainer keeps parameters and optimizer state as flat dicts keyed by a '/'-joined
path: that form is the same across Flax versions, checkpoints cleanly with Orbax (no
integer dict keys), gives a fixed order for ``params_sha256`` and lets muParam and the
sharding rules be written as plain ``path -> value`` maps.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from flax import nnx


def _variable_suffix_len() -> int:
    """How many path entries a Variable adds below its own key (version-dependent:
    ``.value`` as a GetAttrKey today, possibly a flattened index elsewhere)."""
    paths, _ = jax.tree_util.tree_flatten_with_path(nnx.Param(np.zeros((), np.float32)))
    return len(paths[0][0]) if paths else 0


_SUFFIX = _variable_suffix_len()


def _path_str(path: tuple[Any, ...], strip_variable: bool = True) -> str:
    if strip_variable and _SUFFIX:
        path = path[:-_SUFFIX]
    parts: list[str] = []
    for key in path:
        if isinstance(key, jax.tree_util.DictKey):
            parts.append(str(key.key))
        elif isinstance(key, jax.tree_util.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, jax.tree_util.GetAttrKey):
            parts.append(str(key.name))
        elif isinstance(key, jax.tree_util.FlattenedIndexKey):
            parts.append(str(key.key))
        else:
            parts.append(str(key))
    return "/".join(parts)


@dataclass
class ParamLayout:
    """How a flat params dict maps back onto the model's ``nnx.State``."""

    treedef: Any
    keys: list[str]  # flat keys in the treedef's leaf order

    def unflatten(self, flat: dict[str, Any]) -> Any:
        return jax.tree.unflatten(self.treedef, [flat[k] for k in self.keys])


def leaf_paths(tree: Any) -> list[str]:
    """The flat key of each leaf of ``tree`` (as :func:`flatten_state` names it), in leaf order."""
    return [_path_str(path) for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


def flatten_state(state: Any) -> tuple[dict[str, Any], ParamLayout]:
    """``nnx.State`` (or any pytree) -> (flat dict, layout to rebuild it)."""
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(state)
    keys = [_path_str(path) for path, _ in leaves_with_path]
    if len(set(keys)) != len(keys):
        raise ValueError("parameter paths are not unique after flattening")
    flat = {k: leaf for k, (_, leaf) in zip(keys, leaves_with_path)}
    return flat, ParamLayout(treedef, keys)


def logical_axes(abstract_state: Any) -> dict[str, tuple[str | None, ...] | None]:
    """Flat ``path -> logical axis names`` from the ``nnx.with_partitioning`` metadata."""
    out: dict[str, tuple[str | None, ...] | None] = {}

    def visit(path: tuple[Any, ...], var: Any) -> None:
        names = None
        if isinstance(var, nnx.Variable):
            meta = var.get_metadata()
            for key in ("out_sharding", "sharding_names", "sharding"):
                if meta.get(key):
                    names = tuple(meta[key])
                    break
        out[_path_str(path, strip_variable=False)] = names

    jax.tree_util.tree_map_with_path(
        visit, abstract_state, is_leaf=lambda x: isinstance(x, nnx.Variable)
    )
    return out


def params_sha256(flat: dict[str, Any]) -> str:
    """SHA-256 over (path, float32 bytes) of every parameter, in sorted path order."""
    digest = hashlib.sha256()
    for key in sorted(flat):
        arr = np.asarray(jax.device_get(flat[key]), dtype=np.float32)
        digest.update(key.encode())
        digest.update(str(arr.shape).encode())
        digest.update(np.ascontiguousarray(arr).tobytes())
    return digest.hexdigest()


def count_params(flat: dict[str, Any]) -> int:
    return int(sum(int(np.prod(x.shape)) for x in flat.values()))
