"""Device mesh and logical-axis sharding rules (data / fsdp / tensor / sequence).

Parameters carry logical axis names from the model (``vocab``, ``embed``, ``q_heads``,
``kv_heads``, ``head_dim``, ``mlp``, ``norm``); the rules below map them onto mesh axes
the way MaxText does: the embed dimension is sharded by FSDP, heads and the FFN hidden
dimension by tensor parallelism, and the batch over data x fsdp, with the sequence axis
splitting the tokens of each row for the long-context stage. A dimension is only
sharded when it divides evenly (e.g. 2 KV heads on a tensor axis of 8 stay replicated),
and a mesh axis is used at most once per tensor.

Across TPU slices (DCN) only the ``data`` axis should span slices: ``make_mesh`` puts
it outermost so that contiguous device blocks (one slice each) own the other axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor", "sequence")
BATCH_AXES = ("data", "fsdp")

# logical name -> mesh axes it may be sharded over (first fit wins; None = replicated)
LOGICAL_RULES: dict[str, tuple[str, ...]] = {
    "vocab": ("tensor",),
    "embed": ("fsdp",),
    "q_heads": ("tensor",),
    "kv_heads": ("tensor",),
    "head_dim": (),
    "mlp": ("tensor",),
    "norm": (),
    "layers": (),
}


# Activation axes (``afm.model.distributed.partitioning``): the batch over data x fsdp, the tokens of a
# row over ``sequence``, heads / FFN hidden / vocabulary over ``tensor``. The model dimension
# of activations stays whole (FSDP shards weights, not activations).
ACTIVATION_RULES: dict[str, tuple[str, ...]] = {
    "batch": BATCH_AXES,
    "seq": ("sequence",),
    "embed": (),
    "heads": ("tensor",),
    "kv_heads": ("tensor",),
    "mlp": ("tensor",),
    "vocab": ("tensor",),
}


@dataclass
class MeshConfig:
    """Mesh shape; an axis of -1 (data or fsdp) takes every device the others leave."""

    data: int = -1
    fsdp: int = 1
    tensor: int = 1
    sequence: int = 1

    def shape(self, n_devices: int) -> tuple[int, int, int, int]:
        """Concrete sizes; at most one of data/fsdp may be -1 (fill the rest)."""
        sizes = {"data": self.data, "fsdp": self.fsdp, "tensor": self.tensor, "sequence": self.sequence}
        fill = [k for k, v in sizes.items() if v == -1]
        if len(fill) > 1 or (fill and fill[0] not in ("data", "fsdp")):
            raise ValueError(f"mesh: only one of data/fsdp may be -1 (got {self})")
        if any(v < 1 for k, v in sizes.items() if k not in fill):
            raise ValueError(f"mesh axes must be >= 1 (got {self})")
        fixed = math.prod(v for k, v in sizes.items() if k not in fill)
        if fill:
            sizes[fill[0]] = n_devices // fixed
        if math.prod(sizes.values()) != n_devices or min(sizes.values()) < 1:
            raise ValueError(f"mesh {self} does not cover {n_devices} devices")
        return (sizes["data"], sizes["fsdp"], sizes["tensor"], sizes["sequence"])


def make_mesh(cfg: MeshConfig, devices: list[Any] | None = None) -> Mesh:
    """A mesh over ``devices`` (default: all) with Auto (GSPMD) axes.

    On a multislice TPU job (devices carry ``slice_index``) the ``data`` axis is split
    over slices (DCN) and every other axis stays inside a slice (ICI), via
    ``mesh_utils.create_hybrid_device_mesh``; otherwise ``create_device_mesh`` orders the
    devices for the physical topology (plain reshape where it cannot, e.g. CPU).
    """
    try:
        from jax.experimental import mesh_utils
    except ImportError:  # a JAX without the experimental helpers: plain device order
        mesh_utils = None

    devices = list(jax.devices() if devices is None else devices)
    shape = cfg.shape(len(devices))
    slices = {getattr(d, "slice_index", 0) for d in devices}
    n_slices = len(slices)
    if n_slices > 1:
        if mesh_utils is None:
            raise RuntimeError("multislice meshes need jax.experimental.mesh_utils")
        if shape[0] % n_slices:
            raise ValueError(f"mesh data={shape[0]} must be a multiple of the {n_slices} slices")
        ici = (shape[0] // n_slices, *shape[1:])
        grid = mesh_utils.create_hybrid_device_mesh(ici, (n_slices, 1, 1, 1), devices=devices)
    else:
        grid = np.asarray(devices, dtype=object).reshape(shape)
        if mesh_utils is not None:
            try:
                grid = mesh_utils.create_device_mesh(shape, devices=devices)
            except (ValueError, NotImplementedError, AssertionError):
                pass  # topology unknown to JAX (CPU, odd shapes): keep the given order
    auto = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)
    return Mesh(grid, MESH_AXES, axis_types=auto)


def logical_to_spec(
    names: tuple[str | None, ...] | None, shape: tuple[int, ...], mesh: Mesh
) -> PartitionSpec:
    """PartitionSpec for one tensor from its logical names (even splits only)."""
    if not names:
        return PartitionSpec()
    if len(names) != len(shape):
        raise ValueError(f"logical axes {names} do not match shape {shape}")
    used: set[str] = set()
    spec: list[Any] = []
    for name, dim in zip(names, shape):
        axes = [
            a for a in LOGICAL_RULES.get(name or "", ())
            if a not in used and mesh.shape[a] > 1
        ]
        size = math.prod(mesh.shape[a] for a in axes)
        if axes and dim % size == 0:
            used.update(axes)
            spec.append(axes[0] if len(axes) == 1 else tuple(axes))
        else:
            spec.append(None)
    return PartitionSpec(*spec)


def param_shardings(
    shapes: dict[str, tuple[int, ...]],
    names: dict[str, tuple[str | None, ...] | None],
    mesh: Mesh,
) -> dict[str, NamedSharding]:
    return {
        k: NamedSharding(mesh, logical_to_spec(names.get(k), tuple(shape), mesh))
        for k, shape in shapes.items()
    }


def batch_spec(mesh: Mesh, seq_len: int) -> PartitionSpec:
    """``[batch, seq]`` arrays: batch over data x fsdp, tokens over ``sequence``."""
    seq = "sequence" if mesh.shape["sequence"] > 1 and seq_len % mesh.shape["sequence"] == 0 else None
    return PartitionSpec(BATCH_AXES, seq)


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def global_batch(batch: dict[str, np.ndarray], mesh: Mesh, spec: PartitionSpec) -> dict[str, jax.Array]:
    """This host's slice of the batch -> global ``jax.Array`` sharded by ``spec``.

    Each host holds ``global_batch / process_count`` rows (the data pipeline shards by
    host); ``make_array_from_process_local_data`` stitches them into one global array.
    """
    sharding = NamedSharding(mesh, spec)
    return {
        k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
        for k, v in batch.items()
    }
