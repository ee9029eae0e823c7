"""``afm train``, ``afm bench-train`` and ``afm train-compare`` (light imports only)."""

from __future__ import annotations

from pathlib import Path

import click

from afm.app.commands.options import POSITIVE


def _maybe_distributed(coordinator: str | None, num_processes: int | None, process_id: int | None, auto: bool) -> None:
    """Join a multi-host JAX job before anything touches the backend.

    On TPU VMs / SLURM / GKE ``jax.distributed.initialize()`` discovers everything
    (``--distributed``); elsewhere pass the coordinator and this process's rank.
    """
    if not (auto or coordinator):
        return
    import jax

    if coordinator:
        if num_processes is None or process_id is None:
            raise click.UsageError("--coordinator needs --num-processes and --process-id")
        jax.distributed.initialize(
            coordinator_address=coordinator, num_processes=num_processes, process_id=process_id
        )
    else:
        jax.distributed.initialize()


@click.command(
    "train",
    epilog="""\b
Examples:
  afm train --list-configs                       # every named stage, of every task
  afm train --config tiny-core --workdir runs/tiny-core --data 'corpus/tokens/*.parquet'
  afm train --config tiny-sft --workdir runs/sft --data sft/chat --init-from runs/tiny-ctx
  afm train --config tiny-continued --workdir runs/tiny-cont --init-from runs/tiny-core
  afm train --config core --workdir /mnt/gcs/runs/core --distributed   # every TPU worker
  afm train --config my.yaml --workdir runs/x --steps 100 --set optimizer.name=adamw
  afm train --config tiny-core --workdir runs/p --data D --profile-steps 5:8   # trace in runs/p/profile
  afm train --config tiny-core --workdir gs://bucket/runs/core --data 'gs://bucket/tokens/*.parquet'
\b
Re-running the same command resumes from the latest checkpoint in WORKDIR, also on a
different number of hosts (any that divides the run's data lanes). --steps is where to
stop (the LR schedule always spans the config's total_steps), so 100 steps and 50 steps +
resume to 100 end with the same params_sha256. SIGTERM on any host saves a checkpoint on
all hosts and exits cleanly.
""",
)
@click.option("--config", "config", default=None,
              help="A named stage of any task (afm train --list-configs) or a YAML file (may say base: STAGE).")
@click.option("--workdir", default=None, help="Run directory (local or gs://): checkpoints/, tb/, metrics.jsonl.")
@click.option("--list-configs", is_flag=True, help="List every named stage (task, model, what it is) and exit.")
@click.option("--steps", type=int, default=None, help="Stop at this step (default: the config's total_steps).")
@click.option("--data", "data", multiple=True, help="Token shard file/dir/glob (repeatable); replaces data.paths.")
@click.option("--init-from", default=None, help="Previous stage's workdir or checkpoint, local or gs:// (parameters only).")
@click.option("--set", "overrides", multiple=True, help="Config override KEY=VALUE, e.g. mesh.fsdp=8 (repeatable).")
@click.option("--profile-steps", default=None, help="START:END: record a JAX profiler trace of these steps (TensorBoard/Perfetto).")
@click.option("--distributed", is_flag=True, help="jax.distributed.initialize() with auto-detection (TPU VM, SLURM).")
@click.option("--coordinator", default=None, help="host:port of process 0 for jax.distributed (non-TPU clusters).")
@click.option("--num-processes", type=int, default=None)
@click.option("--process-id", type=int, default=None)
@click.option("--batch", default=None, metavar="N|auto",
              help="Global batch (data.global_batch_size), or auto: the largest per-device batch whose compiled "
                   "memory plan fits the device.")
@click.option("--remat", default=None, metavar="POLICY|auto",
              help="Remat policy (afm.model.remat), or auto: the cheapest whose compiled memory plan fits.")
@click.option("--device-memory-gb", type=POSITIVE, default=None,
              help="Device memory for --batch/--remat auto (default: the device's own limit; env AFM_DEVICE_MEMORY_GB).")
