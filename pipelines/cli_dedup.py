"""``afm dedup``: global exact + MinHash LSH de-duplication of document files (Beam)."""

from __future__ import annotations

import click

EPILOG = """\b
Examples:
  afm dedup --input corpus/ --output deduped/
  afm dedup --input a.parquet b.jsonl --output out/ --threshold 0.85
  afm dedup --input week2/ --output week2-dedup/ --index corpus-index/ --write-index
  afm dedup --input big/ --output out/ --direct-num-workers 2

\b
Writes OUTPUT/kept/part-*.parquet (documents, dup_cluster set) and
OUTPUT/rejects/part-*.parquet (reason exact_duplicate | near_duplicate, details with
duplicate_of and cluster), then prints cluster statistics. With --index, documents are
also de-duplicated against an accepted corpus's index (see --write-index).
"""


@click.command("dedup", epilog=EPILOG)
@click.argument("more_inputs", nargs=-1, metavar="[PATH]...")
@click.option("--input", "inputs", multiple=True, required=True,
              help="Parquet / JSONL(.gz) files, directories or globs (records need id, text).")
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--threshold", default=0.8, show_default=True, type=float, help="Jaccard threshold.")
@click.option("--ngram", default=5, show_default=True, type=int, help="Words per shingle.")
@click.option("--num-perm", default=128, show_default=True, type=int, help="MinHash permutations.")
@click.option("--seed", default=1, show_default=True, type=int, help="MinHash seed.")
@click.option("--no-exact", is_flag=True, help="Skip exact (content hash) de-duplication.")
@click.option("--no-verify", is_flag=True, help="Do not verify LSH candidates by signature.")
@click.option("--max-rounds", default=8, show_default=True, type=int,
              help="Connected-components rounds.")
@click.option("--index", "index_dir", type=click.Path(file_okay=False), default=None,
              help="Accepted-corpus index to de-duplicate against (incremental mode).")
@click.option("--write-index", is_flag=True, help="Add the kept documents to --index.")
@click.option("--direct-num-workers", default=1, show_default=True, type=int,
              help="Local runner workers (>1 uses multi-processing).")
@click.option("--shard-size", default=10000, show_default=True, type=int,
              help="Max records per output Parquet file.")
def dedup_command(more_inputs: tuple[str, ...], inputs: tuple[str, ...], output: str, threshold: float, ngram: int, num_perm: int,
                  seed: int, no_exact: bool, no_verify: bool, max_rounds: int, index_dir: str | None,
                  write_index: bool, direct_num_workers: int, shard_size: int) -> None:
    """De-duplicate documents globally: exact content hash, then MinHash LSH clusters."""
    import time

    from afm.pipelines.dedup import DedupConfig, run_dedup_files

    from afm.config import print_config
    from afm.console import console, print_summary
    from afm.io import expand_inputs

    try:
        cfg = DedupConfig(threshold=threshold, ngram=ngram, num_perm=num_perm, seed=seed,
                          exact=not no_exact, verify=not no_verify, max_rounds=max_rounds,
                          index_dir=index_dir, write_index=write_index)
        files = expand_inputs(inputs + more_inputs)  # `--input a b` works too
    except (ValueError, FileNotFoundError) as exc:
        raise click.UsageError(str(exc)) from exc
    files = [f for f in files if f.endswith((".parquet", ".jsonl", ".json", ".jsonl.gz", ".json.gz"))]
    if not files:
        raise click.UsageError(f"no .parquet / .jsonl inputs found in {list(inputs)}")
    print_config(cfg, "dedup config")
    bands, rows = cfg.lsh()
    console.print(f"{len(files)} input file(s); LSH {bands} bands x {rows} rows")
    start = time.perf_counter()
    try:
        with console.status("de-duplicating (Beam local runner)...", spinner="dots"):
            stats = run_dedup_files(files, output, cfg, direct_num_workers=direct_num_workers,
                                    shard_size=shard_size)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    stats["seconds"] = round(time.perf_counter() - start, 2)
    print_summary("dedup", stats)


COMMANDS = [dedup_command]
