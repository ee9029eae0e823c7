"""Training throughput: tokens/s, MFU, peak device memory and the attention kernel used.

``bench_train("1b", seq_len=4096)`` builds the run's :class:`~afm.training.core.engine.Engine`
and times its jitted train step (sharded f32 params and optimizer state, bf16 compute,
muParam, the AFM optimizer, chunked loss, remat policy, microbatches) on random packed
tokens, so the figure is the engine's, not the input pipeline's (``afm bench loader``
measures that). Memory: the device's peak where it reports one (GPU/TPU) and XLA's
per-device memory plan for the compiled step everywhere. MFU is model FLOPs (``afm.model.config.flops_per_token``: causal
attention counted at half) over the devices' peak (989 TFLOP/s: H100 SXM dense bf16).

``afm bench train`` runs it next to the AdamW step measured in the same process: ``1b``
at 4096 on GPU/TPU, ``tiny`` at 128 on CPU.
"""

from __future__ import annotations

import time
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison, peak_rss_mb


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
    from afm.model.config import flops_per_token, get_config, param_counts
    from afm.model.layers import resolve_attention_impl
    from afm.model.sharding import make_mesh
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


ACCELERATOR_GIB = 80e9 / 2**30  # one 80 GB accelerator (H100, A100-80GB), in GiB


def _memory_plans(opts: BenchOptions) -> list[Comparison]:
    """``afm bench train --task sft,rm,dpo,mdloo``: each task's compiled step's memory plan
    for one device (abstract shapes: nothing is allocated, so any backend can plan any size)."""
    import json

    from afm.app.bench.training.memory_plan import plan, task_shape

    from afm.console import print_table

    model = opts.model_config or "afm-on-device"
    seq_len = opts.seq_len or 2048
    shapes = [task_shape(t) for t in opts.tasks]  # every name checked before the first compile
    plans = [plan(name, model, seq_len=seq_len, shape=shape) for name, shape in shapes]
    opts.workdir.mkdir(parents=True, exist_ok=True)
    (opts.workdir / "memory_plans.json").write_text(json.dumps(plans, indent=2) + "\n")
    rows = []
    for p in plans:
        options = " ".join(f"{k}={v}" for k, v in p["options"].items())
        rows.append([p["task"], options, f"{p['batch']} / {p['microbatches']}", f"{p['arguments_gb']:.1f}",
                     f"{p['frozen_gb']:.1f}", f"{p['temporaries_gb']:.1f}", f"{p['total_gb']:.1f}",
                     f"{p['compile_s']:.0f}"])
        # programs the task runs beside its step, with the run's whole state resident
        for name, q in p.get("programs", {}).items():
            rows.append([f"{p['task']}: {name}", "beside the step", "", f"{q['state_gb'] + q['inputs_gb']:.1f}",
                         "", f"{q['temporaries_gb'] + q['outputs_gb']:.1f}", f"{q['total_gb']:.1f}", ""])
    print_table(
        f"memory plan per device: {model} @ {seq_len} ({plans[0]['backend']} compiler)",
        ["task", "options", "batch / micro-batches", "parameters + optimizer + batch", "of which frozen", "temporaries",
         "total GiB", "compile s"], rows,
    )
    return [Comparison(f"memory plan {p['task']} {model}@{seq_len}, {p['batch']} per step in {p['microbatches']} "
                       f"micro-batches, remat {p['remat']} (peak of the step"
                       f"{' and ' + ', '.join(p['programs']) if p.get('programs') else ''})", p["peak_gb"], None, "",
                       "GiB", f"<= {ACCELERATOR_GIB:.1f} (80 GB)") for p in plans]


def _train_benchmark(opts: BenchOptions) -> list[Comparison]:
    import jax

    if opts.tasks:
        return _memory_plans(opts)
    if opts.suite == "gpu":  # issue #32's three runs, one JSON (afm.app.bench.training.gpu_suite)
        from afm.app.bench.training.gpu_suite import comparisons, run_suite

        return comparisons(run_suite(opts))

    if jax.default_backend() == "cpu":
        model, seq_len = "tiny", 128
    else:
        model, seq_len = "1b", 4096
    model = opts.model_config or model
    seq_len = opts.seq_len or seq_len
    steps = 3 if opts.quick else 10
    ours = bench_train(model, seq_len=seq_len, steps=steps)
    base = bench_train(model, seq_len=seq_len, steps=steps, optimizer="adamw")
    name = (
        f"{model}@{seq_len} on {ours['devices']}x {ours['backend']} "
        f"(attention {ours['attention']}, remat {ours['remat']})"
    )
    rows = [
        Comparison(f"tokens/s {name}", ours["tokens_per_s"], base["tokens_per_s"], "AdamW step", "tok/s"),
        Comparison(f"MFU {name}", 100 * ours["mfu"], 100 * base["mfu"], "AdamW step", "% of 989 TFLOP/s", ">= 50% on H100"),
    ]
    if ours["peak_device_memory_gb"] == ours["peak_device_memory_gb"]:  # not NaN
        rows.append(
            Comparison(f"peak device memory {name}", ours["peak_device_memory_gb"],
                       base["peak_device_memory_gb"], "AdamW step", "GiB")
        )
    rows.append(
        Comparison(f"XLA memory plan per device {name}", ours["compiled_memory_gb"],
                   base["compiled_memory_gb"], "AdamW step", "GiB")
    )
    return rows


BENCHMARKS = {"train": _train_benchmark}
