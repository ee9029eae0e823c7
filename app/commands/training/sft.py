"""``afm sft`` (fine-tune), ``afm sft prepare`` (make an SFT dataset), ``afm sft sweep``
(tune the mixture). Light imports only; the work happens in the command bodies."""

from __future__ import annotations

import click

from afm.app.commands.options import SEED, Number

USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError)


def _user_errors() -> tuple[type[BaseException], ...]:
    from afm.config import ConfigError
    from afm.outputs import OutputError
    from afm.training.core.trainer import TrainingDiverged
    from afm.training.data.shards import DataError

    return (TrainingDiverged, DataError, ConfigError, OutputError, *USER_ERRORS)


@click.group(
    "sft", invoke_without_command=True,
    epilog="""\b
Examples:
  afm sft prepare --input chats.jsonl --name chat --tokenizer tok/ --output sft/chat \\
      --decontam-index decontam-index/
  afm sft --config tiny-sft --workdir runs/sft --init-from runs/ctx \\
      --data sft/chat --data sft/math --heldout sft-heldout/chat --set data.weights.math=0.3
  afm sft --config sft-on-device --workdir gs://b/runs/sft --init-from gs://b/runs/ctx/model --data ...
  afm sft sweep --config tiny-sft --out runs/sweep --init-from runs/ctx --data sft/chat \\
      --data sft/math --heldout sft-heldout/chat --steps 50
\b
Stages: sft (AFM-server: constant LR 5e-6), sft-on-device (2e-5), tiny-sft (tests/demo);
or a YAML file (`base: sft-on-device` plus changes). Dropout 0.1 (task_options.dropout),
loss on assistant tokens only, mixture weights per dataset name in data.weights. With
--heldout the held-out assistant-token loss is evaluated every eval.every_steps and the
best step is kept in WORKDIR/best (eval.select_metric / eval.select_mode choose another
metric). Re-running the command resumes.
""",
)
@click.option("--config", "config", default=None, help="SFT stage (sft, sft-on-device, tiny-sft) or YAML file.")
@click.option("--workdir", default=None, help="Run directory (local or gs://).")
@click.option("--init-from", default=None, help="The base model: a training workdir, checkpoint step or afm.model checkpoint.")
@click.option("--data", "data", multiple=True, help="Prepared SFT dataset (afm sft prepare), repeatable; replaces data.paths.")
@click.option("--heldout", "heldout", multiple=True, help="Prepared held-out SFT dataset, repeatable (eval/heldout/loss).")
@click.option("--steps", type=int, default=None, help="Stop at this step (default: total_steps).")
@click.option("--set", "overrides", multiple=True, help="Config override KEY=VALUE, e.g. data.weights.math=0.3.")
@click.pass_context
def sft_group(ctx: click.Context, config, workdir, init_from, data, heldout, steps, overrides) -> None:
    """Supervised fine-tuning on chat data (report §4.2)."""
    if ctx.invoked_subcommand is not None:
        return
    if not config or not workdir:
        raise click.UsageError("afm sft needs --config and --workdir (or a subcommand: prepare, sweep)")
    from afm.console import setup_logging
    from afm.preflight import check_data_paths

    check_data_paths(data, config=config, overrides=overrides)
    check_data_paths(heldout, "held-out data", config=config, overrides=overrides, key="eval.heldout")
    from afm.training.runs.train import train

    setup_logging("WARNING")
    try:
        result = train(config, workdir, task="sft", require_task="sft", data=list(data) or None,
                       heldout=list(heldout) or None, init_from=init_from, steps=steps, overrides=list(overrides))
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    if result.get("best_step") is not None:
        click.echo(f"best: step {result['best_step']} ({result['best_value']:.4f}) in {workdir}/best")
    click.echo(f"params_sha256: {result['params_sha256']}")


