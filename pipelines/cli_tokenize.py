"""``afm tokenize``: document shards -> Parquet token shards (Beam)."""

from __future__ import annotations

import click

EPILOG = """\b
Examples:
  afm tokenize --input corpus/ --tokenizer work/tok --output tokens/
  afm tokenize --input 'curated/*.parquet' --tokenizer tok/ --output tokens/ --shard-docs 20000
  afm tokenize --input big/ --tokenizer tok/ --output tokens/ --num-workers 4

\b
Writes OUTPUT/tokens-NNNNN-of-MMMMM.parquet (id, source, tokens list<int32>; no BOS/EOS),
OUTPUT/manifest.json (counts per shard and source) and OUTPUT/skipped.jsonl (documents
with no text). Same inputs + tokenizer -> byte-identical shards.
"""


@click.command("tokenize", epilog=EPILOG)
@click.option("--input", "inputs", multiple=True, required=True,
              help="Parquet / JSONL document shards, directories or globs.")
@click.option("--tokenizer", "tokenizer_dir", required=True, type=click.Path(exists=True),
              help="Directory from `afm tokenizer train`.")
@click.option("--output", required=True, type=click.Path(file_okay=False))
@click.option("--shard-docs", default=20_000, show_default=True, type=int,
              help="Target documents per output shard.")
@click.option("--num-workers", default=1, show_default=True, type=int,
              help="Local runner worker processes.")
@click.option("--runner", default="DirectRunner", show_default=True)
def tokenize_command(inputs: tuple[str, ...], tokenizer_dir: str, output: str, shard_docs: int,
                     num_workers: int, runner: str) -> None:
    """Tokenize documents into deterministic Parquet token shards."""
    import time

    from afm.pipelines.tokenize import run_tokenize

    from afm.console import console, print_summary

    start = time.perf_counter()
    console.print(f"tokenize: inputs {list(inputs)} -> {output} (tokenizer {tokenizer_dir})")
    try:
        with console.status("tokenizing (Beam)...", spinner="dots"):
            stats = run_tokenize(list(inputs), tokenizer_dir, output, shard_docs=shard_docs,
                                 runner=runner, num_workers=num_workers)
    except (ValueError, FileNotFoundError, FileExistsError) as exc:
        raise click.ClickException(str(exc)) from exc
    summary = {
        "documents": stats["documents"],
        "tokens": stats["tokens"],
        "shards": len(stats["shards"]),
        "skipped": stats["skipped"],
    }
    for src, agg in stats["sources"].items():
        summary[f"tokens [{src}]"] = agg["tokens"]
    summary["seconds"] = round(time.perf_counter() - start, 2)
    print_summary("tokenize", summary)


COMMANDS = [tokenize_command]
