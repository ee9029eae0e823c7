"""``afm decontam``: build the benchmark n-gram index, and decontaminate files with it.

``run`` is for data outside the curate pipeline (SFT sets, evaluation prompts, a corpus
written earlier): it reads the inputs twice (pass 1 scans and counts, pass 2 decides and
writes), so memory holds only the benchmark hits, not the documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


@click.group(
    "decontam",
    epilog="""\b
Examples:
  afm decontam build-index --benchmarks ../shared/eval/benchmarks --out work/decontam-index
  afm decontam build-index --benchmarks benchmarks.yaml --out idx --n gsm8k=8
  afm decontam run --index work/decontam-index --input corpus/kept --output work/clean
  afm decontam run --index idx --input sft.jsonl --text-field prompt --text-field response \\
      --output work/sft-clean --threshold 1000
""",
)
def decontam_group() -> None:
    """Benchmark decontamination: drop documents sharing a 4-13-gram with a benchmark,
    unless that n-gram is common usage (in >= threshold documents of the corpus)."""


@decontam_group.command(
    "build-index",
    epilog="""\b
Examples:
  afm decontam build-index --benchmarks ../shared/eval/benchmarks --out work/decontam-index
  afm decontam build-index --benchmarks filters/data/benchmarks --out work/demo-index
  afm decontam build-index --benchmarks my-benchmarks.yaml --out idx --n mmlu=10
""",
)
@click.option(
    "--benchmarks",
    "source",
    required=True,
    help="A directory of benchmark files (or with a benchmarks.yaml), a YAML config, or "
    "one file; 'demo' = the project's own demo-math set.",
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Index directory.")
@click.option("--n", "n_overrides", multiple=True, metavar="NAME=N",
              help="Override a benchmark's n (4..13). Repeatable.")
@click.option("--allow-hf", is_flag=True,
              help="Allow benchmarks given by hf_dataset (needs `datasets` and network).")
def build_index_command(source: str, out: Path, n_overrides: tuple[str, ...], allow_hf: bool) -> None:
    """Index every n-gram of the benchmarks (64-bit hashes, memory-mapped arrays)."""
    from afm.filters.benchmarks import DATA_DIR, build_index, specs_from

    from afm.config import print_config
    from afm.console import console, print_summary, print_table

    specs = specs_from(DATA_DIR if source == "demo" else source)
    overrides: dict[str, int] = {}
    for item in n_overrides:
        name, _, value = item.partition("=")
        if not value.strip().isdigit():
            raise click.BadParameter(f"{item!r}: expected NAME=N", param_hint="--n")
        overrides[name.strip()] = int(value)
    unknown = set(overrides) - {s.name for s in specs}
    if unknown:
        raise click.BadParameter(
            f"unknown benchmark(s) {sorted(unknown)}; known: {[s.name for s in specs]}",
            param_hint="--n",
        )
    for spec in specs:
        if spec.name in overrides:
            spec.n = overrides[spec.name]
    print_config({"benchmarks": [s.__dict__ for s in specs], "out": str(out)}, "decontam build-index")
    try:
        stats = build_index(specs, out, allow_hf=allow_hf, progress=True)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    print_table(
        "benchmarks",
        ["benchmark", "adapter", "n", "examples", "indexed", "n-grams"],
        [[b["name"], b["adapter"], b["n"], b["examples"], b["examples_indexed"], b["ngrams"]]
         for b in stats["per_benchmark"]],
    )
    unindexed = [b["name"] for b in stats["per_benchmark"] if b["examples_indexed"] < b["examples"]]
    if unindexed:
        console.print(f"[yellow]examples under 4 tokens (not indexed) in: {', '.join(unindexed)}")
    textless = [f"{b['name']} ({b['rows_without_text']})" for b in stats["per_benchmark"]
                if b.get("rows_without_text")]
    if textless:
        console.print(f"[yellow]rows where the field mapping found no text: {', '.join(textless)}")
    print_summary(
        "decontam build-index",
        {
            "index": str(out),
            "benchmarks": stats["benchmarks"],
            "n-grams": stats["ngrams"],
            "n values": ", ".join(f"{k}: {v:,}" for k, v in sorted(stats["sizes"].items())),
            "index size (MB)": stats["index_bytes"] / 1e6,
            "memory per million n-grams (MB)": stats["mb_per_million_ngrams"],
        },
    )


def _as_document(rec: Any, text_fields: tuple[str, ...]) -> Any:
    """A record as a document: ``text`` from ``text_fields`` when given (SFT / prompt
    files), required schema keys filled in. Records that cannot be read are returned
    as they are and rejected as invalid by the scan."""
    from afm.schema import DOCUMENT_FIELDS, SOURCES, document_id

    if not isinstance(rec, dict):
        return rec
    doc = {k: rec.get(k) for k in DOCUMENT_FIELDS}
    if text_fields:
        parts = [rec.get(f) for f in text_fields]
        texts = [p for p in parts if isinstance(p, str)]
        doc["text"] = "\n\n".join(texts) if texts else None
    if not isinstance(doc["text"], str):
        return doc
    if doc.get("source") not in SOURCES:
        doc["source"] = "public"
    if not doc.get("id"):
        doc["id"] = document_id(doc.get("url"), doc["text"])
    return doc


@decontam_group.command(
    "run",
    epilog="""\b