@sft_group.command(
    "prepare",
    epilog="""\b
Examples:
  afm sft prepare --input data/chat.jsonl --name chat --tokenizer work/demo/tokenizer \\
      --output sft/chat --decontam-index work/demo/decontam-index
  afm sft prepare --input 'raw/*.jsonl.gz' --name math --tokenizer tok/ --output sft/math --no-decontam
\b
Input records: {"messages": [...], "tools": [...]}, ShareGPT {"conversations": [...]},
Alpaca {"instruction", "input", "output"} or {"prompt", "completion"}. Output: token
shards with the assistant mask, rejects with stage and reason, manifest.json, _SUCCESS.
""",
)
@click.option("--input", "inputs", multiple=True, required=True, help="JSONL/Parquet file, directory or glob (repeatable).")
@click.option("--name", required=True, help="Dataset name: its key in the mixture (data.weights).")
@click.option("--tokenizer", required=True, help="Tokenizer directory (afm tokenizer train).")
@click.option("--output", required=True, help="Output dataset directory.")
@click.option("--decontam-index", default=None, help="Benchmark n-gram index (afm decontam build-index).")
@click.option("--no-decontam", is_flag=True, help="Skip decontamination (the manifest says so).")
@click.option("--threshold", type=int, default=1000, show_default=True, help="Common-usage count: n-grams in this many conversations are kept.")
@click.option("--no-pii", is_flag=True, help="Skip the PII filter (the manifest says so).")
@click.option("--max-tokens", type=int, default=4096, show_default=True, help="Longer conversations are dropped (too_long).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output directory.")
def prepare_command(inputs, name, tokenizer, output, decontam_index, no_decontam, threshold, no_pii,
                    max_tokens, overwrite) -> None:
    """Instruction data -> an SFT dataset: format check, PII, dedup, chat template, decontamination."""
    from afm.console import print_summary

    if not decontam_index and not no_decontam:
        raise click.UsageError("give --decontam-index (build one with `afm decontam build-index`) "
                               "or --no-decontam to skip decontamination on purpose")
    from afm.preflight import InputProblem, check_inputs

    try:  # missing, empty, binary, undecodable: one line before the filters are loaded
        check_inputs(inputs, shapes={"jsonl": 'one conversation per line (chat messages, ShareGPT or Alpaca), e.g. '
                                              '{"messages": [{"role": "user", "content": "..."}, ...]}',
                                     "parquet": "a Parquet file of conversations (a messages column)"})
    except InputProblem as exc:
        raise click.ClickException(str(exc)) from None
    from afm.synth.prepare import PrepareConfig, PrepareError, prepare_sft

    cfg = PrepareConfig(name=name, tokenizer=tokenizer, decontam_index=None if no_decontam else decontam_index,
                        threshold=threshold, pii=not no_pii, max_tokens=max_tokens)
    try:
        manifest = prepare_sft(list(inputs), output, cfg, overwrite=overwrite)
    except (PrepareError, *_user_errors()) as exc:
        raise click.ClickException(str(exc)) from exc
    rows: list[tuple[str, object]] = [(f"conversations {k}", v) for k, v in manifest["totals"].items()]
    for stage, c in manifest["stages"].items():
        if c["rejected"]:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(c["reasons"].items()))
            rows.append((f"dropped by {stage}", f"{c['rejected']} ({reasons})"))
    rows += [("tokens", manifest["tokens"]), ("assistant tokens", manifest["trained_tokens"]),
             ("PII redactions", ", ".join(f"{k} {v}" for k, v in manifest["pii_redactions"].items()) or "none"),
             ("decontamination", "off" if manifest["decontamination"] == "off" else "on"),
             ("output", output)]
    print_summary(f"sft prepare: {name}", rows)


