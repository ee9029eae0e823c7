"""``afm tokenize``: document shards -> Parquet token shards (Beam)."""

from __future__ import annotations

import click

EPILOG = """\b
Examples:
  afm tokenize --input corpus/ --tokenizer work/tok --output tokens/
  afm tokenize --input 'corpus/documents-*.parquet' --tokenizer tok/ --output tokens/ --shard-docs 20000
  afm tokenize --input big/ --tokenizer tok/ --output tokens/ --num-workers 4 --overwrite

\b
A curate output directory (corpus/) is read only when it has its _SUCCESS marker, and
then only its documents-* shards: rejected documents never become tokens.
Writes OUTPUT/tokens-NNNNN-of-MMMMM.parquet (id, source, tokens list<int32>; no BOS/EOS),
OUTPUT/manifest.json (counts per shard and source, skipped by reason),
OUTPUT/skipped.jsonl (every document not tokenized, with the reason) and OUTPUT/_SUCCESS.
Same inputs + tokenizer -> byte-identical shards.
"""


@click.command("tokenize", epilog=EPILOG)
@click.option("--input", "inputs", multiple=True, required=True,
              help="Parquet / JSONL document shards, directories or globs.")
@click.option("--tokenizer", "tokenizer_dir", required=True, type=click.Path(exists=True),
              help="Directory from `afm tokenizer train`.")
@click.option("--output", required=True, type=click.Path(file_okay=False))
@click.option("--shard-docs", default=20_000, show_default=True, type=click.IntRange(min=1),
              help="Target documents per output shard.")
@click.option("--num-workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="Local runner worker processes.")
@click.option("--runner", default="DirectRunner", show_default=True)
@click.option("--overwrite", is_flag=True,
              help="Replace what OUTPUT holds (kept until the new run has succeeded).")
def tokenize_command(inputs: tuple[str, ...], tokenizer_dir: str, output: str, shard_docs: int,
                     num_workers: int, runner: str, overwrite: bool) -> None:
    """Tokenize documents into deterministic Parquet token shards."""
    import time

    from afm.pipelines.tokenize import run_tokenize
    from afm.pipelines.usage import user_errors

    from afm.console import console, print_summary

    start = time.perf_counter()
    console.print(f"tokenize: inputs {list(inputs)} -> {output} (tokenizer {tokenizer_dir})")
    with user_errors(), console.status("tokenizing (Beam)...", spinner="dots"):
        stats = run_tokenize(list(inputs), tokenizer_dir, output, shard_docs=shard_docs,
                             runner=runner, num_workers=num_workers, overwrite=overwrite)
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


COMMANDS = [tokenize_command]
