"""``afm bench``: run the project's benchmarks; each prints ours vs a same-run baseline."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from afm.app.bench.common import BenchFn, BenchOptions, Comparison
from afm.shared_data import find_shared_dir


def discover() -> dict[str, BenchFn]:
    """Every ``BENCHMARKS`` dict of the modules in the app's ``bench/<area>/`` folders."""
    return _collect("BENCHMARKS")


def _collect(attribute: str) -> dict:
    from afm.app.discovery import app_modules

    found: dict = {}
    for name in app_modules("bench"):
        found.update(getattr(importlib.import_module(name), attribute, {}))
    return found


def run_order(names: tuple[str, ...] | list[str], after: dict[str, tuple[str, ...]]) -> list[str]:
    """``names`` in their order, except that a benchmark reading another's result
    (``BENCHMARK_INPUTS``: ``capacity`` reads ``curate``'s ``result.json``) runs after it
    when both are asked for; otherwise a full ``afm bench`` on a fresh workdir would run
    ``capacity`` before the result it needs exists."""
    ordered: list[str] = []

    def place(name: str, seen: tuple[str, ...] = ()) -> None:
        if name in ordered or name in seen:
            return
        for first in after.get(name, ()):
            if first in names:
                place(first, (*seen, name))
        ordered.append(name)

    for name in names:
        place(name)
    return ordered


def print_comparisons(title: str, rows: list[Comparison]) -> None:
    from afm.console import console, print_table

    table_rows = []
    for r in rows:
        base = "" if r.baseline is None else f"{r.baseline:,.4g}"
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}x"
        table_rows.append([r.metric, f"{r.ours:,.4g}", base, r.baseline_name, ratio, r.unit, r.goal])
    print_table(title, ["metric", "afm", "baseline", "baseline is", "ratio", "unit", "goal"], table_rows)
    console.print()


@click.command("bench", epilog="""\b
Examples:
  afm bench --list
  afm bench                      # every benchmark (needs ../shared for the real data)
  afm bench extraction dedup --quick
  afm bench train --config 1b --seq-len 4096   # on a GPU host: tokens/s, MFU, memory
  afm bench train --config afm-on-device --task sft,rm,dpo,mdloo   # memory plans, any backend
  afm bench dpo_packing           # DPO pairs/s, packed rows vs one pair per row
  afm bench eval --config 100m                  # the eval engine where compute matters
  afm bench train --suite gpu                   # issue #32's GPU runs -> bench-train-gpu.json
  afm bench extraction curate --gold ../gold    # every gold set's real pages (wcxb/, trafilatura/, utomo/)
  afm bench extraction --gold ../gold --block-model new.json   # a candidate model beside the shipped one
  afm bench curate --suite real-pages --gold ../gold --repeat 3  # three rounds: median and range
""")
@click.argument("names", nargs=-1)
@click.option("--list", "list_only", is_flag=True, help="List the benchmarks and exit.")
@click.option("--quick", is_flag=True, help="Smaller inputs: a smoke run, not a measurement.")
@click.option("--workdir", type=click.Path(path_type=Path), default=Path("work/bench"), show_default=True)
@click.option("--config", "model_config", default=None,
              help="Model config for benchmarks of one model size (train: default per backend; "
                   "eval: tiny or 100m, default tiny).")
@click.option("--seq-len", type=click.IntRange(min=1), default=None, help="Sequence length for those benchmarks.")
@click.option("--task", "tasks", default="",
              help="train: comma-separated training tasks (sft, rm, dpo, ipo, mdloo) whose per-device memory "
                   "plan to print from abstract shapes (no step runs), instead of timing pre-training.")
@click.option("--suite", type=click.Choice(["gpu", "real-pages"]), default=None,
              help="A benchmark's named set of runs: train --suite gpu (1B bf16, 1B FP8, afm-on-device with "
                   "--batch auto; one JSON in the workdir); curate --suite real-pages (only the runs on the "
                   "gold sets' real pages).")
@click.option("--gold", "gold_dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              envvar="AFM_EXTRACTION_GOLD", default=None,
              help="extraction, curate: a folder holding the other extraction gold sets (wcxb/: a WCXB "
                   "checkout, trafilatura/: trafilatura's tests/ folder, utomo/: Utomo & Leu's Extraction/ "
                   "folder, googletrends/: Google-Trends-2017's folder, fundus/: a Fundus checkout; each optional) beside ../shared's "
                   "ScrapingHub pages [env AFM_EXTRACTION_GOLD].")
@click.option("--block-model", "block_models", multiple=True,
              type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="extraction, curate: a block model file (afm extraction blocks train) to measure beside "
                   "the shipped one on the same pages (extraction: time and F1; curate: whole curate with "
                   "method=blocks); repeat for several.")
@click.option("--repeat", type=click.IntRange(1, 10), default=1, show_default=True,
              help="curate --suite real-pages: run every measurement this many rounds in turn and report "
                   "the median round with the range (one round's ratio drifts ~20% on a busy box).")
def bench_command(
    names: tuple[str, ...], list_only: bool, quick: bool, workdir: Path,
    model_config: str | None, seq_len: int | None, tasks: str, suite: str | None,
    gold_dir: Path | None, block_models: tuple[Path, ...], repeat: int,
) -> None:
    """Run benchmarks; every figure is printed next to a baseline measured in the same run."""
    from afm.console import console

    benches = discover()
    if list_only:
        for name in benches:
            click.echo(name)
        return
    unknown = [n for n in names if n not in benches]
    if unknown:
        raise click.UsageError(f"unknown benchmark(s) {unknown}; known: {sorted(benches)}")
    if len({p.name for p in block_models}) < len(block_models):
        raise click.UsageError("--block-model files need distinct file names (they name the rows)")
    opts = BenchOptions(quick=quick, shared_dir=find_shared_dir(), workdir=workdir,
                        model_config=model_config, seq_len=seq_len, suite=suite, gold_dir=gold_dir,
                        block_models=block_models, repeat=repeat,
                        tasks=tuple(t.strip() for t in tasks.split(",") if t.strip()))
    workdir.mkdir(parents=True, exist_ok=True)
    failures = []
    for name in run_order(names or tuple(benches), _collect("BENCHMARK_INPUTS")):
        console.rule(f"[bold]bench: {name}")
        try:
            rows = benches[name](opts)
        except Exception as exc:  # noqa: BLE001 - one failing bench must not hide the rest
            console.print(f"[red]bench {name} failed: {type(exc).__name__}: {exc}")
            failures.append(name)
            continue
        print_comparisons(name, rows)
    if failures:
        raise SystemExit(f"benchmarks failed: {failures}")


