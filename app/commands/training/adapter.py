"""``afm quantize`` and ``afm adapter train|merge|export|info`` (light imports only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from afm.app.commands.options import POSITIVE, POSITIVE_INT


def _user_errors():
    """The exceptions that mean bad input, shown as one line (no traceback)."""
    from afm.config import ConfigError
    from afm.training.core.trainer import TrainingDiverged
    from afm.training.data.shards import DataError

    return (ValueError, FileNotFoundError, FileExistsError, DataError, ConfigError, TrainingDiverged, KeyError)


def _print_bits(rows: list[Any], sensitivity: dict[str, float] | None = None, limit: int = 40) -> None:
    from afm.console import print_table

    table = []
    for r in rows[:limit]:
        s = (sensitivity or {}).get(r.path)
        table.append([r.path, "x".join(map(str, r.shape)), r.format, f"{r.weights:,}", f"{r.bpw:.3f}",
                      "" if s is None else f"{s:+.4f}"])
    print_table("storage per tensor (bits per weight; sensitivity = calibration loss increase at 2 bits)",
                ["tensor", "shape", "format", "weights", "bpw", "sensitivity"], table)
    if len(rows) > limit:
        click.echo(f"... {len(rows) - limit} more tensors (all of them in quantization.json)")


# ------------------------------------------------------------------------------ quantize


@click.command(
    "quantize",
    epilog="""\b
Examples:
  afm quantize --checkpoint runs/sft/model --target-bpw 3.7 --calibration 'tokens/train/*.parquet' --out q37/
  afm quantize --checkpoint ck --target-bpw 3.5 --calibration tokens/ --out q35/ --rows 64 --seq-len 512
  afm quantize --checkpoint ck --target-bpw 3.0 --scope projections --calibration tokens/ --out q30/
\b
Projections are palettized with 4-bit k-means lookup tables shared by every 16 output
channels, the least sensitive ones pushed to 2 bits until the model's bits per weight
(indices + tables + scales + what stays dense; the tied embedding, int8 per row, once)
reach the target. Writes a checkpoint every afm command loads (afm eval, generate,
adapter train --base) plus OUT/quantization.json (per-tensor bits and sensitivities).
Calibrate on training shards, evaluate on held-out ones.
""",
)
@click.option("--checkpoint", required=True, help="Dense afm model checkpoint (a run's model/ folder).")
@click.option("--target-bpw", type=POSITIVE, default=3.7, show_default=True, help="Average bits per weight to reach.")
@click.option("--calibration", "calibration", multiple=True, required=True, help="Token shards (file/dir/glob, repeatable).")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Output checkpoint directory.")
@click.option("--rows", type=int, default=32, show_default=True, help="Calibration rows.")
@click.option("--seq-len", type=int, default=256, show_default=True, help="Tokens per calibration row.")
@click.option("--scope", type=click.Choice(["all", "projections"]), default="all", show_default=True,
              help="Which weights the target averages over.")
@click.option("--base-bits", type=click.Choice(["4", "8"]), default="4", show_default=True)
@click.option("--low-bits", type=click.Choice(["2", "4"]), default="2", show_default=True)
@click.option("--group-size", type=POSITIVE_INT, default=16, show_default=True, help="Output channels sharing one lookup table.")
@click.option("--dense-embedding", is_flag=True, help="Keep the embedding dense (default: int8 per row).")
@click.option("--overwrite", is_flag=True)
def quantize_command(checkpoint, target_bpw, calibration, out, rows, seq_len, scope, base_bits, low_bits,
                     group_size, dense_embedding, overwrite) -> None:
    """Palettize a checkpoint below 4 bits per weight (mixed 4/2-bit by sensitivity)."""
    from afm.console import console, make_progress, print_summary, setup_logging

    setup_logging("WARNING")
    try:
        from afm.model.checkpoints.checkpoint import load_config
        from afm.model.on_device import palettize
        from afm.training.compress.quantize import QuantizeOptions, quantize_checkpoint

        options = QuantizeOptions(
            target_bpw=target_bpw, base_bits=int(base_bits), low_bits=int(low_bits), group_size=group_size,
            embed_bits=0 if dense_embedding else 8, scope=scope, calibration_rows=rows, seq_len=seq_len,
        )
        with make_progress() as progress:
            bars: dict[str, Any] = {}

            def tell(what: str, done: int, total: int) -> None:
                if what not in bars:
                    bars[what] = progress.add_task(what, total=total, rate="")
                progress.update(bars[what], completed=done, total=total)

            summary = quantize_checkpoint(checkpoint, out, list(calibration), options, overwrite=overwrite, progress=tell)
        rows_bits = palettize.bits_report(load_config(out))
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    _print_bits(rows_bits, summary["sensitivity"])
    loss = summary["loss"]
    print_summary(f"quantize -> {out}", {
        "bits per weight": f"{summary['bpw']:.3f} (target {target_bpw}, {scope})",
        "projections": f"{summary['projection_bpw']:.3f} bpw, {len(summary['two_bit_tensors'])} tensors at {low_bits} bits",
        "size": f"{summary['megabytes']:.3f} MB vs {summary['megabytes_16bit']:.3f} MB at 16 bits",
        "calibration loss": f"dense {loss['dense']:.4f}, all {base_bits}-bit {loss[f'all_{base_bits}bit']:.4f}, "
                            f"chosen {loss['chosen']:.4f} (sum of sensitivities predicted {loss['predicted']:.4f})",
        "skipped (kept dense)": len(summary["skipped"]),
        "time": f"{summary['seconds']:.1f} s",
    })
    console.print(f"per-tensor report: {Path(out) / 'quantization.json'}")


# ------------------------------------------------------------------------------ adapter


@click.group(
    "adapter",
    epilog="""\b
