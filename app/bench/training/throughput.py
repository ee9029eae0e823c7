"""One training-throughput measurement: ``bench_train("1b", seq_len=4096)`` builds the run's
:class:`~afm.training.core.engine.Engine` and times its jitted train step (sharded f32
params and optimizer state, bf16 compute, muParam, the AFM optimizer, chunked loss, remat
policy, microbatches) on random packed tokens, so the figure is the engine's, not the input
pipeline's (``afm bench loader`` measures that). Memory: the device's peak where it reports
one (GPU/TPU) and XLA's per-device memory plan for the compiled step everywhere. MFU is
model FLOPs (``afm.model.config.flops_per_token``: causal attention counted at half) over
the devices' peak (989 TFLOP/s: H100 SXM dense bf16). ``afm bench train`` (``train.py``)
and the GPU suite (``gpu_suite.py``) both call it."""

from __future__ import annotations

import time
from typing import Any

from afm.app.bench.common import peak_rss_mb


def _peak_device_memory_gb() -> float | None:
    import jax

    peaks = []
    for d in jax.local_devices():
        stats = d.memory_stats() if hasattr(d, "memory_stats") else None
        if stats and "peak_bytes_in_use" in stats:
            peaks.append(stats["peak_bytes_in_use"])
    return max(peaks) / 2**30 if peaks else None


def _compiled_memory_gb(engine: Any) -> float:
    """XLA's own per-device memory plan for the step (arguments + outputs + temporaries
    - donated aliases): available on every backend, CPU included."""
    stats = engine.lower_train_step().compile().memory_analysis()
    if stats is None:
        return float("nan")
    total = stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
    return (total - stats.alias_size_in_bytes) / 2**30


def _random_batch(engine: Any, rng: Any) -> dict[str, Any]:
    """Host rows shaped like the loader's: packed documents of random lengths."""
    import jax
    import numpy as np

    cfg = engine.cfg
    rows, t = cfg.data.global_batch_size // jax.process_count(), cfg.data.seq_len
    vocab = engine.model_config.vocab_size
    seg = np.ones((rows, t), np.int32)
    pos = np.empty((rows, t), np.int32)
    for r in range(rows):  # documents of ~t/4 tokens: a typical packed row
        cuts = np.sort(rng.choice(np.arange(1, t), size=min(3, t - 1), replace=False))
        seg[r] = np.searchsorted(cuts, np.arange(t), side="right") + 1
        starts = np.concatenate([[0], cuts])
        pos[r] = np.arange(t) - starts[seg[r] - 1]
    host = {
        "inputs": rng.integers(0, vocab, (rows, t), dtype=np.int32),
        "targets": rng.integers(0, vocab, (rows, t), dtype=np.int32),
        "loss_mask": np.ones((rows, t), np.float32),
        "segment_ids": seg,
        "positions": pos,
    }
    return {k: host[k] for k in engine.task.batch_fields()}


def bench_train(
    model: str,
    *,
    seq_len: int,
    batch: int | str | None = None,
    steps: int = 10,
    warmup: int = 2,
    remat: str | None = None,
    attention: str | None = None,
    microbatches: int = 1,
    optimizer: str = "afm_rmsprop",
    peak_tflops: float = 989.0,
    overrides: list[str] | None = None,
    device_memory_gb: float | None = None,
) -> dict[str, Any]:
    """Time ``steps`` train steps after ``warmup``; returns tokens/s, MFU, memory, backend.
    ``batch="auto"`` / ``remat="auto"``: chosen by the compiled memory plan
    (``afm.training.runs.autofit``), reported under ``auto_fit``."""
    import jax
    import numpy as np

    from afm.model.blocks.layers import resolve_attention_impl
    from afm.model.config import flops_per_token, get_config, param_counts
    from afm.model.distributed.sharding import make_mesh
    from afm.training.core.config import TrainConfig, get_train_config
    from afm.training.core.engine import Engine
    from afm.training.core.metrics import mfu
    from afm.training.tasks import get_task

    started = time.perf_counter()
    on_cpu = jax.default_backend() == "cpu"
    auto_batch, auto_remat = batch == "auto", remat == "auto"
    if batch is None or auto_batch:
        batch = jax.device_count() * (2 if on_cpu else 4)
    model_over = [f"model_overrides.max_seq_len={max(seq_len, get_config(model).max_seq_len)}"]
    if remat is not None and not auto_remat:
        model_over.append(f"model_overrides.remat={remat}")
    if attention is not None:
        model_over.append(f"model_overrides.attention_impl={attention}")
    cfg = get_train_config(
        TrainConfig(name=f"bench-{model}", model=model),
        [f"data.seq_len={seq_len}", f"data.global_batch_size={batch}", f"microbatches={microbatches}",
         f"optimizer.name={optimizer}", *model_over, *(overrides or [])],
    )
    mesh = make_mesh(cfg.mesh)
    fit = None
    if auto_batch or auto_remat:
        from afm.training.runs.autofit import fit_config

        cfg, fit = fit_config(cfg, mesh, batch=auto_batch, remat=auto_remat, device_memory_gb=device_memory_gb)
        batch = cfg.data.global_batch_size
    engine = Engine.build(cfg, mesh, get_task(cfg.task, cfg))
    mcfg = engine.model_config
    state = engine.init_state()
    data = engine.global_batch(_random_batch(engine, np.random.default_rng(0)))
    t0 = time.perf_counter()
    planned = _compiled_memory_gb(engine)  # compiles the step (the calls below reuse it)
    first_step_s = float("nan")
    for i in range(warmup):
        state, metrics = engine.train_step(state, data, i)
        if i == 0:
            jax.block_until_ready(metrics)
            first_step_s = time.perf_counter() - started  # build + init + compile + one step
    jax.block_until_ready(metrics)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(steps):
        state, metrics = engine.train_step(state, data, warmup + i)
    jax.block_until_ready(metrics)
    seconds = time.perf_counter() - t0
    tps = batch * seq_len * steps / seconds
    fpt = flops_per_token(mcfg, seq_len)
    peak = _peak_device_memory_gb()
    return {
        "model": model,
        "backend": jax.default_backend(),
        "attention": resolve_attention_impl(mcfg),
        "remat": mcfg.remat,
        "microbatches": microbatches,
        "devices": jax.device_count(),
        "mesh": "x".join(str(v) for v in mesh.shape.values()),
        "optimizer": optimizer,
        "params": param_counts(mcfg)["total"],
        "global_batch": batch,
        "seq_len": seq_len,
        "step_s": seconds / steps,
        "warmup_s": compile_s,
        "first_step_s": first_step_s,
        "tokens_per_s": tps,
        "tflops_per_device": tps * fpt / jax.device_count() / 1e12,
        "mfu": mfu(tps, fpt, jax.device_count(), peak_tflops),
        "peak_device_memory_gb": peak if peak is not None else float("nan"),
        "compiled_memory_gb": planned,
        "peak_host_rss_mb": peak_rss_mb(),
        "final_loss": float(metrics["loss"]),
        "auto_fit": fit.summary() if fit is not None else "",
    }


__all__ = ["bench_train"]
