"""``afm bench curate_memory``: does the default runner's memory grow with the corpus?

JSONL documents of real text (about 4.5 kB each: paragraphs of the 181 real articles of
``../shared/eval/extraction``, recombined and seeded so that few are duplicates) are
curated by ``afm curate`` as a user runs it (the default local runner and worker count;
every stage but decontamination, which needs an index), 20,000 and then 100,000 of them
(``--quick``: 2,000 and 10,000), each run in a child process. The figure is the peak
resident memory of all the run's processes together (the manifest's
``costs.peak_memory_mb.all_processes``, sampled), and the ratio big / small. Goal of issue
44: at most 1.25x (when it was filed, Beam's local runner held the corpus: 2.9x; with
texts and signals crossing the shuffles on disk, 1.53x; with the runner's buffers on disk
and freed memory returned, 1.15x: docs/curation.md).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from afm.app.bench.common import BenchOptions, Comparison

DOC_CHARS = 4500


def write_documents(shared: Path, path: Path, n: int, seed: int = 0) -> Path:
    from afm.app.bench.pipelines.webcorpus import load_templates

    if path.exists():
        return path
    _, pool = load_templates(shared / "eval" / "extraction")
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as fh:
        for i in range(n):
            parts, size = [], 0
            while size < DOC_CHARS:
                parts.append(rng.choice(pool))
                size += len(parts[-1])
            fh.write(json.dumps({"id": f"d{i}", "text": "\n\n".join(parts)}) + "\n")
    tmp.replace(path)
    return path


def peak_memory(documents: Path, out: Path) -> tuple[float, dict]:
    """All processes' peak MB of one curate run as ``afm curate`` runs it by default, in a
    child process of its own (:func:`main`)."""
    proc = subprocess.run([sys.executable, "-m", "afm.app.bench.pipelines.memory", str(documents), str(out)],
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"curate failed on {documents}:\n{proc.stderr[-3000:]}")
    manifest = json.loads((out / "manifest.json").read_text())
    return manifest["costs"]["peak_memory_mb"].get("all_processes", 0.0), manifest["costs"]


def main(argv: list[str]) -> int:
    """The child: ``afm curate --input DOCS --output OUT --overwrite`` without decontamination,
    the default runner and workers. A third argument sets ``output.spill_texts`` (``never``:
    the figures without spill files, for comparison)."""
    from afm.pipelines.curate.pipeline import run_curate

    config: dict = {"decontaminate": {"enabled": False}}
    if len(argv) > 2:
        config["output"] = {"spill_texts": argv[2]}
    run_curate([argv[0]], argv[1], config=config, overwrite=True, quiet=True)
    return 0


def bench_memory(opts: BenchOptions) -> list[Comparison]:
    from afm.console import console

    if opts.shared_dir is None:
        raise RuntimeError("needs ../shared/eval/extraction (real text) for its documents")
    work = Path(opts.workdir) / "curate_memory"
    sizes = (2_000, 10_000) if opts.quick else (20_000, 100_000)
    peaks = []
    for n in sizes:
        docs = write_documents(opts.shared_dir, work / f"docs-{n}.jsonl", n)
        peak, costs = peak_memory(docs, work / f"out-{n}")
        console.print(f"{n:,} documents: peak {peak:,.0f} MB (all processes), {costs['peak_memory_mb']}, "
                      f"{costs['elapsed_s']:.0f} s")
        peaks.append(peak)
    return [Comparison(f"peak MB, {sizes[1]:,} documents", peaks[1], peaks[0], f"{sizes[0]:,} documents",
                       "MB", "<= 1.25x")]


BENCHMARKS = {"curate_memory": bench_memory}

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
