"""``afm decontam``: build the benchmark n-gram index, and decontaminate files with it.

``run`` is for data outside the curate pipeline (SFT sets, evaluation prompts, a corpus
written earlier). It is the curate engine with one stage: the shared reader (every
record kept or rejected with a reason), the duplicate-id policy, the two-pass
decontamination transform, and the shared writer and output policy.
"""

from __future__ import annotations

from pathlib import Path

import click

from afm.app.commands.pipelines.beam_options import BEAM_HELP, BeamCommand, runner_options
from afm.app.commands.pipelines.output_options import output_policy_options


@click.group(
    "decontam",
    epilog="""\b
Examples:
  afm decontam build-index --suite report --benchmarks ../shared/eval/benchmarks --out work/decontam-index
  afm decontam build-index --benchmarks ../shared/eval/benchmarks --out work/all-index
  afm decontam build-index --benchmarks benchmarks.yaml --out idx --n gsm8k=8
  afm decontam run --index work/decontam-index --input corpus/ --output work/clean
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
  afm decontam build-index --suite report --benchmarks ../shared/eval/benchmarks --out work/decontam-index
  afm decontam build-index --benchmarks ../shared/eval/benchmarks --out work/all-index
  afm decontam build-index --benchmarks demo --out work/demo-index
  afm decontam build-index --benchmarks my-benchmarks.yaml --out idx --n mmlu=10
\b
Suites: report = what the AFM report evaluates on (MMLU, GSM8K, ARC-Challenge, HellaSwag,
WinoGrande, OpenBookQA, MATH, MATH-500, IFEval, HumanEval); all = every benchmark found.
""",
)
@click.option(
    "--benchmarks",
    "source",
    required=True,
    help="A directory of benchmark files (or with a benchmarks.yaml), a YAML config, or "
    "one file; 'demo' = the project's own demo-math set.",
)
@click.option("--suite", default="all", show_default=True,
              help="Index only this named set of the benchmarks found (report, all).")
@click.option("--out", required=True,
              help="Index directory: local, or gs:// / s3:// (built here, then uploaded), "
                   "where the workers of a cluster run read it.")
@click.option("--n", "n_overrides", multiple=True, metavar="NAME=N",
              help="Override a benchmark's n (4..13). Repeatable.")
@click.option("--allow-hf", is_flag=True,
              help="Allow benchmarks given by hf_dataset (needs `datasets` and network).")
@click.option("--overwrite", is_flag=True, help="Replace an existing index at --out.")
def build_index_command(source: str, suite: str, out: str, n_overrides: tuple[str, ...],
                        allow_hf: bool, overwrite: bool) -> None:
    """Index every n-gram of the benchmarks (64-bit hashes, memory-mapped arrays)."""
    from afm import fs
    from afm.app.commands.pipelines.usage import user_errors
    from afm.config import print_config
    from afm.console import console, print_summary, print_table
    from afm.filters.benchmarks import DATA_DIR, build_index, select_suite, specs_from
    from afm.preflight import check_file

    with user_errors():
        specs = specs_from(DATA_DIR if source == "demo" else source)
        specs, missing = select_suite(specs, suite)
        if fs.list_dir(out) and not overwrite:
            raise click.ClickException(f"{out} is not empty; pass --overwrite to replace the "
                                       "index there, or choose another --out")
        for spec in specs:  # an empty or binary copy: one line now, not after the others were read
            if spec.path:
                check_file(spec.path, f"benchmark {spec.name!r}")
    if missing:
        console.print(f"[yellow]suite {suite!r}: not found in {source}, so not indexed: "
                      f"{', '.join(missing)}")
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
        if fs.is_remote(out):
            stats = _build_and_upload(specs, out, allow_hf)
        else:
            stats = build_index(specs, Path(out), allow_hf=allow_hf, progress=True)
    except (ValueError, FileNotFoundError, RuntimeError, OSError) as exc:
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
            "suite": suite,
            "benchmarks": stats["benchmarks"],
            "suite members not found": ", ".join(missing) or "none",
            "n-grams": stats["ngrams"],
            "n values": ", ".join(f"{k}: {v:,}" for k, v in sorted(stats["sizes"].items())),
            "index size (MB)": stats["index_bytes"] / 1e6,
            "memory per million n-grams (MB)": stats["mb_per_million_ngrams"],
        },
    )


