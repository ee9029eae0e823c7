"""``afm quantize``: a dense checkpoint -> a palettized one under a target bits per weight.

The report's scheme (§5.2): projections palettized with 4-bit k-means tables per group of
16 output channels, the tied embedding int8 per channel, and "some layers pushed to 2
bits" where the model is least sensitive, for 3.5-3.7 bits per weight on average.

How the 2-bit layers are chosen (mixed precision):

1. Every projection is palettized at 4 and at 2 bits (``afm.model.on_device.palettize``, optimal
   1-D k-means), the embedding to int8.
2. On calibration token rows, the loss of the all-4-bit model is the reference; each
   projection's *sensitivity* is the loss increase when that tensor alone drops to 2 bits.
3. Greedy knapsack: projections go to 2 bits in order of sensitivity per bit saved until
   the model's bits per weight (``palettize.bits_report``: indices + tables + scales +
   everything left dense, the tied table once) reaches the target. The loss of the chosen
   mix is measured too, so the report shows how additive the sensitivities were.

Calibration rows must not be the rows a result is reported on: pass training shards and
evaluate on held-out ones.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afm.io import read_shard
from afm.model.checkpoints.checkpoint import load_config, load_model, save_params
from afm.model.config import ModelConfig, Palettization
from afm.model.inference.scoring import token_logprobs
from afm.model.on_device import palettize
from afm.model.params import flatten_state
from afm.model.transformer import Transformer
from afm.training.data.shards import DataError, expand_paths


@dataclass(frozen=True)
class QuantizeOptions:
    target_bpw: float = 3.7
    base_bits: int = 4
    low_bits: int = 2
    group_size: int = 16
    embed_bits: int = 8  # 0: keep the embedding dense
    scope: str = "all"  # "all": bits per weight of the whole model; "projections": of the projections
    calibration_rows: int = 32
    seq_len: int = 256
    batch_rows: int = 8
    eos_id: int = 2

    def __post_init__(self) -> None:
        if not (math.isfinite(self.target_bpw) and self.target_bpw > 0):
            raise ValueError(f"target bits per weight must be a positive finite number, got {self.target_bpw!r}")
        if self.group_size < 1:
            raise ValueError(f"group size must be at least 1 output channel, got {self.group_size}")
        if self.scope not in ("all", "projections"):
            raise ValueError(f"scope must be 'all' or 'projections', got {self.scope!r}")
        for name in ("base_bits", "low_bits"):
            if getattr(self, name) not in palettize.SUPPORTED_BITS:
                raise ValueError(f"{name} must be one of {palettize.SUPPORTED_BITS}")
        if self.low_bits > self.base_bits:
            raise ValueError("low_bits must not exceed base_bits")
        if self.embed_bits not in (0, 8):
            raise ValueError("embed_bits must be 8 (int8 per row) or 0 (dense)")
        if self.calibration_rows < 1 or self.seq_len < 2:
            raise ValueError("need at least one calibration row of 2+ tokens")


# ------------------------------------------------------------------------------ data


def token_rows(patterns: list[str], rows: int, seq_len: int, eos_id: int = 2) -> np.ndarray:
    """``[rows, seq_len + 1]`` int32: documents of the token shards (sorted shard order,
    each followed by EOS) concatenated and cut into rows; the first ``rows`` rows."""

    need = rows * (seq_len + 1)
    stream: list[np.ndarray] = []
    have = 0
    for path in expand_paths(patterns):
        table = read_shard(path, columns=["tokens"])
        for toks in table.column("tokens").to_numpy(zero_copy_only=False):
            doc = np.asarray(toks, np.int32)
            stream += [doc, np.asarray([eos_id], np.int32)]
            have += doc.size + 1
            if have >= need:
                return np.concatenate(stream)[:need].reshape(rows, seq_len + 1)
    n = have // (seq_len + 1)
    if n == 0:
        raise DataError(f"calibration data {patterns} holds {have} tokens, fewer than one row of {seq_len + 1}")
    return np.concatenate(stream)[: n * (seq_len + 1)].reshape(n, seq_len + 1)


# ------------------------------------------------------------------------------ loss


class RowsLoss:
    """Mean next-token loss (nats per token) of a model on fixed token rows, optionally
    with some weights substituted (one compiled program: the weights are arguments).
    Calibration for ``afm quantize``; held-out loss for ``afm adapter table``. Works for
    any model ``load_model`` returns (dense, palettized, with an adapter)."""

    def __init__(self, model: Any, rows: np.ndarray, batch_rows: int):
        from flax import nnx

        self.graphdef, state = nnx.split(model)
        self.flat, self.layout = flatten_state(state)
        self.rows = rows
        self.batch_rows = max(1, min(batch_rows, rows.shape[0]))
        cfg = model.cfg

        def loss_sum(flat: dict[str, Any], batch: jax.Array) -> jax.Array:
            m = nnx.merge(self.graphdef, self.layout.unflatten(flat))
            hidden, _ = m.features(batch[:, :-1])
            scores = token_logprobs(hidden, m.embed[...], batch[:, 1:], logit_scale=cfg.logit_scale, chunk=1024)
            return -jnp.sum(scores.logprob)

        self._loss_sum = jax.jit(loss_sum)

    def __call__(self, replace: dict[str, np.ndarray] | None = None) -> float:
        flat = dict(self.flat)
        for key, value in (replace or {}).items():
            flat[key] = jnp.asarray(value, flat[key].dtype)
        total, count = 0.0, 0
        b = self.batch_rows
        usable = (self.rows.shape[0] // b) * b
        for start in range(0, usable, b):
            batch = jnp.asarray(self.rows[start:start + b])
            total += float(self._loss_sum(flat, batch))
            count += batch.shape[0] * (batch.shape[1] - 1)
        return total / max(count, 1)


# ------------------------------------------------------------------------------ allocation


def _bpw(cfg: ModelConfig, spec: Palettization, scope: str) -> float:
    rows = palettize.bits_report(cfg.replace(palettization=spec))
    summary = palettize.summarize_bits(rows)
    return summary["bpw"] if scope == "all" else summary["projection_bpw"]


def check_reachable(cfg: ModelConfig, base: Palettization, options: QuantizeOptions) -> None:
    """Refuse a target that no mix of the base and low bit widths reaches, before any work:
    below every projection at ``low_bits``, or above every one at ``base_bits`` (nothing
    would move to the low width: the quantized model is the all-``base_bits`` one)."""
    floor = dataclasses.replace(base, bits=tuple((p, options.low_bits) for p, _ in base.bits))
    lowest, highest = _bpw(cfg, floor, options.scope), _bpw(cfg, base, options.scope)
    if options.target_bpw < lowest - 1e-9:
        raise ValueError(
            f"--target-bpw {options.target_bpw:g} is below what this model can reach: every projection at "
            f"{options.low_bits} bits gives {lowest:.3f} ({options.scope}; the embedding and dense tensors count "
            "too). Raise --target-bpw or use --scope projections.")
    if options.target_bpw > highest + 1e-9:
        raise ValueError(
            f"--target-bpw {options.target_bpw:g} is above what palettization gives this model: every projection at "
            f"{options.base_bits} bits is {highest:.3f} bits per weight ({options.scope}), the most it reaches. "
            f"Use a target between {lowest:.2f} and {highest:.2f}, or keep the dense checkpoint.")


def allocate_low_bits(
    cfg: ModelConfig,
    base: Palettization,
    sensitivity: dict[str, float],
    *,
    low_bits: int,
    target_bpw: float,
    scope: str = "all",
) -> tuple[Palettization, list[str]]:
    """Move projections from ``base``'s bits to ``low_bits`` in order of loss increase per
    bit saved until the bits per weight reach ``target_bpw``. Returns the new spec and the
    moved paths in order. Raises when even every projection at ``low_bits`` misses it."""
    bits = dict(base.bits)
    floor = dataclasses.replace(base, bits=tuple((p, low_bits) for p in bits))
    lowest = _bpw(cfg, floor, scope)
    if lowest > target_bpw + 1e-9:
        raise ValueError(
            f"target {target_bpw} bits per weight is below what this model can reach: every "
            f"projection at {low_bits} bits gives {lowest:.3f} ({scope}; the embedding and "
            f"dense tensors count too). Raise --target-bpw or use --scope projections."
        )

    at_base = {r.path: r for r in palettize.bits_report(cfg.replace(palettization=base))}

    def saved(path: str) -> int:
        low = palettize.palettized_bits(
            at_base[path].shape, low_bits, n_in=palettize.input_axes(path), group_size=base.group_size)
        return max(at_base[path].bits - low, 1)

    order = sorted(sensitivity, key=lambda p: (max(sensitivity[p], 0.0) / saved(p), p))
    moved: list[str] = []
    spec = base
    for path in order:
        if _bpw(cfg, spec, scope) <= target_bpw + 1e-9:
            break
        bits[path] = low_bits
        moved.append(path)
        spec = dataclasses.replace(base, bits=tuple(sorted(bits.items())))
    return spec, moved


# ------------------------------------------------------------------------------ driver


def _get(tree: dict[str, Any], path: str) -> Any:
    node: Any = tree
    for part in path.split("/"):
        node = node[int(part)] if isinstance(node, dict) and part.isdigit() and int(part) in node else node[part]
    return node


def _set(tree: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split("/")
    node: Any = tree
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() and int(part) in node else node[part]
    node[parts[-1]] = value


def quantize_checkpoint(
    checkpoint: str | Path,
    out: str | Path,
    calibration: list[str],
    options: QuantizeOptions = QuantizeOptions(),
    *,
    overwrite: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Write a palettized checkpoint of ``checkpoint`` to ``out``; return the summary
    (also written to ``out/quantization.json``)."""
    from flax import nnx

    started = time.perf_counter()
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (pass --overwrite)")
    model, cfg = load_model(checkpoint, dtype="float32")
    if cfg.palettization is not None:
        raise ValueError(f"{checkpoint} is already palettized; quantize its dense original")
    tell = progress or (lambda _what, _i, _n: None)

    # 1. every projection at the base and the low bit width, the embedding in int8
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    paths = []
    skipped: dict[str, str] = {}
    for path in palettize.projection_paths(cfg.n_layers):
        shape = np.shape(_get(params, path))
        n_in = palettize.input_axes(path)
        outs = int(np.prod(shape[n_in:]))
        if outs % options.group_size or (shape[-1] * options.low_bits) % 8:
            skipped[path] = f"{outs} output channels do not split into groups of {options.group_size}"
            continue
        paths.append(path)
    if not paths:
        raise ValueError(f"--group-size {options.group_size} divides no projection's output channels "
                         f"({'; '.join(sorted(set(skipped.values())))}): nothing would be palettized")
    check_reachable(cfg, Palettization(bits=tuple((p, options.base_bits) for p in paths),
                                       group_size=options.group_size, embed_bits=options.embed_bits), options)
    palettes: dict[tuple[str, int], palettize.PalettizedArray] = {}
    steps = 2 * len(paths)
    for i, path in enumerate(paths):
        w = np.asarray(_get(params, path), np.float32)
        for j, b in enumerate(sorted({options.base_bits, options.low_bits})):
            tell("k-means", 2 * i + j, steps)
            palettes[(path, b)] = palettize.palettize_array(
                w, b, n_in=palettize.input_axes(path), group_size=options.group_size)
    tell("k-means", steps, steps)
    embed_q = None
    if options.embed_bits:
        embed_q = palettize.quantize_int8_rows(np.asarray(params["embed"], np.float32))

    # 2. sensitivities on the calibration rows
    rows = token_rows(calibration, options.calibration_rows, options.seq_len, options.eos_id)
    if rows.shape[1] - 1 > cfg.max_seq_len:
        raise ValueError(f"calibration seq_len {rows.shape[1] - 1} exceeds the model's {cfg.max_seq_len}")
    if rows.size and (int(rows.max()) >= cfg.vocab_size or int(rows.min()) < 0):
        raise ValueError(f"calibration token ids reach {int(rows.max())}, outside the model's vocabulary of "
                         f"{cfg.vocab_size}: the shards were made with another tokenizer than this model's")
    loss = RowsLoss(model, rows, options.batch_rows)
    dense_of = {pb: palettize.dequantize_array(p) for pb, p in palettes.items()}
    base_replace = {p: dense_of[(p, options.base_bits)] for p in paths}
    if embed_q is not None:
        base_replace["embed"] = embed_q[0].astype(np.float32) * embed_q[1].astype(np.float32)[:, None]
    tell("calibration", 0, len(paths) + 2)
    loss_dense = loss()
    loss_base = loss(base_replace)
    if not (math.isfinite(loss_dense) and math.isfinite(loss_base)):
        raise ValueError(f"calibration loss is not finite (dense {loss_dense}, {options.base_bits}-bit {loss_base}): "
                         "the checkpoint's parameters or the calibration data are damaged")
    sensitivity: dict[str, float] = {}
    for i, p in enumerate(paths):
        tell("calibration", i + 2, len(paths) + 2)
        sensitivity[p] = loss({**base_replace, p: dense_of[(p, options.low_bits)]}) - loss_base

    # 3. the mix under the target
    base_spec = Palettization(
        bits=tuple((p, options.base_bits) for p in paths), group_size=options.group_size,
        embed_bits=options.embed_bits,
    )
    spec, moved = allocate_low_bits(
        cfg, base_spec, sensitivity, low_bits=options.low_bits, target_bpw=options.target_bpw, scope=options.scope)
    plan = dict(spec.bits)
    loss_final = loss({**base_replace, **{p: dense_of[(p, plan[p])] for p in paths}})
    tell("calibration", len(paths) + 2, len(paths) + 2)

    # 4. the palettized checkpoint
    mixed = len(set(plan.values())) > 1
    qcfg = cfg.replace(palettization=spec, scan_layers=cfg.scan_layers and not mixed, dtype=load_dtype(checkpoint))
    abstract = nnx.eval_shape(lambda: Transformer(qcfg, rngs=nnx.Rngs(0)))
    qparams = nnx.to_pure_dict(nnx.state(abstract, nnx.Param))
    for path in palettize.projection_paths(cfg.n_layers):
        if path in plan:
            p = palettes[(path, plan[path])]
            _set(qparams, path, {"indices": np.asarray(p.indices), "lut": np.asarray(p.lut)})
        else:
            _set(qparams, path, np.asarray(_get(params, path), np.float32))
    if embed_q is not None:
        qparams["embed"] = {"values": embed_q[0], "scale": embed_q[1]}
    else:
        qparams["embed"] = np.asarray(params["embed"], np.float32)
    for i in range(cfg.n_layers):
        for norm in ("attn_norm", "mlp_norm"):
            qparams["layers"][i][norm] = {"scale": np.asarray(params["layers"][i][norm]["scale"])}
        for norm in ("q_norm", "k_norm"):
            qparams["layers"][i]["attn"][norm] = {"scale": np.asarray(params["layers"][i]["attn"][norm]["scale"])}
    qparams["final_norm"] = {"scale": np.asarray(params["final_norm"]["scale"])}
    save_params(qparams, out, qcfg, overwrite=True)

    report_rows = palettize.bits_report(qcfg)
    totals = palettize.summarize_bits(report_rows)
    dense_totals = palettize.summarize_bits(palettize.bits_report(cfg, dense_bits=16))
    summary = {
        "format": "afm-quantization-v1",
        "checkpoint": str(checkpoint),
        "output": str(out),
        "target_bpw": options.target_bpw,
        "scope": options.scope,
        "bpw": totals["bpw"],
        "projection_bpw": totals["projection_bpw"],
        "megabytes": totals["megabytes"],
        "megabytes_16bit": dense_totals["megabytes"],
        "two_bit_tensors": [p for p in paths if plan[p] == options.low_bits],
        "moved_in_order": moved,
        "skipped": skipped,
        "calibration": {"inputs": list(calibration), "rows": int(rows.shape[0]), "seq_len": int(rows.shape[1] - 1)},
        "loss": {"dense": loss_dense, f"all_{options.base_bits}bit": loss_base, "chosen": loss_final,
                 "predicted": loss_base + sum(sensitivity[p] for p in moved)},
        "sensitivity": sensitivity,
        "tensors": [
            {"path": r.path, "shape": list(r.shape), "weights": r.weights, "format": r.format,
             "bits": r.bits, "bpw": r.bpw, "sensitivity": sensitivity.get(r.path)}
            for r in report_rows
        ],
        "options": dataclasses.asdict(options),
        "seconds": time.perf_counter() - started,
    }
    (out / "quantization.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def load_dtype(checkpoint: str | Path) -> str:
    """The compute dtype the checkpoint was saved with (the quantized model keeps it)."""

    return load_config(checkpoint).dtype
