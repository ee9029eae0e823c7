"""``afm prune learn|apply`` and ``afm distill targets`` (light imports only).

The on-device model's start (report §3.2.1): learn FFN pruning masks on a trained teacher,
materialise the smaller model, then pre-train it with the teacher's top-1 tokens as
targets (``afm train --config on-device-core`` / ``tiny-distill-core``, task ``distill``).
"""

from __future__ import annotations

from pathlib import Path

import click

from afm.app.commands.options import SEED

_USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, FileExistsError)


def _user_errors() -> tuple[type[BaseException], ...]:
    from afm.outputs import OutputError
    from afm.training.core.trainer import TrainingDiverged

    return (*_USER_ERRORS, OutputError, TrainingDiverged)


@click.group("prune", epilog="""\b
Examples:
  afm prune learn --teacher runs/teacher --target-ffn-dim 192 --config tiny-prune \\
      --workdir runs/prune --data work/demo/tokens
  afm prune apply --run runs/prune --out runs/pruned
  afm train --config tiny-distill-core --workdir runs/student --data work/demo/tokens \\
      --init-from runs/pruned --set task_options.teacher=runs/teacher
""")
def prune_group() -> None:
    """Learned FFN pruning (Soft-Top-K masks) of a teacher into the on-device model's start, and its random / magnitude controls."""


@prune_group.command("learn", epilog="""\b
Examples:
  afm prune learn --teacher runs/teacher --target-ffn-dim 192 --config tiny-prune \\
      --workdir runs/prune --data work/demo/tokens
  afm prune learn --teacher gs://B/teacher/model --target-ffn-dim 8064 --config on-device-prune \\
      --workdir gs://B/runs/prune --data 'gs://B/tokens/*.parquet' --distributed
  afm prune learn ... --train-weights --set task_options.temperature_end=0.001
\b
The model's shapes come from the teacher checkpoint (a workdir of `afm train`, a step
directory, or a model/ directory). Each layer learns one Soft-Top-K mask over its FFN
hidden units; the temperature anneals from task_options.temperature_start to
temperature_end, so exactly D units per layer remain at the end. Logged every step:
mask_entropy, mask_hard_gap, mask_temperature; at each evaluation (eval.every_steps):
the held-out loss at the hard mask, and the kept-unit overlap with the previous and the
first evaluation (eval/prune/overlap_prev, overlap_first; kept indices in
WORKDIR/prune-masks.jsonl). Re-running the command resumes. Then: afm prune apply.
""")
@click.option("--teacher", required=True, help="Trained teacher: an `afm train` workdir, step dir, or model/ checkpoint.")
@click.option("--target-ffn-dim", type=int, required=True, help="FFN hidden units to keep per layer (D).")
@click.option("--config", "config", default="tiny-prune", show_default=True,
              help="Pruning stage (tiny-prune, on-device-prune) or a YAML file with task: prune.")
@click.option("--workdir", required=True, help="Run directory (local or gs://).")
@click.option("--data", "data", multiple=True, help="Token shards of the core mixture (file/dir/glob, repeatable).")
@click.option("--steps", type=int, default=None, help="Stop at this step (default: the config's total_steps).")
@click.option("--train-weights/--frozen-weights", default=None,
              help="Train the teacher's weights jointly with the masks (default: the config's; frozen).")
