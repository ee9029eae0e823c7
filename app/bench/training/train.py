"""Training throughput: ``afm bench train`` runs :func:`~afm.app.bench.training.throughput.bench_train`
(tokens/s, MFU, peak device memory and the attention kernel used) next to the AdamW step
measured in the same process: ``1b`` at 4096 on GPU/TPU, ``tiny`` at 128 on CPU;
``--task`` prints each task's memory plan instead, ``--suite gpu`` runs the GPU suite.
"""

from __future__ import annotations

from afm.app.bench.common import BenchOptions, Comparison
from afm.app.bench.training.throughput import bench_train

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
