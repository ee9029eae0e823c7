"""The demo's last step: quantize the demo model, train a recovery adapter, compare.

``afm demo`` ends with the report's deployment recipe (§5) at demo scale, through the same
functions the commands use: ``afm quantize`` (palettized at ~3.7 bits per projection
weight, mixed 4/2-bit by sensitivity, int8 embedding), ``afm adapter train`` (a rank-16
accuracy-recovery adapter on the frozen quantized base) and ``afm adapter table`` (bits per
weight, held-out loss and a small task set for the 16-bit, quantized and recovered models).

The demo corpus is tiny (one token shard of a few thousand tokens) and the 16-bit model was
trained on all of it, so the "held-out" loss here is measured on that same shard: nothing
is held out at demo scale (with two or more shards, the last one is kept out of calibration
and adapter training). The comparison between the three models is like for like, but it
shows the mechanics, not a result; experiments/recovery-table/README.md has the measured comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def split_shards(tokens: str | Path) -> tuple[list[str], list[str]]:
    """(calibration/training shards, held-out shard): the last token shard held out."""
    from afm.training.data.shards import expand_paths

    shards = sorted(expand_paths([str(tokens)]))
    if len(shards) < 2:
        return shards, shards
    return shards[:-1], shards[-1:]


def run_recovery_demo(
    checkpoint: str | Path,
    tokens: str | Path,
    tokenizer: str | Path,
    workdir: str | Path,
    *,
    target_bpw: float = 3.7,
    rank: int = 16,
    steps: int = 20,
    tasks: tuple[str, ...] = ("piqa",),
    data_dir: str | None = None,
) -> dict[str, Any]:
    """Quantize ``checkpoint``, train a recovery adapter on it, and measure all three."""
    from afm.app.studies.recovery_table import Entry, evaluate_entries, markdown, write
    from afm.training.compress.quantize import QuantizeOptions, quantize_checkpoint
    from afm.training.runs.train import train

    workdir = Path(workdir)
    train_shards, heldout = split_shards(tokens)
    qdir = workdir / f"q{target_bpw}"
    summary = quantize_checkpoint(
        checkpoint, qdir, train_shards,
        QuantizeOptions(target_bpw=target_bpw, scope="projections", calibration_rows=8, seq_len=128),
    )
    result = train("tiny-recovery", workdir / f"recovery-r{rank}", steps=steps, data=train_shards, init_from=qdir,
                   overrides=[f"task_options.rank={rank}", f"task_options.alpha={2 * rank}", f"total_steps={steps}"],
                   quiet=True)
    entries = [Entry("16-bit", str(checkpoint)), Entry(f"{summary['projection_bpw']:.2f} bpw", str(qdir)),
               Entry(f"{summary['projection_bpw']:.2f} bpw + r{rank}", str(result["model_checkpoint"]))]
    table = evaluate_entries(entries, tokenizer=str(tokenizer), heldout=heldout, tasks=list(tasks),
                             data_dir=data_dir, rows=16, seq_len=128)
    paths = write(table, workdir / "table")
    return {"quantization": summary, "adapter": result, "table": table, "markdown": markdown(table),
            "paths": {k: str(v) for k, v in paths.items()}}