@click.option("--heldout", "heldout", multiple=True, help="Held-out token shards: loss at the hard mask per evaluation.")
@click.option("--set", "overrides", multiple=True, help="Config override KEY=VALUE (repeatable).")
@click.option("--distributed", is_flag=True, help="jax.distributed.initialize() with auto-detection (TPU VM, SLURM).")
def prune_learn_command(teacher, target_ffn_dim, config, workdir, data, steps, train_weights, heldout, overrides, distributed) -> None:
    """Learn per-layer FFN pruning masks with Soft-Top-K on a trained teacher."""
    from afm.app.commands.training.train import _maybe_distributed
    from afm.preflight import check_data_paths

    check_data_paths(data, config=config, overrides=overrides)
    check_data_paths(heldout, "held-out data", config=config, overrides=overrides, key="eval.heldout")
    _maybe_distributed(None, None, None, distributed)
    from afm.console import print_summary, setup_logging

    setup_logging("WARNING")
    try:
        from afm.training.runs.train import train

        result = train(config, str(workdir), require_task="prune", init_from=teacher, data=list(data) or None,
                       heldout=list(heldout) or None, steps=steps, overrides=list(overrides),
                       task_options={"target_ffn_dim": int(target_ffn_dim), "train_weights": train_weights})
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary("prune learn", result)
    click.echo(f"next: afm prune apply --run {workdir} --out <pruned checkpoint>")


@prune_group.command("apply", epilog="""\b
Examples:
  afm prune apply --run runs/prune --out runs/pruned
  afm prune apply --run runs/prune/checkpoints/200 --out runs/pruned-200 --overwrite
  afm prune apply --method random --seed 1 --teacher runs/teacher --target-ffn-dim 192 --out runs/pruned-random-1
  afm prune apply --method magnitude --teacher runs/teacher --target-ffn-dim 192 --out runs/pruned-magnitude
  afm train --config tiny-distill-core --workdir runs/student --init-from runs/pruned ...
\b
--method soft-top-k (default): keeps, in every layer, the D units with the highest mask
scores of a pruning run (the hard mask the learned Soft-Top-K mask converges to): the
columns of w_gate and w_up and the rows of w_down, in their original order; its loss
equals the pruning run's at the hard mask.
--method random / magnitude: controls for the learned masks. Keep D units per layer of
--teacher chosen uniformly at random (--seed, default 0; each layer drawn in turn from one
generator) or by magnitude (the L2 norm of each unit's w_gate column, w_up column and
w_down row together: LLM-Pruner's "L2" structured baseline).
Every method writes the same normal model checkpoint (config.json with ffn_dim D,
params/, and prune.json with the method and the kept indices).
""")
@click.option("--method", type=click.Choice(["soft-top-k", "random", "magnitude"]), default="soft-top-k",
              show_default=True, help="Which units to keep: learned masks of --run, or a control on --teacher.")
@click.option("--run", "run", default=None, help="soft-top-k: a pruning run's workdir (latest checkpoint) or one step directory.")
@click.option("--teacher", default=None, help="random / magnitude: the teacher checkpoint (afm train workdir, step dir or model/).")
@click.option("--target-ffn-dim", type=int, default=None, help="random / magnitude: FFN units to keep per layer (D).")
@click.option("--seed", type=SEED, default=None, help="random: the generator's seed (default 0).")
@click.option("--out", required=True, help="Where to write the pruned model checkpoint.")
@click.option("--overwrite", is_flag=True, help="Replace an existing checkpoint at --out.")
def prune_apply_command(method, run, teacher, target_ffn_dim, seed, out, overwrite) -> None:
    """Materialise the pruned model (smaller ffn_dim) as a checkpoint `afm train --init-from` accepts."""
    from afm.console import print_summary, setup_logging

    setup_logging("WARNING")
    try:
        from afm.training.compress.pruning import apply_baseline, apply_pruning, check_apply_args

        check_apply_args(method, run, teacher, target_ffn_dim, seed)
        if method == "soft-top-k":
            summary = apply_pruning(run, out, overwrite=overwrite)
        else:
            summary = apply_baseline(teacher, out, method, target_ffn_dim, seed=0 if seed is None else seed,
                                     overwrite=overwrite)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary("prune apply", summary)


