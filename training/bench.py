"""Training throughput: tokens/s, MFU and peak device memory of the real train step.

``bench_train("1b", seq_len=4096)`` times the same jitted step ``afm train`` runs
(sharded f32 params and optimizer state, bf16 compute, muParam, AFM optimizer) on
random tokens, so the figure is the engine's and not the input pipeline's. MFU uses the
PaLM convention of ``afm.model.config.flops_per_token`` against the per-device peak
(989 TFLOP/s: H100 SXM dense bf16).

``afm bench train`` runs it with the AdamW baseline measured in the same process: a
real model on GPU/TPU (``1b`` at 4096), the ``tiny`` model on CPU.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from afm.benchutil import BenchOptions, Comparison, peak_rss_mb


def _peak_device_memory_gb() -> float | None:
    import jax

    peaks = []
    for d in jax.local_devices():
        stats = d.memory_stats() if hasattr(d, "memory_stats") else None
        if stats and "peak_bytes_in_use" in stats:
            peaks.append(stats["peak_bytes_in_use"])
    return max(peaks) / 2**30 if peaks else None


def bench_train(
    model: str,
    *,
    seq_len: int,
    batch: int | None = None,
    steps: int = 10,
    warmup: int = 2,
    remat: str | None = None,
    optimizer: str = "afm_rmsprop",
    peak_tflops: float = 989.0,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """Time ``steps`` train steps after ``warmup``; returns tokens/s, MFU, memory."""
    import jax
    import numpy as np
    from afm.model.config import flops_per_token, get_config, param_counts
    from afm.training.config import TrainConfig, get_train_config
    from afm.training.metrics import mfu
    from afm.training.sharding import global_batch, make_mesh
    from afm.training.trainer import BATCH_KEYS, build_step

    on_cpu = jax.default_backend() == "cpu"
    if batch is None:
        batch = jax.device_count() * (2 if on_cpu else 4)
    cfg = get_train_config(
        TrainConfig(name=f"bench-{model}", model=model),
        [f"data.seq_len={seq_len}", f"data.global_batch_size={batch}",
         f"optimizer.name={optimizer}", *(overrides or [])],
    )
    mcfg = get_config(model, max_seq_len=max(seq_len, get_config(model).max_seq_len))
    if remat is not None:
        mcfg = dataclasses.replace(mcfg, remat=remat)
    mesh = make_mesh(cfg.mesh)
    bundle = build_step(cfg, mcfg, mesh)
    flat = bundle.parts.init()
    opt_state = jax.jit(bundle.opt.init, out_shardings=bundle.opt_shardings)(flat)
    rng = np.random.default_rng(0)
    local = batch // jax.process_count()
    host = {
        "inputs": rng.integers(0, mcfg.vocab_size, (local, seq_len), dtype=np.int32),
        "targets": rng.integers(0, mcfg.vocab_size, (local, seq_len), dtype=np.int32),
        "loss_mask": np.ones((local, seq_len), np.float32),
        "segment_ids": np.ones((local, seq_len), np.int32),
        "positions": np.broadcast_to(np.arange(seq_len, dtype=np.int32), (local, seq_len)).copy(),
    }
    data = global_batch({k: host[k] for k in BATCH_KEYS}, mesh, bundle.bspec)
    t0 = time.perf_counter()
    for _ in range(warmup):
        flat, opt_state, metrics = bundle.step_fn(flat, opt_state, data)
    jax.block_until_ready(metrics)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        flat, opt_state, metrics = bundle.step_fn(flat, opt_state, data)
    jax.block_until_ready(metrics)
    seconds = time.perf_counter() - t0
    tps = batch * seq_len * steps / seconds
    fpt = flops_per_token(mcfg, seq_len)
    counts = param_counts(mcfg)
    peak = _peak_device_memory_gb()
    return {
        "model": model,
        "backend": jax.default_backend(),
        "devices": jax.device_count(),
        "mesh": "x".join(str(v) for v in mesh.shape.values()),
        "optimizer": optimizer,
        "params": counts["total"],
        "global_batch": batch,
        "seq_len": seq_len,
        "step_s": seconds / steps,
        "warmup_s": compile_s,
        "tokens_per_s": tps,
        "tflops_per_device": tps * fpt / jax.device_count() / 1e12,
        "mfu": mfu(tps, fpt, jax.device_count(), peak_tflops),
        "peak_device_memory_gb": peak if peak is not None else float("nan"),
        "peak_host_rss_mb": peak_rss_mb(),
        "final_loss": float(metrics["loss"]),
    }


def _train_benchmark(opts: BenchOptions) -> list[Comparison]:
    import jax

    if jax.default_backend() == "cpu":
        model, seq_len = "tiny", 128
    else:
        model, seq_len = "1b", 4096
    model = opts.model_config or model
    seq_len = opts.seq_len or seq_len
    steps = 3 if opts.quick else 10
    ours = bench_train(model, seq_len=seq_len, steps=steps)
    base = bench_train(model, seq_len=seq_len, steps=steps, optimizer="adamw")
    name = f"{model}@{seq_len} on {ours['devices']}x {ours['backend']}"
    rows = [
        Comparison(f"tokens/s {name}", ours["tokens_per_s"], base["tokens_per_s"], "AdamW step", "tok/s"),
        Comparison(f"MFU {name}", 100 * ours["mfu"], 100 * base["mfu"], "AdamW step", "% of 989 TFLOP/s", ">= 50% on H100"),
    ]
    if ours["peak_device_memory_gb"] == ours["peak_device_memory_gb"]:  # not NaN
        rows.append(
            Comparison(f"peak device memory {name}", ours["peak_device_memory_gb"],
                       base["peak_device_memory_gb"], "AdamW step", "GiB")
        )
    return rows


BENCHMARKS = {"train": _train_benchmark}