Examples:
  afm adapter train --base q37/ --data 'tokens/*.parquet' --workdir runs/rec16 --config tiny-recovery
  afm adapter train --base q37/ --data tokens/ --workdir runs/rec8 --rank 8 --alpha 16 --steps 100
  afm adapter train --base q37/ --data chat/ --workdir runs/summ --init-adapter runs/rec16/adapter
  afm adapter merge --adapter runs/rec16/adapter --out merged/
  afm adapter export --adapter runs/rec16/adapter --out hf-adapter/ --base-hf hf-base/
  afm adapter info runs/rec16/adapter
""",
)
def adapter_group() -> None:
    """LoRA adapters on a frozen (dense or palettized) base: train, merge, export to PEFT."""


def adapter_overrides(rank, alpha, targets, init_adapter, steps, overrides) -> list[str]:
    """The config overrides of ``afm adapter train``'s flags (``--set`` ones first)."""
    sets = list(overrides)
    if rank is not None:  # alpha follows from the task's one rule (2 x rank) unless given
        sets.append(f"task_options.rank={rank}")
    if alpha is not None:
        sets.append(f"task_options.alpha={alpha}")
    if targets:
        sets.append(f"task_options.targets=[{targets}]")
    if init_adapter:
        sets.append(f"task_options.init_adapter={init_adapter}")
    if steps is not None:  # the run's length: the LR schedule ends there too
        sets.append(f"total_steps={steps}")
    return sets


@adapter_group.command("train", epilog="""\b
Examples:
  afm adapter train --base q37/ --data 'tokens/*.parquet' --workdir runs/rec16
  afm adapter train --base q37/ --data pre/ --data post/ --workdir runs/rec --set data.weights.instruct=0.3
  afm adapter train --base ck/ --data chat/ --workdir runs/feature --init-adapter runs/rec/adapter --set task_options.inner=sft
\b
Trains only the adapters (the base gets no gradient and no optimizer state) with the
one trainer: resumable, checkpointed, the inner task's loss (next-token on token shards
by default). Writes WORKDIR/adapter, which afm eval / generate / score load like a
checkpoint. The default config tiny-recovery suits the demo-size models; `recovery`
is the report-scale recipe.
""")
@click.option("--base", required=True, help="Base model checkpoint (dense, or an `afm quantize` output).")
@click.option("--data", "data", multiple=True, required=True, help="Token shards (repeatable).")
@click.option("--workdir", required=True, help="Run directory (checkpoints, metrics, adapter/).")
@click.option("--config", "config", default="tiny-recovery", show_default=True, help="Adapter stage or YAML file.")
@click.option("--rank", type=int, default=None, help="LoRA rank (suite: 8, 16, 32).")
@click.option("--alpha", type=POSITIVE, default=None, help="LoRA alpha (scale alpha/rank; default 2 x rank).")
@click.option("--targets", default=None, help="Comma list of q,k,v,o,gate,up,down (default: all).")
@click.option("--init-adapter", default=None, help="Start from this adapter (e.g. the recovery adapter).")
@click.option("--steps", type=int, default=None, help="Training steps (sets total_steps; default: the config's).")
@click.option("--set", "overrides", multiple=True, help="Config override KEY=VALUE (repeatable).")
def adapter_train(base, data, workdir, config, rank, alpha, targets, init_adapter, steps, overrides) -> None:
    """Train a LoRA adapter on a frozen base."""
    from afm.console import print_summary, setup_logging
    from afm.preflight import check_data_paths

    check_data_paths(data, config=config, overrides=overrides)

    setup_logging("WARNING")
    sets = adapter_overrides(rank, alpha, targets, init_adapter, steps, overrides)
    try:
        from afm.training.core.config import get_train_config
        from afm.training.runs.train import train

        cfg = get_train_config(config, sets)
        if cfg.task != "adapter":
            raise click.UsageError(f"config {config!r} trains task {cfg.task!r}, not adapters")
        result = train(cfg, workdir, steps=steps, data=list(data), init_from=base)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    from afm.model.checkpoints.adapter_io import read_meta

    meta = read_meta(result["model_checkpoint"]) if result.get("model_checkpoint") else {}
    print_summary("adapter train", {
        "adapter": result.get("model_checkpoint") or "(not exported: multi-host or remote workdir)",
        "rank / alpha": f"{meta.get('lora', {}).get('rank')} / {meta.get('lora', {}).get('alpha')}",
        "parameters": f"{meta.get('num_params', 0):,} ({meta.get('megabytes', 0):.3f} MB at {meta.get('dtype')})",
        "loss": f"{result.get('first_loss') or float('nan'):.4f} -> {result.get('final_loss') or float('nan'):.4f}",
        "steps": result.get("steps"),
    })


