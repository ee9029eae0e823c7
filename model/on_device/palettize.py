"""Palettized weights (report §5.2): k-means lookup tables per group of 16 output channels.

Every projection weight is stored as small integer *indices* into a per-group lookup
table (LUT) of ``2**bits`` float16 values found by k-means. A group is 16 consecutive
output channels (coremltools' ``granularity="per_grouped_channel", group_size=16`` on a
``[out, in]`` weight: 16 rows there, 16 columns in our ``[in, out]`` layout), so one LUT
serves ``16 x fan_in`` weights (the report's "block size up to 100k"). ``bits`` is 4 by
default and 2 for the layers the sensitivity analysis pushes down (``afm.training.compress.quantize``).
The tied embedding is stored as int8 with one symmetric float16 scale per vocabulary row
(per output channel of the readout).

What lives here, one job each:

* :func:`kmeans_1d`: optimal 1-D k-means per group (``kmeans1d``, the dynamic program
  coremltools' palettizer uses), so our tables are the ones coremltools computes
  (``tests/slow/model/test_palettize_parity.py``).
* :func:`palettize_array` / :func:`dequantize_array`: a dense weight <-> (packed indices,
  LUT). Indices are bit-packed along the last axis (two 4-bit or four 2-bit indices per
  byte), in memory and on disk, so a palettized model really holds ``bits`` per weight.
* :class:`PalettizedWeight` and :class:`Int8Embedding`: NNX modules that stand where a
  dense ``nnx.Param`` stood. Like a Variable, ``weight[...]`` gives the dense array, so
  the model code reads every weight the same way and the forward pass dequantizes on the
  fly (inside ``jit``; nothing dense is stored).
* :func:`palettize_structure`: turn a model's dense projections into palettized ones as
  its config's :class:`~afm.model.config.Palettization` says (the model constructor calls
  it, so ``Transformer(cfg)`` of a quantized config *is* the quantized model and every
  loader, trainer and evaluator builds it from the config alone).
* :func:`bits_report`: exact storage accounting per tensor and in total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

Array = jax.Array

# The projections of a block: (sub-module, attribute, number of leading INPUT axes).
PROJECTIONS: dict[str, tuple[str, str, int]] = {
    "q": ("attn", "wq", 1),
    "k": ("attn", "wk", 1),
    "v": ("attn", "wv", 1),
    "o": ("attn", "wo", 2),
    "gate": ("mlp", "w_gate", 1),
    "up": ("mlp", "w_up", 1),
    "down": ("mlp", "w_down", 1),
}
SUPPORTED_BITS = (2, 4, 8)


def projection_paths(n_layers: int) -> list[str]:
    """Flat paths (``layers/3/attn/wq``) of every projection weight, in model order."""
    return [f"layers/{i}/{sub}/{attr}" for i in range(n_layers) for sub, attr, _ in PROJECTIONS.values()]


def input_axes(path: str) -> int:
    """How many leading axes of the weight at ``path`` are input axes (``wo``: 2)."""
    attr = path.rsplit("/", 1)[-1]
    for _sub, name, n_in in PROJECTIONS.values():
        if name == attr:
            return n_in
    raise ValueError(f"{path} is not a projection weight")


# ---------------------------------------------------------------------------- k-means


def _searchsorted_rows(sorted_rows: np.ndarray, queries: np.ndarray, side: str = "right") -> np.ndarray:
    """Row-wise ``searchsorted(sorted_rows[g], queries[g], side)`` for all rows at once:
    each row is shifted into its own disjoint band of the real line (float64)."""
    sorted_rows = np.asarray(sorted_rows, np.float64)
    queries = np.asarray(queries, np.float64)
    g, n = sorted_rows.shape
    lo = min(sorted_rows.min(), queries.min())
    span = max(sorted_rows.max(), queries.max()) - lo + 1.0
    offsets = (np.arange(g, dtype=np.float64) * span)[:, None]
    flat = (sorted_rows - lo + offsets).ravel()
    pos = np.searchsorted(flat, (queries - lo + offsets).ravel(), side=side)  # type: ignore[call-overload]
    return pos.reshape(queries.shape) - (np.arange(g) * n)[:, None]


def kmeans_1d(values: np.ndarray, k: int) -> np.ndarray:
    """Centroids ``[G, k]`` (ascending, float64) of optimal 1-D k-means on each row of
    ``values [G, n]``.

    Optimal, not Lloyd: in one dimension the global optimum is found exactly by dynamic
    programming over the sorted values (Wu 1991; Grønlund et al. 2017), which the
    ``kmeans1d`` package implements in C++ (O(k n) with SMAWK) and coremltools uses for
    its own palettizer. Lloyd's iterations from quantile seeds end 10-20% above that
    optimum on 1,024-weight groups of a Gaussian matrix, k-means++ (scikit-learn) about 7%
    (measured in ``tests/unit/model/test_palettize.py``). A row with fewer than ``k``
    distinct values gets those values, the last one repeated (coremltools pads with zeros;
    repeating keeps the table ascending).
    """
    try:
        import kmeans1d
    except ImportError as exc:  # pragma: no cover - part of the train extra
        raise ImportError("palettization needs the kmeans1d package (pip install 'afm[train]')") from exc

    x = np.asarray(values, dtype=np.float64)
    out = np.empty((x.shape[0], k), np.float64)
    for r, row in enumerate(x):
        distinct = np.unique(row)
        if distinct.size <= k:
            out[r] = np.concatenate([distinct, np.full(k - distinct.size, distinct[-1])])
            continue
        _, centroids = kmeans1d.cluster(row, k)
        out[r] = np.sort(np.asarray(centroids, np.float64))
    return out


def nearest_index(values: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Index of the nearest LUT entry for each value (``values [G, n]``, ascending
    ``lut [G, k]``); a value exactly between two entries takes the lower one."""
    lut = np.asarray(lut, np.float64)
    borders = (lut[:, :-1] + lut[:, 1:]) / 2
    return _searchsorted_rows(borders, values, side="left").astype(np.uint8)