Examples:
  afm decontam run --index work/decontam-index --input corpus/kept --output work/clean
  afm decontam run --index idx --input a.parquet --input b.jsonl.gz --output out --threshold 500
  afm decontam run --index idx --input sft.jsonl --text-field prompt --text-field response \\
      --output work/sft-clean
\b
Writes OUTPUT/kept/part-NNNNN.parquet, OUTPUT/rejects/part-NNNNN.parquet (one per input
file) and OUTPUT/report.json (per benchmark: documents removed, top colliding n-grams,
n-grams excused as common usage).
""",
)
@click.option("--index", "index_path", required=True, help="Index built by build-index.")
@click.option("--input", "inputs", multiple=True, required=True,
              help="Parquet / JSONL(.gz) files, directories or globs. Repeatable.")
@click.option("--output", type=click.Path(path_type=Path), required=True, help="Output directory.")
@click.option("--threshold", type=click.IntRange(min=1), default=1000, show_default=True,
              help="An n-gram held by at least this many documents is common usage.")
@click.option("--text-field", "text_fields", multiple=True,
              help="Build the text from these record fields (default: the `text` field).")
@click.option("--batch-docs", type=click.IntRange(min=1), default=256, show_default=True)
def run_command(index_path: str, inputs: tuple[str, ...], output: Path, threshold: int,
                text_fields: tuple[str, ...], batch_docs: int) -> None:
    """Drop documents that contain benchmark n-grams; write kept, rejects and a report."""
    import json
    from collections import Counter

    from afm.filters.ngram_index import Hit, NgramIndex
    from afm.pipelines.decontaminate import (
        DecontamConfig,
        NgramStat,
        build_report,
        decide,
        invalid_reject,
        iter_batches,
        reject_benchmarks,
        resolve_index,
        scan_batch,
    )

    from afm.config import print_config
    from afm.console import console, print_summary, print_table, track
    from afm.io import expand_inputs, read_records, write_parquet
    from afm.schema import REJECT_SCHEMA

    cfg = DecontamConfig(index=index_path, benchmarks="", threshold=threshold, batch_docs=batch_docs)
    print_config(cfg, "decontam run")
    try:
        index = NgramIndex(resolve_index(cfg))
        files = expand_inputs(inputs)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if not files:
        raise click.ClickException(f"no input files in {list(inputs)}")
    console.print(
        f"index: {len(index.benchmarks)} benchmarks, {index.num_ngrams:,} n-grams, "
        f"n in {index.sizes}, {index.nbytes / 1e6:.1f} MB (memory-mapped)"
    )

    def documents(path: str) -> Any:
        try:
            for rec in read_records(path):
                yield _as_document(rec, text_fields)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc

    # Pass 1: benchmark hits of every document, documents per n-gram over all inputs.
    hits_of: dict[tuple[int, int], list[Hit]] = {}
    counts: Counter[int] = Counter()
    first: dict[int, Hit] = {}
    n_docs = 0
    for f_no, path in enumerate(track(files, "pass 1: scanning", unit="files")):
        row = 0
        for batch in iter_batches(documents(path), cfg):
            for doc_hits in scan_batch(index, batch):
                if doc_hits:
                    hits_of[(f_no, row)] = doc_hits
                    for h in doc_hits:
                        counts[h.key] += 1
                        first.setdefault(h.key, h)
                row += 1
        n_docs += row

    # Pass 2: decide with the corpus-wide counts and write one shard pair per input.
    n_kept = n_rejected = n_invalid = 0
    removed: Counter[str] = Counter()
    for f_no, path in enumerate(track(files, "pass 2: writing", unit="files")):
        kept: list[dict[str, Any]] = []
        rejects: list[dict[str, Any]] = []
        for row, doc in enumerate(documents(path)):
            if not (isinstance(doc, dict) and isinstance(doc.get("text"), str)):
                rejects.append(invalid_reject(doc))
                n_invalid += 1
                continue
            reject = decide(doc, hits_of.get((f_no, row), []), counts, threshold)
            if reject is None:
                kept.append(doc)
            else:
                rejects.append(reject)
                removed.update(reject_benchmarks(reject))
        write_parquet(kept, output / "kept" / f"part-{f_no:05d}.parquet")
        write_parquet(rejects, output / "rejects" / f"part-{f_no:05d}.parquet", REJECT_SCHEMA)
        n_kept += len(kept)
        n_rejected += len(rejects)

    stats = [NgramStat.from_hit(h, counts[k]) for k, h in first.items()]
    report = build_report(stats, dict(removed), threshold, n_docs, n_rejected, n_invalid)
    report["index"] = str(index.path)
    report["inputs"] = files
    (output / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    rows = []
    for name, b in report["benchmarks"].items():
        top = b["top_colliding"][0]["ngram"] if b["top_colliding"] else ""
        rows.append([name, b["documents_removed"], b["colliding_ngrams"], b["excused_ngrams"], top[:40]])
    if rows:
        print_table("per benchmark", ["benchmark", "docs removed", "colliding n-grams",
                                      "excused (common)", "most frequent colliding n-gram"], rows)
    print_summary(
        "decontam run",
        {
            "documents in": n_docs,
            "kept": n_kept,
            "rejected": n_rejected,
            "  of which invalid records": n_invalid,
            "in == kept + rejected": "yes" if n_docs == n_kept + n_rejected else "NO",
            "output": str(output),
            "report": str(output / "report.json"),
        },
    )


COMMANDS = [decontam_group]