@adapter_group.command("merge", epilog="""\b
Examples:
  afm adapter merge --adapter runs/rec16/adapter --out merged/
\b
Writes a dense checkpoint with W + (alpha/rank) A B in every adapted weight. A palettized
base is dequantized first (a merged weight is no longer on its palette): quantize the
merged model again to deploy it palettized, or keep the adapter separate as the report
serves it.
""")
@click.option("--adapter", required=True, help="Adapter directory.")
@click.option("--out", required=True, type=click.Path(path_type=Path))
@click.option("--base", default=None, help="Base checkpoint (default: the one the adapter records).")
@click.option("--overwrite", is_flag=True)
def adapter_merge(adapter, out, base, overwrite) -> None:
    """Fold an adapter into its base: a dense checkpoint."""
    from afm.console import print_summary

    try:
        from afm.model.checkpoints.checkpoint import load_adapted_model, save_params
        from afm.model.checkpoints.hf_export import dense_params

        model, cfg = load_adapted_model(adapter, base=base)
        params = dense_params(model)  # dequantized base + scale * A B
        path = save_params(params, out, cfg.replace(palettization=None, scan_layers=cfg.scan_layers),
                           overwrite=overwrite)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary("adapter merge", {"merged checkpoint": str(path), "base": cfg.name,
                                    "palettized base dequantized": cfg.palettization is not None})


@adapter_group.command("export", epilog="""\b
Examples:
  afm adapter export --adapter runs/rec16/adapter --out hf/adapter --base-hf hf/base
  afm adapter export --adapter runs/rec16/adapter --out hf/ --with-base --tokenizer tok/
\b
PEFT's layout (adapter_config.json + adapter_model.safetensors), for the Qwen3-layout
export of the base (`afm export hf`). --with-base writes that export too, into OUT/base
(a palettized base dequantized), and the adapter into OUT/adapter:
  PeftModel.from_pretrained(Qwen3ForCausalLM.from_pretrained("OUT/base"), "OUT/adapter")
""")
@click.option("--adapter", required=True, help="Adapter directory.")
@click.option("--out", required=True, type=click.Path(path_type=Path))
@click.option("--base-hf", default=None, help="The base's HF export (or hub id) to record in adapter_config.json.")
@click.option("--with-base", is_flag=True, help="Also export the base (OUT/base) and put the adapter in OUT/adapter.")
@click.option("--tokenizer", default=None, help="Tokenizer directory for --with-base.")
@click.option("--dtype", type=click.Choice(["float16", "bfloat16", "float32"]), default=None,
              help="Adapter value type (default: as stored).")