# ---------------------------------------------------------------------------- arrays


def pack_bits(indices: np.ndarray, bits: int) -> np.ndarray:
    """Pack ``uint8`` indices (< 2**bits) along the last axis, lowest bits first."""
    if bits == 8:
        return np.asarray(indices, np.uint8)
    per = 8 // bits
    idx = np.asarray(indices, np.uint8)
    if idx.shape[-1] % per:
        raise ValueError(f"last axis {idx.shape[-1]} is not a multiple of {per} for {bits}-bit packing")
    grouped = idx.reshape(*idx.shape[:-1], idx.shape[-1] // per, per).astype(np.uint16)
    shifts = (np.arange(per) * bits).astype(np.uint16)
    return (grouped << shifts).sum(axis=-1).astype(np.uint8)


def unpack_bits(packed: Array, bits: int) -> Array:
    """Inverse of :func:`pack_bits`, in JAX (runs inside the forward pass)."""
    if bits == 8:
        return packed
    per = 8 // bits
    shifts = jnp.arange(per, dtype=jnp.uint8) * bits
    out = (packed[..., None] >> shifts) & jnp.uint8((1 << bits) - 1)
    return out.reshape(*packed.shape[:-1], packed.shape[-1] * per)


@dataclass(frozen=True)
class PalettizedArray:
    """One palettized tensor: packed indices (the weight's shape, last axis packed) and
    the LUT ``[groups, 2**bits]`` (group ``g`` = flattened output channels ``16g .. 16g+15``)."""

    indices: np.ndarray
    lut: np.ndarray
    bits: int
    shape: tuple[int, ...]
    n_in: int
    group_size: int


def _as_groups(w: np.ndarray, n_in: int, group_size: int) -> np.ndarray:
    """``w`` (input axes first) -> ``[groups, fan_in * group_size]``."""
    fan_in = int(np.prod(w.shape[:n_in]))
    out = int(np.prod(w.shape[n_in:]))
    if out % group_size:
        raise ValueError(f"{out} output channels do not split into groups of {group_size}")
    w2 = w.reshape(fan_in, out // group_size, group_size)
    return np.transpose(w2, (1, 0, 2)).reshape(out // group_size, fan_in * group_size)


def _from_groups(groups: np.ndarray, shape: tuple[int, ...], n_in: int, group_size: int) -> np.ndarray:
    fan_in = int(np.prod(shape[:n_in]))
    g = groups.shape[0]
    return np.transpose(groups.reshape(g, fan_in, group_size), (1, 0, 2)).reshape(shape)


def palettize_array(
    w: np.ndarray, bits: int, *, n_in: int = 1, group_size: int = 16, lut_dtype: str = "float16"
) -> PalettizedArray:
    """k-means palettization of one weight (input axes first, ``n_in`` of them)."""
    if bits not in SUPPORTED_BITS:
        raise ValueError(f"bits must be one of {SUPPORTED_BITS}, got {bits}")
    w = np.asarray(w, np.float32)
    groups = _as_groups(w, n_in, group_size)
    centroids = kmeans_1d(groups, 1 << bits)
    lut = centroids.astype(lut_dtype)
    # Indices against the LUT as stored (rounded to its dtype): nearest stored value.
    idx = nearest_index(groups, lut.astype(np.float64))
    indices = _from_groups(idx, w.shape, n_in, group_size)
    return PalettizedArray(pack_bits(indices, bits), lut, bits, tuple(w.shape), n_in, group_size)


def dequantize_array(p: PalettizedArray) -> np.ndarray:
    """The dense float32 weight a :class:`PalettizedArray` stands for (NumPy)."""
    idx = np.asarray(unpack_bits(jnp.asarray(p.indices), p.bits))
    groups = _as_groups(idx, p.n_in, p.group_size).astype(np.int64)
    vals = np.take_along_axis(p.lut.astype(np.float32), groups, axis=1)
    return _from_groups(vals, p.shape, p.n_in, p.group_size)


def quantize_int8_rows(table: np.ndarray, scale_dtype: str = "float16") -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8: ``q = round(x / s)``, ``s = max|row| / 127`` (stored in
    ``scale_dtype``; the rounding uses the stored scale). Values in [-127, 127]."""
    t = np.asarray(table, np.float32)
    scale = (np.abs(t).max(axis=1) / 127.0).astype(scale_dtype)
    s = scale.astype(np.float32)
    safe = np.where(s > 0, s, 1.0)
    q = np.clip(np.rint(t / safe[:, None]), -127, 127).astype(np.int8)
    return q, scale


# ---------------------------------------------------------------------------- modules


def _param(value: Any, axes: tuple[str | None, ...]) -> nnx.Param:
    return nnx.Param(value, out_sharding=axes, eager_sharding=False)


class PalettizedWeight(nnx.Module):
    """A projection weight held as packed indices + float16 LUTs; ``w[...]`` dequantizes.

    ``indices`` carry the dense weight's logical axes (so they shard like it); the LUTs are
    tiny and replicated. ``bits``, ``shape``, ``n_in`` and ``group_size`` are static.
    """

    def __init__(
        self, indices: Any, lut: Any, *, bits: int, shape: tuple[int, ...], n_in: int,
        group_size: int, axes: tuple[str | None, ...],
    ):
        self.bits = bits
        self.shape = tuple(shape)
        self.n_in = n_in
        self.group_size = group_size
        self.indices = _param(indices, axes)
        self.lut = _param(lut, (None, None))

    @classmethod
    def empty(cls, shape: tuple[int, ...], bits: int, *, n_in: int, group_size: int,
              axes: tuple[str | None, ...], lut_dtype: str = "float16") -> PalettizedWeight:
        """Zeros of the right shapes (a structure to restore a checkpoint into)."""
        out = int(np.prod(shape[n_in:]))
        packed = (*shape[:-1], shape[-1] * bits // 8)
        return cls(jnp.zeros(packed, jnp.uint8), jnp.zeros((out // group_size, 1 << bits), lut_dtype),
                   bits=bits, shape=shape, n_in=n_in, group_size=group_size, axes=axes)

    def dequantize(self) -> Array:
        idx = unpack_bits(self.indices[...], self.bits).astype(jnp.int32)
        out_shape = self.shape[self.n_in:]
        group = (jnp.arange(int(np.prod(out_shape)), dtype=jnp.int32) // self.group_size).reshape(out_shape)
        k = 1 << self.bits
        return jnp.take(self.lut[...].reshape(-1), group * k + idx, axis=0)

    def __getitem__(self, key: Any) -> Array:
        return self.dequantize()[key]


class Int8Embedding(nnx.Module):
    """The tied embedding as int8 values with one symmetric scale per vocabulary row;
    ``embed[...]`` gives the dense table (lookup and readout both read it that way)."""

    def __init__(self, values: Any, scale: Any):
        self.values = _param(values, ("vocab", "embed"))
        self.scale = _param(scale, ("vocab",))

    @classmethod
    def empty(cls, vocab: int, dim: int, scale_dtype: str = "float16") -> Int8Embedding:
        return cls(jnp.zeros((vocab, dim), jnp.int8), jnp.zeros((vocab,), scale_dtype))

    def __getitem__(self, key: Any) -> Array:
        table = self.values[...].astype(jnp.float32) * self.scale[...].astype(jnp.float32)[:, None]
        return table[key]


# ---------------------------------------------------------------------------- structure


def _axes_of(param: nnx.Param) -> tuple[str | None, ...]:
    meta = param.get_metadata()
    for key in ("out_sharding", "sharding_names", "sharding"):
        if meta.get(key):
            return tuple(meta[key])
    return (None,) * param[...].ndim


def palettize_structure(model: Any, spec: Any) -> None:
    """Replace ``model``'s dense weights by empty palettized ones per ``spec``
    (:class:`afm.model.config.Palettization`), in place. Values come from a checkpoint."""
    bits = dict(spec.bits)
    for path, b in bits.items():
        parts = path.split("/")
        if len(parts) != 4 or parts[0] != "layers":
            raise ValueError(f"palettization: {path!r} is not a projection path (layers/I/attn/wq)")
        owner = getattr(model.layers[int(parts[1])], parts[2])
        dense = getattr(owner, parts[3])
        shape = tuple(dense[...].shape)
        setattr(owner, parts[3], PalettizedWeight.empty(
            shape, b, n_in=input_axes(path), group_size=spec.group_size, axes=_axes_of(dense),
            lut_dtype=spec.lut_dtype,
        ))
    if spec.embed_bits:
        if spec.embed_bits != 8:
            raise ValueError(f"the embedding is quantized to int8 only, got embed_bits={spec.embed_bits}")
        v, d = model.embed[...].shape
        model.embed = Int8Embedding.empty(v, d, spec.lut_dtype)


# ---------------------------------------------------------------------------- accounting


@dataclass(frozen=True)
class TensorBits:
    """Storage of one tensor: ``weights`` values, ``bits`` in total, ``format``."""

    path: str
    shape: tuple[int, ...]
    weights: int
    bits: int
    format: str

    @property
    def bpw(self) -> float:
        return self.bits / max(self.weights, 1)


def palettized_bits(shape: tuple[int, ...], bits: int, *, n_in: int, group_size: int = 16,
                    lut_bits: int = 16) -> int:
    """Indices + LUTs of one palettized tensor."""
    n = int(np.prod(shape))
    groups = int(np.prod(shape[n_in:])) // group_size
    return n * bits + groups * (1 << bits) * lut_bits


def int8_rows_bits(vocab: int, dim: int, scale_bits: int = 16) -> int:
    return vocab * dim * 8 + vocab * scale_bits


def bits_report(cfg: Any, *, dense_bits: int | None = None) -> list[TensorBits]:
    """Exact storage of every parameter of ``cfg``'s model, palettized or not.

    Palettized projections: ``bits`` per index + ``2**bits`` float16 entries per group of
    16 output channels. int8 embedding: 8 bits per value + a float16 scale per row. Every
    other tensor (norm scales, unquantized projections, a dense embedding) at
    ``dense_bits``: by default as a palettized checkpoint stores them (``param_dtype``,
    float32), and 16 for a dense model (the bfloat16 model of Table 10). The tied
    embedding is one tensor, counted once.
    """
    spec = cfg.palettization
    if dense_bits is None:
        dense_bits = 8 * np.dtype(cfg.param_dtype).itemsize if spec else 16
    bits = dict(spec.bits) if spec else {}
    group = spec.group_size if spec else 16
    lut_bits = 8 * np.dtype(spec.lut_dtype).itemsize if spec else 16
    d, n, k, h, f = cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.ffn_dim
    shapes = {"wq": (d, n, h), "wk": (d, k, h), "wv": (d, k, h), "wo": (n, h, d),
              "w_gate": (d, f), "w_up": (d, f), "w_down": (f, d)}
    rows: list[TensorBits] = []
    if spec and spec.embed_bits:
        rows.append(TensorBits("embed", (cfg.vocab_size, d), cfg.vocab_size * d,
                               int8_rows_bits(cfg.vocab_size, d, lut_bits), "int8/row"))
    else:
        rows.append(TensorBits("embed", (cfg.vocab_size, d), cfg.vocab_size * d,
                               cfg.vocab_size * d * dense_bits, f"float{dense_bits}"))
    for i in range(cfg.n_layers):
        for sub, attr, n_in in PROJECTIONS.values():
            path = f"layers/{i}/{sub}/{attr}"
            shape = shapes[attr]
            count = int(np.prod(shape))
            if path in bits:
                total = palettized_bits(shape, bits[path], n_in=n_in, group_size=group, lut_bits=lut_bits)
                rows.append(TensorBits(path, shape, count, total, f"palette{bits[path]}"))
            else:
                rows.append(TensorBits(path, shape, count, count * dense_bits, f"float{dense_bits}"))
        norms = 2 * d + 2 * h
        rows.append(TensorBits(f"layers/{i}/norms", (norms,), norms, norms * dense_bits, f"float{dense_bits}"))
    rows.append(TensorBits("final_norm", (d,), d, d * dense_bits, f"float{dense_bits}"))
    return rows


def summarize_bits(rows: list[TensorBits]) -> dict[str, float]:
    """Totals: weights, bits, bpw overall and over the projections alone, megabytes."""
    weights = sum(r.weights for r in rows)
    total = sum(r.bits for r in rows)
    proj = [r for r in rows if r.path.startswith("layers/") and not r.path.endswith("norms")]
    pw, pb = sum(r.weights for r in proj), sum(r.bits for r in proj)
    return {
        "weights": weights,
        "bits": total,
        "bpw": total / max(weights, 1),
        "projection_bpw": pb / max(pw, 1),
        "megabytes": total / 8 / 1e6,
        "two_bit_tensors": sum(1 for r in rows if r.format == "palette2"),
    }
