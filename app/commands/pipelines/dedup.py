"""``afm dedup``: global exact + MinHash LSH de-duplication of document files (Beam).

The same engine as ``afm curate`` with one stage: the shared reader (every record kept or
rejected with a reason), the duplicate-id policy, the dedup stage, and the shared writer
and output policy (staging, then documents/rejects/manifest/report and ``_SUCCESS``).
"""

from __future__ import annotations

import click

from afm.app.commands.options import POSITIVE, PROBABILITY_OPEN, SEED
from afm.app.commands.pipelines.beam_options import (
    BEAM_HELP,
    BeamCommand,
    runner_options,
    split_beam_args,
)
from afm.app.commands.pipelines.output_options import output_policy_options

EPILOG = """\b
Examples:
  afm dedup --input corpus/ --output deduped/
  afm dedup --input a.parquet b.jsonl --output out/ --threshold 0.85
  afm dedup --input week2/ --output week2-dedup/ --index corpus-index/ --write-index
  afm dedup --input big/ --output out/ --direct-num-workers 2 --overwrite
  afm dedup --input gs://b/corpus/ --output gs://b/dedup/ --index gs://b/dedup-index \\
      --write-index --runner DataflowRunner --project=P --region=us-central1 \\
      --temp_location=gs://b/tmp --sdk_container_image=IMAGE --dry-run

\b
Writes OUTPUT/documents-NNNNN.parquet (kept documents, dup_cluster set),
OUTPUT/rejects-NNNNN.parquet (exact_duplicate | near_duplicate with duplicate_of and
cluster in details; unreadable records; duplicate ids), OUTPUT/manifest.json,
OUTPUT/report.html and OUTPUT/_SUCCESS, then prints cluster statistics. With --index,
documents are also de-duplicated against an accepted corpus's index; --write-index adds
this run's kept documents to it, only once the whole run has succeeded. The index may
live on any filesystem the workers read (local, gs://, s3://).

""" + BEAM_HELP


@click.command("dedup", cls=BeamCommand, epilog=EPILOG)
@click.argument("more_inputs", nargs=-1, metavar="[PATH]...")
@click.option("--input", "inputs", multiple=True, required=True,
              help="Parquet / JSONL(.gz) files, directories or globs (records need text).")
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--threshold", default=0.8, show_default=True, type=PROBABILITY_OPEN, help="Jaccard threshold.")
@click.option("--ngram", default=5, show_default=True, type=int, help="Words per shingle.")
@click.option("--num-perm", default=128, show_default=True, type=int, help="MinHash permutations.")
@click.option("--seed", default=1, show_default=True, type=SEED, help="MinHash seed.")
@click.option("--no-exact", is_flag=True, help="Skip exact (content hash) de-duplication.")
@click.option("--no-verify", is_flag=True, help="Do not verify LSH candidates by signature.")
@click.option("--max-rounds", default=8, show_default=True, type=int,
              help="Connected-components rounds.")
@click.option("--index", "index_dir", default=None,
              help="Accepted-corpus index to de-duplicate against (incremental mode).")
@click.option("--write-index", is_flag=True,
              help="Add the kept documents to --index (committed after the run succeeds).")
@click.option("--max-bucket-fanout", default=1000, show_default=True,
              type=click.IntRange(min=2),
              help="LSH buckets larger than this are split (no hot bucket on one worker).")
@click.option("--direct-num-workers", default=1, show_default=True, type=click.IntRange(min=0),
              help="Local runner worker processes (0 = one per core; the same as Beam's "
                   "--direct_num_workers=N).")
@click.option("--shard-mb", default=128.0, show_default=True, type=POSITIVE,
              help="Target uncompressed megabytes per output shard (documents and rejects).")
@output_policy_options
@runner_options
@click.pass_context
def dedup_command(ctx: click.Context, more_inputs: tuple[str, ...], inputs: tuple[str, ...], output: str,
                  threshold: float, ngram: int, num_perm: int, seed: int, no_exact: bool,
                  no_verify: bool, max_rounds: int, index_dir: str | None, write_index: bool,
                  max_bucket_fanout: int, direct_num_workers: int, shard_mb: float,
                  overwrite: bool, allow_empty: bool, runner: str, dry_run: bool) -> None:
    """De-duplicate documents globally: exact content hash, then MinHash LSH clusters."""
    from afm.app.commands.pipelines.beam_options import finish_dry_run
    from afm.app.commands.pipelines.usage import user_errors
    from afm.console import console, print_summary, setup_logging
    from afm.preflight import check_inputs

    setup_logging("WARNING")
    beam_args, positional = split_beam_args([*more_inputs, *ctx.args])
    params = {"threshold": threshold, "ngram": ngram, "num_perm": num_perm, "seed": seed,
              "exact": not no_exact, "verify": not no_verify, "max_rounds": max_rounds,
              "max_bucket_fanout": max_bucket_fanout, "index_dir": index_dir,
              "write_index": write_index}
    with user_errors():
        if not dry_run:  # before Beam is even imported: a bad input is one line in seconds
            check_inputs([*inputs, *positional], allow_rejects=True)
        from afm.pipelines.curate.pipeline import run_curate
        from afm.pipelines.dedup.pipeline import DedupConfig, stale_staging, summarize

        cfg = DedupConfig(**params)
        bands, rows = cfg.lsh()
        console.print(f"LSH {bands} bands x {rows} rows")
        if index_dir and stale_staging(index_dir):
            console.print(f"[yellow]{index_dir} holds {len(stale_staging(index_dir))} staging "
                          "director(ies) of runs that never committed; they are ignored and "
                          "can be deleted")
        manifest = run_curate(
            list(inputs) + positional, output, command="dedup", overwrite=overwrite,
            config={"stages": ["dedup"], "dedup": {"params": params},
                    "output": {"shard_target_mb": shard_mb, "rejects_shard_target_mb": shard_mb}},
            runner=runner, pipeline_args=beam_args, dry_run=dry_run, allow_empty=allow_empty,
            local_workers=direct_num_workers)
    if dry_run:
        finish_dry_run(manifest, runner)
        return
    stats = summarize(manifest["metrics"], cfg)
    stats["seconds"] = manifest["elapsed_s"]
    print_summary("dedup stage: clusters", stats)


COMMANDS = [dedup_command]