@sft_group.command(
    "sweep",
    epilog="""\b
Examples:
  afm sft sweep --config tiny-sft --out runs/sweep --init-from runs/ctx \\
      --data sft/arith --data sft/copy --data sft/chat --heldout sft-heldout/arith --steps 60
  afm sft sweep --config my-sft.yaml --out runs/sweep --delta 1.0 --only chat   # drop a component
\b
Runs the baseline mixture and, for each dataset, one run with its weight x (1 + delta)
and one with x (1 - delta), same seed and budget; prints which direction helps and writes
OUT/sweep.json and OUT/sweep.png.
""",
)
@click.option("--config", "config", required=True, help="SFT stage or YAML file.")
@click.option("--out", required=True, help="Directory for the runs, sweep.json and sweep.png.")
@click.option("--init-from", default=None, help="The base model every run starts from.")
@click.option("--data", "data", multiple=True, help="Prepared SFT dataset (repeatable).")
@click.option("--heldout", "heldout", multiple=True, help="Prepared held-out SFT dataset (repeatable).")
@click.option("--steps", type=int, default=50, show_default=True, help="Steps per run (the budget).")
@click.option("--delta", type=Number(0, 1, min_open=True), default=0.5, show_default=True, help="Relative change of one weight (1.0 removes it).")
@click.option("--metric", default="eval/heldout/loss", show_default=True, help="Result key compared across runs.")
@click.option("--mode", type=click.Choice(["min", "max"]), default="min", show_default=True)
@click.option("--only", multiple=True, help="Perturb only these datasets (repeatable).")
@click.option("--set", "overrides", multiple=True)
def sweep_command(config, out, init_from, data, heldout, steps, delta, metric, mode, only, overrides) -> None:
    """Mixture tuning: +/- one weight at a time, table and plot (report §4.2)."""
    from afm.app.studies.sft_sweep import sweep
    from afm.console import setup_logging

    setup_logging("WARNING")
    try:
        result = sweep(config, out, data=list(data) or None, heldout=list(heldout) or None,
                       init_from=init_from, steps=steps, delta=delta, metric=metric, mode=mode,
                       only=list(only) or None, overrides=list(overrides))
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"sweep: {out}/sweep.json, plot: {result['plot']}")


@sft_group.command("demo-data", epilog="""\b
Examples:
  afm sft demo-data --out sft-demo --per-set 400
\b
Writes OUT/train/<name>.jsonl and OUT/heldout/<name>.jsonl for the four datasets of the
demo instruction set (arith, compare, copy, chat; Apache-2.0, generated by
afm.synth.demo_data, disjoint train/held-out questions) and OUT/eval/<task>/gsm8k-test.jsonl
(held-out arith / compare questions in GSM8K's layout, for `afm eval --tasks gsm8k
--data-dir OUT/eval/compare`).
""")
@click.option("--out", required=True, help="Output directory.")
@click.option("--per-set", type=int, default=200, show_default=True, help="Training conversations per dataset.")
@click.option("--held-out", type=int, default=40, show_default=True, help="Held-out conversations per dataset.")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--planted/--no-planted", default=True, show_default=True,
              help="Add the records `afm sft prepare` must reject (malformed, PII, benchmark quote, ...).")
@click.option("--overwrite", is_flag=True, help="Replace what OUT holds.")
def demo_data_command(out, per_set, held_out, seed, planted, overwrite) -> None:
    """Write the demo instruction set (and its held-out evaluation items)."""
    from pathlib import Path

    from afm.outputs import OutputError, write_directory
    from afm.synth.demo_data import eval_items, write_demo_set

    def write(staging: str) -> dict:
        written = write_demo_set(staging, seed=seed, per_set=per_set, held_out_per_set=held_out, planted=planted)
        for task in ("arith", "compare"):
            eval_items(Path(staging) / "eval" / task / "gsm8k-test.jsonl", seed=seed, n=held_out, task=task)
        # where each file is once promoted
        return {split: {k: str(Path(out) / Path(v).relative_to(staging)) for k, v in named.items()}
                for split, named in written.items()}

    try:
        files = write_directory(out, write, overwrite=overwrite, manifest={"command": "sft demo-data"})
    except OutputError as exc:
        raise click.ClickException(str(exc)) from exc
    for split, named in files.items():
        click.echo(f"{split}: " + ", ".join(f"{k}={v}" for k, v in named.items()))
    click.echo(f"eval items: {out}/eval/arith, {out}/eval/compare (GSM8K layout)")


COMMANDS = [sft_group]