def _build_and_upload(specs: list, out: str, allow_hf: bool) -> dict:
    """Build the index in a local temporary directory, then copy it file by file to
    ``out`` (an object store), ``index.json`` last so a reader never sees half an index."""
    import tempfile

    from afm import fs
    from afm.filters.benchmarks import build_index

    with tempfile.TemporaryDirectory(prefix="afm-index-") as tmp:
        stats = build_index(specs, Path(tmp) / "index", allow_hf=allow_hf, progress=True)
        local = Path(tmp) / "index"
        fs.delete([out])
        files = sorted(p for p in local.rglob("*") if p.is_file())
        for path in sorted(files, key=lambda p: p.name == "index.json"):
            fs.write_bytes(fs.join(out, str(path.relative_to(local))), path.read_bytes())
    return stats


@decontam_group.command(
    "run",
    cls=BeamCommand,
    epilog="""\b
Examples:
  afm decontam run --index work/decontam-index --input corpus/ --output work/clean
  afm decontam run --index idx --input a.parquet --input b.jsonl.gz --output out --threshold 500
  afm decontam run --index idx --input sft.jsonl --text-field prompt --text-field response \\
      --output work/sft-clean
\b
Writes OUTPUT/documents-NNNNN.parquet, OUTPUT/rejects-NNNNN.parquet, OUTPUT/manifest.json
(its stage_reports.decontaminate: per benchmark the documents removed, the top colliding
n-grams and the n-grams excused as common usage), OUTPUT/report.html and OUTPUT/_SUCCESS.
The same Beam transform as curate's decontaminate stage, on any runner; the index may be
local or on gs:// / s3:// (every worker reads it).

""" + BEAM_HELP,
)
@click.option("--index", "index_path", required=True,
              help="Index built by build-index (a directory, local or gs:// / s3://).")
@click.option("--input", "inputs", multiple=True, required=True,
              help="Parquet / JSONL(.gz) files, directories or globs. Repeatable.")
@click.option("--output", required=True, help="Output directory.")
@click.option("--threshold", type=click.IntRange(min=2), default=1000, show_default=True,
              help="An n-gram held by at least this many documents is common usage (>= 2).")
@click.option("--text-field", "text_fields", multiple=True,
              help="Build the text from these record fields (default: the `text` field).")
@click.option("--batch-docs", type=click.IntRange(min=1), default=256, show_default=True)
@output_policy_options
@runner_options
@click.pass_context
def run_command(ctx: click.Context, index_path: str, inputs: tuple[str, ...], output: str,
                threshold: int, text_fields: tuple[str, ...], batch_docs: int, overwrite: bool,
                allow_empty: bool, runner: str, dry_run: bool) -> None:
    """Drop documents that contain benchmark n-grams; write kept, rejects and a report."""
    from afm import fs
    from afm.app.commands.pipelines.beam_options import finish_dry_run
    from afm.app.commands.pipelines.usage import user_errors
    from afm.console import console, print_summary, print_table, setup_logging
    from afm.preflight import check_inputs

    setup_logging("WARNING")
    params = {"index": index_path, "threshold": threshold, "batch_docs": batch_docs}
    with user_errors():
        if not dry_run:  # before Beam is even imported: a bad input is one line in seconds
            check_inputs(inputs, allow_rejects=True)
        from afm.filters.ngram_index import NgramIndex
        from afm.pipelines.curate.pipeline import run_curate
        from afm.pipelines.decontaminate import DecontamConfig, resolve_index

        index = NgramIndex(fs.localize(resolve_index(DecontamConfig(**params))))
        console.print(
            f"index: {len(index.benchmarks)} benchmarks, {index.num_ngrams:,} n-grams, "
            f"n in {index.sizes}, {index.nbytes / 1e6:.1f} MB (memory-mapped)")
        manifest = run_curate(
            list(inputs), str(output), command="decontam run", overwrite=overwrite,
            config={"stages": ["decontaminate"], "decontaminate": {"params": params}},
            text_fields=text_fields, runner=runner, pipeline_args=list(ctx.args),
            dry_run=dry_run, local_workers=1, allow_empty=allow_empty)
    if dry_run:
        finish_dry_run(manifest, runner)
        return
    report = manifest["stage_reports"].get("decontaminate", {})
    rows = []
    for name, b in report.get("benchmarks", {}).items():
        top = b["top_colliding"][0]["ngram"] if b["top_colliding"] else ""
        rows.append([name, b["documents_removed"], b["colliding_ngrams"], b["excused_ngrams"],
                     top[:40]])
    if rows:
        print_table("per benchmark", ["benchmark", "docs removed", "colliding n-grams",
                                      "excused (common)", "most frequent colliding n-gram"], rows)
    totals = manifest["totals"]
    print_summary("decontam run", {
        "documents in": totals["in"],
        "kept": totals["kept"],
        "rejected": totals["rejected"],
        "in == kept + rejected": "yes" if manifest["accounting"]["ok"] else "NO",
        "output": str(output),
    })


COMMANDS = [decontam_group]
