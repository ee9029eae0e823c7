"""``afm bench train --suite gpu``: the three runs issue #32 sets goals for, one JSON.

1B bf16 and 1B FP8 (``ModelConfig.fp8``) at 4096 tokens, and ``afm-on-device`` bf16 at
4096 with ``--batch auto`` (the largest per-device batch whose compiled memory plan fits,
``afm.training.runs.autofit``), each with its time to the first step (engine build,
init, compile and one step: what a cold start costs), tokens/s, MFU against the card's
bf16 peak (FP8 counted bf16-equivalent, as the field reports it), compiled and peak
memory; plus the card's name and the jax version. It needs only the ``train`` extra.

Goals on one H100/H200 (issue #32): 1B bf16 >= 50% MFU, 1B FP8 >= 58%, on-device bf16
>= 48%, on-device first step <= 60 s with a warm compilation cache and <= 120 s cold.
``--quick`` (or a CPU backend) runs the same three with tiny shapes: a dry run of the
code path, not a measurement.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison

# (label, model, fp8, batch, goal MFU)
RUNS = (
    ("1b bf16", "1b", False, None, 0.50),
    ("1b fp8", "1b", True, None, 0.58),
    ("afm-on-device bf16, batch auto", "afm-on-device", False, "auto", 0.48),
)
SEQ_LEN = 4096
DRY_RUN_MEMORY_GB = 4.0  # CPU dry run: the budget --batch auto fits into


def card() -> dict[str, Any]:
    """The accelerator and software the figures belong to."""
    import jax

    device = jax.devices()[0]
    return {"card": getattr(device, "device_kind", str(device)), "backend": jax.default_backend(),
            "devices": jax.device_count(), "jax": jax.__version__}


def run_suite(opts: BenchOptions, *, steps: int | None = None, peak_tflops: float = 989.0) -> dict[str, Any]:
    """Run the three configurations; returns (and writes to ``workdir``) the JSON record."""
    import jax

    from afm.app.bench.training.throughput import bench_train

    dry = opts.quick or jax.default_backend() == "cpu"
    steps = steps or (2 if dry else 10)
    record: dict[str, Any] = {**card(), "dry_run": dry, "seq_len": 64 if dry else SEQ_LEN, "runs": []}
    for label, model, fp8, batch, goal in RUNS:
        name = "tiny" if dry else model
        start = time.perf_counter()
        result = bench_train(
            name, seq_len=record["seq_len"], batch=batch, steps=steps, peak_tflops=peak_tflops,
            overrides=[f"model_overrides.fp8={str(fp8).lower()}"],
            device_memory_gb=DRY_RUN_MEMORY_GB if dry and batch == "auto" else None,
        )
        record["runs"].append({
            "run": label, "model": name, "fp8": fp8, "goal_mfu": goal, "wall_s": time.perf_counter() - start,
            **{k: result[k] for k in ("tokens_per_s", "mfu", "global_batch", "remat", "attention",
                                      "first_step_s", "warmup_s", "compiled_memory_gb", "peak_device_memory_gb",
                                      "auto_fit")},
        })
    out = Path(opts.workdir) / "bench-train-gpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, default=float))
    record["path"] = str(out)
    return record


def comparisons(record: dict[str, Any]) -> list[Comparison]:
    """The suite's rows for ``afm bench``: MFU against each goal (no baseline run)."""
    rows = []
    for run in record["runs"]:
        rows.append(Comparison(f"{run['run']} on {record['card']}: MFU (first step {run['first_step_s']:.1f} s)",
                               run["mfu"], None, f"goal {run['goal_mfu']:.0%}", "", f">= {run['goal_mfu']:.0%}"))
    return rows