def train_command(config, workdir, list_configs, steps, data, init_from, overrides, profile_steps, distributed,
                  coordinator, num_processes, process_id, batch, remat, device_memory_gb) -> None:
    """Train a stage of any task with the AFM recipe (auto-resumes; prints params_sha256)."""
    if list_configs:
        _print_configs()
        return
    if not config or not workdir:
        raise click.UsageError("afm train needs --config and --workdir (or --list-configs)")
    from afm.preflight import check_data_paths

    check_data_paths(data, config=config, overrides=overrides)  # before JAX is imported and the config printed: seconds, one line
    _maybe_distributed(coordinator, num_processes, process_id, distributed)
    from afm.config import ConfigError
    from afm.console import setup_logging
    from afm.training.core.trainer import TrainingDiverged
    from afm.training.data.shards import DataError
    from afm.training.runs.train import train

    setup_logging("WARNING")
    overrides = [*overrides, *_fitted_overrides(config, list(overrides), batch, remat, device_memory_gb)]
    try:
        result = train(
            config, str(workdir), steps=steps, data=list(data) or None, init_from=init_from,
            overrides=list(overrides), profile_steps=profile_steps,
        )
    except (TrainingDiverged, DataError, ConfigError, ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc  # user errors: a message, no traceback
    click.echo(f"params_sha256: {result['params_sha256']}")


def _print_configs() -> None:
    """One line per stage, grouped by table (plain text: it is read and grepped)."""
    from afm.training.core.config import list_configs

    configs = list_configs()
    width = max(len(c["name"]) for c in configs)
    table = ""
    for c in configs:
        if c["table"] != table:
            table = c["table"]
            click.echo(f"{'' if table == configs[0]['table'] else chr(10)}# afm/training/configs/{table}")
        click.echo(f"{c['name']:<{width}}  {c['task']:<12}  {c['model']:<16}  {c['description']}")


def _batch_and_remat(batch: str | None, remat: str | None) -> tuple[bool, int | None, bool, str | None]:
    """(batch auto?, global batch, remat auto?, policy), checked: one-line errors."""
    from afm.errors import UserError
    from afm.model import remat as remat_policies
    from afm.training.runs.autofit import parse_auto

    auto_batch, raw = parse_auto(batch, "batch")
    size = None
    if raw is not None:
        try:
            size = int(raw)
        except ValueError:
            raise UserError(f"--batch must be a positive integer or auto, got {raw!r}") from None
        if size < 1:
            raise UserError(f"--batch must be a positive integer or auto, got {raw!r}")
    auto_remat, policy = parse_auto(remat, "remat")
    if policy is not None:
        try:
            remat_policies.validate(policy)
        except ValueError as exc:
            raise UserError(f"--remat: {exc}") from None
    return auto_batch, size, auto_remat, policy


def _fitted_overrides(config: str, overrides: list[str], batch: str | None, remat: str | None,
                      device_memory_gb: float | None) -> list[str]:
    """``--batch`` / ``--remat`` as config overrides; ``auto`` is resolved here, on the
    run's mesh, and the choice printed before the run starts."""
    auto_batch, size, auto_remat, policy = _batch_and_remat(batch, remat)
    sets = ([f"data.global_batch_size={size}"] if size else []) + ([f"model_overrides.remat={policy}"] if policy else [])
    if not (auto_batch or auto_remat):
        return sets
    from afm.console import console
    from afm.model.distributed.sharding import make_mesh
    from afm.training.core.config import get_train_config
    from afm.training.runs.autofit import fit_config

    cfg = get_train_config(config, [*overrides, *sets])
    fitted, fit = fit_config(cfg, make_mesh(cfg.mesh), batch=auto_batch, remat=auto_remat,
                             device_memory_gb=device_memory_gb)
    console.print(fit.summary())
    return [*sets, f"data.global_batch_size={fitted.data.global_batch_size}", f"model_overrides.remat={fit.remat}"]


@click.command(
    "bench-train",
    epilog="""\b
Examples:
  afm bench-train --config 1b --seq-len 4096            # on an H100: tokens/s, MFU, memory
  afm bench-train --config 1b --seq-len 32768 --batch 1 --remat qkv_attention   # 32k shapes
  afm bench-train --config tiny --seq-len 128 --steps 5   # CPU smoke run
  afm bench-train --config tiny --seq-len 128 --attention splash   # splash in interpret mode
""",
)
@click.option("--config", "model", default="1b", show_default=True, help="Model config name (afm.model).")
@click.option("--seq-len", type=int, default=4096, show_default=True)
@click.option("--batch", default=None, metavar="N|auto",
              help="Global batch (default: 4 per device on GPU/TPU, 2 on CPU), or auto: the largest per-device "
                   "batch whose compiled memory plan fits the device.")
@click.option("--steps", type=int, default=10, show_default=True, help="Timed steps (after 2 warm-up steps).")
@click.option("--remat", default=None, help="Override the model's remat policy (afm.model.remat: none, full, dots, attention, qkv_attention, dots_except_mlp, save:NAMES), or auto: the cheapest that fits.")
@click.option("--device-memory-gb", type=POSITIVE, default=None,
              help="Device memory for --batch/--remat auto (default: the device's own limit; env AFM_DEVICE_MEMORY_GB).")
@click.option("--attention", default=None, help="Attention kernel: auto, xla, cudnn, splash (default: the model's, auto).")
@click.option("--microbatches", type=int, default=1, show_default=True, help="Gradient accumulation slices of the batch.")
@click.option("--optimizer", default="afm_rmsprop", show_default=True)
@click.option("--peak-tflops", type=POSITIVE, default=989.0, show_default=True, help="Per-device peak (H100 dense bf16: 989).")
@click.option("--set", "overrides", multiple=True, help="Mesh overrides, e.g. mesh.fsdp=8.")
def bench_train_command(model, seq_len, batch, steps, remat, attention, microbatches, optimizer, peak_tflops, overrides,
                        device_memory_gb) -> None:
    """Training throughput of one model size: tokens/s, MFU, peak device memory, attention kernel."""
    from afm.app.bench.training.throughput import bench_train
    from afm.console import console, print_summary

    auto_batch, size, auto_remat, policy = _batch_and_remat(batch, remat)
    result = bench_train(
        model, seq_len=seq_len, batch="auto" if auto_batch else size, steps=steps,
        remat="auto" if auto_remat else policy, attention=attention, microbatches=microbatches,
        optimizer=optimizer, peak_tflops=peak_tflops, overrides=list(overrides), device_memory_gb=device_memory_gb,
    )
    if result.get("auto_fit"):
        console.print(result["auto_fit"])
    print_summary(f"bench-train {model} seq {seq_len}", result)


@click.command(
    "train-compare",
    epilog="""\b
Examples:
  afm train-compare --config tiny-core --data 'work/demo/tokens/*.parquet' --steps 60 --out runs/cmp
\b
Trains the same config twice on the same data and steps, once with the AFM optimizer
and once with Appendix A's AdamW, and writes loss curves to OUT/optimizer_comparison.png.
""",
)
@click.option("--config", "config", default="tiny-core", show_default=True)
@click.option("--data", "data", multiple=True, required=True)
@click.option("--steps", type=int, default=None)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--adamw-lr", type=POSITIVE, default=None, help="AdamW peak LR (default: the config's LR).")
@click.option("--set", "overrides", multiple=True)
def train_compare_command(config, data, steps, out, adamw_lr, overrides) -> None:
    """AFM optimizer vs the AdamW baseline: same data, same steps, one plot."""
    from afm.app.studies.optimizer_comparison import compare_optimizers
    from afm.console import print_summary

    summary = compare_optimizers(config, list(data), out, steps=steps, adamw_lr=adamw_lr, overrides=list(overrides))
    print_summary("optimizer comparison", summary)


COMMANDS = [train_command, bench_train_command, train_compare_command]