def adapter_export(adapter, out, base_hf, with_base, tokenizer, dtype) -> None:
    """Export an adapter in Hugging Face PEFT's format."""
    from afm.console import print_summary

    try:
        from afm.model.checkpoints.adapter_io import read_meta, resolve_base
        from afm.model.checkpoints.hf_export import export_hf, export_peft

        rows: dict[str, Any] = {}
        target = out
        if with_base:
            base_dir = export_hf(resolve_base(adapter, read_meta(adapter)), out / "base", tokenizer_dir=tokenizer)
            base_hf, target = str(base_dir), out / "adapter"
            rows["HF base"] = str(base_dir)
        path = export_peft(adapter, target, base_model=base_hf, dtype=dtype)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    rows["PEFT adapter"] = str(path)
    print_summary("adapter export", rows)


@adapter_group.command("info", epilog="""\b
Examples:
  afm adapter info runs/rec16/adapter
""")
@click.argument("adapter")
def adapter_info(adapter) -> None:
    """An adapter's config, size and base."""
    from afm.console import print_summary

    try:
        from afm.model.checkpoints.adapter_io import read_meta
    except _user_errors() as exc:  # pragma: no cover
        raise click.ClickException(str(exc)) from exc
    try:
        meta = read_meta(adapter)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    lora = meta["lora"]
    print_summary(f"adapter {adapter}", {
        "rank / alpha": f"{lora['rank']} / {lora['alpha']}",
        "targets": ",".join(lora["targets"]),
        "layers": "all" if lora.get("layers") is None else ",".join(map(str, lora["layers"])),
        "parameters": f"{meta['num_params']:,} ({meta['megabytes']:.3f} MB, {meta['dtype']})",
        "base": meta["base"],
        "base palettized": meta["base_config"].get("palettization") is not None,
        **{f"trained {k}": v for k, v in meta.get("meta", {}).items() if k in ("task", "steps", "stage", "init_adapter")},
    })


@adapter_group.command("table", epilog="""\b
Examples:
  afm adapter table --model 16-bit=runs/base/model --model q3.7=q37 --model "q3.7 r16=runs/r37/adapter" \\
      --tokenizer tok/ --heldout 'heldout/*.parquet' --tasks afm-tiny --limit 200 --out results/table10
\b
The first --model is the reference (the 16-bit model). Every model (checkpoint,
palettized checkpoint or adapter directory) gets its bits per weight, the held-out loss on
the same rows and the task group's scores, each as a percentage of the reference's like
the report's Table 10, and each adapter the share of its base's loss gap it recovers.
Writes OUT.json, OUT.md (the table) and OUT.png (the plot).
""")
@click.option("--model", "models", multiple=True, required=True, help="LABEL=PATH (repeatable; the first is the reference).")
@click.option("--tokenizer", default=None, help="Tokenizer directory (needed for the task group).")
@click.option("--heldout", multiple=True, required=True, help="Held-out token shards (never the calibration or training ones).")
@click.option("--tasks", default="afm-tiny", show_default=True, help="Comma list of tasks/groups (afm eval tasks); '' for none.")
@click.option("--limit", type=int, default=None, help="Items per task.")
@click.option("--data-dir", default=None, help="Benchmark files (default: as afm eval).")
@click.option("--rows", type=int, default=64, show_default=True, help="Held-out rows.")
@click.option("--seq-len", type=int, default=256, show_default=True)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Output prefix (OUT.json, OUT.md, OUT.png).")
def adapter_table(models, tokenizer, heldout, tasks, limit, data_dir, rows, seq_len, out) -> None:
    """Compare a 16-bit model, its quantized versions and their adapters (Table 10)."""
    from afm.console import make_progress, setup_logging

    setup_logging("WARNING")
    try:
        from afm.app.studies.recovery_table import (
            evaluate_entries,
            markdown,
            parse_entry,
            write,
        )

        entries = [parse_entry(m) for m in models]
        task_list = [t for t in tasks.split(",") if t.strip()]
        if task_list and not tokenizer:
            raise click.UsageError("--tokenizer is needed for the task group (or pass --tasks '')")
        with make_progress() as progress:
            bar = progress.add_task("models", total=len(entries), rate="")

            def tell(label: str, done: int, total: int) -> None:
                progress.update(bar, completed=done, rate=label)

            table = evaluate_entries(
                entries, tokenizer=tokenizer, heldout=list(heldout),
                tasks=task_list, limit=limit, data_dir=data_dir,
                rows=rows, seq_len=seq_len, progress=tell,
            )
        paths = write(table, out)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(markdown(table))
    for kind, path in paths.items():
        click.echo(f"{kind}: {path}")


COMMANDS = [quantize_command, adapter_group]