@prune_group.command("report", epilog="""\b
Examples:
  afm prune report --runs work/ablation/runs --eval work/ablation/eval --out experiments/on-device-ablation
  afm prune report --runs work/ablation/runs --eval work/ablation/eval --start-eval work/ablation/eval-start --out OUT
\b
Reads the runs of experiments/on-device-ablation/run.sh (baseline, prune-only, prune-random-<seed>,
prune-magnitude, distill-only, both, baseline-1.5x, teacher): their held-out loss curves (metrics.jsonl) and afm eval results
(EVAL/<run>.json), and writes OUT/ablation.md (the table) and OUT/ablation.png (the curves).
With --start-eval, also each pruned start's held-out NLL before training (afm eval of
runs/pruned, runs/pruned-random-<seed>, runs/pruned-magnitude, as START_EVAL/<name>.json).
""")
@click.option("--runs", required=True, type=click.Path(path_type=Path), help="Directory holding the ablation's run workdirs.")
@click.option("--eval", "evals", required=True, type=click.Path(path_type=Path), help="Directory of afm eval results (<run>.json).")
@click.option("--start-eval", "start_evals", type=click.Path(path_type=Path), default=None,
              help="Directory of afm eval results of the pruned checkpoints (<start>.json): a column of their NLL before training.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Where ablation.md and ablation.png go.")
def prune_report_command(runs, evals, start_evals, out) -> None:
    """Table and loss-curve plot of a pruning / distillation ablation."""
    from afm.console import print_summary

    try:
        from afm.app.studies.ondevice_report import build_report

        report = build_report(runs, evals, out, start_evals)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(Path(report["table"]).read_text())
    print_summary("prune report", {"table": report["table"], "plot": report["plot"]})


@click.group("distill", epilog="""\b
Examples:
  afm distill targets --teacher runs/teacher --data work/demo/tokens --out work/distill-tokens
  afm train --config tiny-distill-core --workdir runs/student --data work/distill-tokens --init-from runs/pruned
""")
def distill_group() -> None:
    """Top-1 distillation: the teacher's predictions as training targets (0.9 teacher + 0.1 label)."""


@distill_group.command("targets", epilog="""\b
Examples:
  afm distill targets --teacher runs/teacher --data work/demo/tokens --out work/distill-tokens
  afm distill targets --teacher runs/teacher/model --data 'tokens/*.parquet' --out t/ --window 512 --batch-size 16
\b
Writes the input token shards again (same rows and row groups) with one more column,
teacher_top1 (one int32 per token: the teacher's most likely next token), plus
manifest.json and _SUCCESS. Train on them with task distill and no task_options.teacher:
the targets are read instead of recomputed at every step. Documents are read in windows of
--window tokens (default: the teacher run's training sequence length).
""")
@click.option("--teacher", required=True, help="Trained teacher: an `afm train` workdir, step dir, or model/ checkpoint.")
@click.option("--data", "data", multiple=True, required=True, help="Token shards (file/dir/glob, repeatable).")
@click.option("--out", required=True, help="Output dataset directory.")
@click.option("--window", type=int, default=None, help="Teacher context per window (default: its training seq_len).")
@click.option("--batch-size", type=int, default=8, show_default=True, help="Packed rows per teacher forward pass.")
@click.option("--column", default="teacher_top1", show_default=True, help="Name of the new column.")
@click.option("--overwrite", is_flag=True, help="Replace a finished output directory.")
def distill_targets_command(teacher, data, out, window, batch_size, column, overwrite) -> None:
    """Precompute a teacher's top-1 prediction per token into token-aligned Parquet shards."""
    from afm.console import make_progress, print_summary, setup_logging

    setup_logging("WARNING")
    try:
        from afm.training.compress.distill_targets import compute_targets

        with make_progress() as progress:
            bar = progress.add_task("teacher top-1", total=None, rate="")

            def report(done: int, total: int) -> None:
                progress.update(bar, completed=done, total=total, rate=f"{done:,} documents")

            manifest = compute_targets(teacher, list(data), out, window=window, batch_size=batch_size,
                                       column=column, overwrite=overwrite, progress=report)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary("distill targets", {
        "output": out, "teacher": f"{teacher} ({manifest['teacher_model']})", "window": manifest["window"],
        "documents": manifest["documents"], "tokens": manifest["tokens"], "seconds": manifest["seconds"],
    })


COMMANDS = [prune_group, distill_group]
