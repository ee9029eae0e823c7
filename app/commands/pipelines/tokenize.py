"""``afm tokenize``: document shards -> Parquet token shards (Beam)."""

from __future__ import annotations

import click

from afm.app.commands.pipelines.beam_options import (
    BEAM_HELP,
    BeamCommand,
    finish_dry_run,
    runner_options,
)
from afm.app.commands.pipelines.output_options import output_policy_options

EPILOG = """\b
Examples:
  afm tokenize --input corpus/ --tokenizer work/tok --output tokens/
  afm tokenize --input 'corpus/documents-*.parquet' --tokenizer tok/ --output tokens/ --shard-docs 20000
  afm tokenize --input big/ --tokenizer tok/ --output tokens/ --num-workers 4 --overwrite
  afm tokenize --input gs://b/corpus/ --tokenizer gs://b/tok/ --output gs://b/tokens/ \\
      --runner DataflowRunner --project=P --region=us-central1 --temp_location=gs://b/tmp \\
      --sdk_container_image=IMAGE --dry-run

\b
A curate output directory (corpus/) is read only when it has its _SUCCESS marker, and
then only its documents-* shards: rejected documents never become tokens.
Writes OUTPUT/tokens-NNNNN-of-MMMMM.parquet (id, source, tokens list<int32>; no BOS/EOS),
OUTPUT/manifest.json (counts per shard and source, skipped by reason),
OUTPUT/skipped.jsonl (every document not tokenized, with the reason) and OUTPUT/_SUCCESS.
Same inputs + tokenizer -> byte-identical shards, on any runner.

""" + BEAM_HELP


@click.command("tokenize", cls=BeamCommand, epilog=EPILOG)
@click.option("--input", "inputs", multiple=True, required=True,
              help="Parquet / JSONL document shards, directories or globs.")
@click.option("--tokenizer", "tokenizer_dir", required=True,
              help="Directory from `afm tokenizer train` (local or gs:// / s3://).")
@click.option("--output", required=True, help="Output directory (local or gs:// / s3://).")
@click.option("--shard-docs", default=20_000, show_default=True, type=click.IntRange(min=1),
              help="Target documents per output shard.")
@click.option("--num-workers", default=1, show_default=True, type=click.IntRange(min=0),
              help="Local runner worker processes (0 = one per core).")
@output_policy_options
@runner_options
@click.pass_context
def tokenize_command(ctx: click.Context, inputs: tuple[str, ...], tokenizer_dir: str,
                     output: str, shard_docs: int, num_workers: int, overwrite: bool,
                     allow_empty: bool, runner: str, dry_run: bool) -> None:
    """Tokenize documents into deterministic Parquet token shards."""
    import time

    from afm.app.commands.pipelines.usage import user_errors
    from afm.console import console, print_summary
    from afm.preflight import check_inputs

    start = time.perf_counter()
    if not dry_run:
        with user_errors():  # before Beam is even imported: a bad input is one line in seconds
            check_inputs(inputs)
    console.print(f"tokenize: inputs {list(inputs)} -> {output} (tokenizer {tokenizer_dir})")
    from afm.pipelines.tokenize import run_tokenize

    if dry_run:
        with user_errors():
            result = run_tokenize(list(inputs), tokenizer_dir, output, shard_docs=shard_docs,
                                  runner=runner, num_workers=num_workers,
                                  pipeline_args=list(ctx.args), dry_run=True)
        for warning in result["option_warnings"]:
            console.print(f"[yellow]warning: {warning}")
        for error in result["option_errors"]:
            console.print(f"[red]error: {error}")
        finish_dry_run(result, runner)
        return
    with user_errors(), console.status(f"tokenizing (Beam, {runner})...", spinner="dots"):
        stats = run_tokenize(list(inputs), tokenizer_dir, output, shard_docs=shard_docs,
                             runner=runner, num_workers=num_workers,
                             pipeline_args=list(ctx.args), overwrite=overwrite, allow_empty=allow_empty)
    summary: dict[str, object] = {
        "documents in": stats["documents_in"],
        "tokenized": stats["documents"],
        "skipped": stats["skipped"],
        "tokens": stats["tokens"],
        "shards": len(stats["shards"]),
    }
    for reason, n in stats["skipped_by_reason"].items():
        summary[f"  skipped: {reason}"] = n
    for src, agg in stats["sources"].items():
        summary[f"tokens ({src})"] = agg["tokens"]
    summary["seconds"] = round(time.perf_counter() - start, 2)
    print_summary("tokenize", summary)
    if stats["documents"] == 0:  # only with --allow-empty (afm.outputs.refuse_empty)
        console.print(f"[bold yellow]warning: no document tokenized: all {stats['documents_in']} skipped")


COMMANDS = [tokenize_command]
