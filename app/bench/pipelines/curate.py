"""``afm bench curate``: the curate pipeline vs an equivalent datatrove pipeline.

Both get the same WARC files, built from the 181 real article pages of
``../shared/eval/extraction`` plus exact copies of a quarter of them under other URLs
(in other files, so only a global dedup finds them), and run the same work:
trafilatura extraction -> Gopher repetition + Gopher quality + C4 + FineWeb heuristics ->
MinHash LSH dedup -> write. afm runs on Beam's local runner (multi-process), datatrove on
its ``LocalPipelineExecutor``, each with 1 and then 2 worker processes. Printed:
docs/s/core (documents in / wall seconds / workers) for both, their ratio, and the
1 -> 2 worker scaling of each. datatrove is a bench-only dependency
(``pip install datatrove==0.10.1``); without it the datatrove rows are reported missing.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison

DATATROVE_VERSION = "0.10.1"


def write_html_warcs(records: list[tuple[str, bytes]], files: list[Path],
                     file_of: Callable[[int], int] | None = None) -> None:
    """HTTP 200 HTML ``response`` records (url, body) into gzip WARC ``files``; record ``i``
    goes to ``files[file_of(i)]`` (default: round robin)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    pick = file_of or (lambda i: i % len(files))
    handles = [open(f, "wb") for f in files]
    try:
        writers = [WARCWriter(h, gzip=True) for h in handles]
        for i, (url, body) in enumerate(records):
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")],
                                       protocol="HTTP/1.1")
            w = writers[pick(i)]
            # The payload type Common Crawl records carry: without it datatrove's reader
            # sniffs the bytes with libmagic and silently skips many real HTML pages.
            w.write_record(w.create_warc_record(
                url, "response", payload=io.BytesIO(body), http_headers=headers,
                warc_headers_dict={"WARC-Identified-Payload-Type": "text/html"}))
    finally:
        for h in handles:
            h.close()


def build_corpus(shared: Path, workdir: Path, quick: bool) -> tuple[list[Path], int]:
    """WARC files of real pages + cross-file duplicates; returns (files, documents)."""
    src = shared / "eval" / "extraction"
    truth = json.loads((src / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for path in sorted((src / "html").glob("*.html.gz")):
        key = path.name.split(".")[0]
        url = truth.get(key, {}).get("url") or f"http://bench.test/{key}"
        pages.append((url, gzip.decompress(path.read_bytes())))
    if quick:
        pages = pages[:40]
    dups = [(f"http://mirror.bench.test/copy/{i}", body) for i, (_, body) in enumerate(pages[::4])]
    n_files = 2 if quick else 4
    out_dir = workdir / "warc"
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    files = [out_dir / f"part-{i:02d}.warc.gz" for i in range(n_files)]
    records = pages + dups
    # copies land in other files than their originals
    write_html_warcs(records, files, file_of=lambda i: (i * 7 + 3) % n_files)
    return files, len(records)


AFM_CONFIG: dict[str, Any] = {
    # The stages datatrove's reference pipeline has: extraction, heuristics, MinHash dedup.
    "language": {"enabled": False},
    "safety": {"enabled": False},
    "pii": {"enabled": False},
    "quality_model": {"enabled": False},
    "decontaminate": {"enabled": False},
    "output": {"write_rejects": True},
}


def run_afm(files: list[Path], out: Path, workers: int) -> tuple[int, int, float]:
    from afm.pipelines.curate.pipeline import run_curate

    if out.exists():
        shutil.rmtree(out)
    start = time.perf_counter()
    manifest = run_curate([str(f) for f in files], out, config=AFM_CONFIG,
                          pipeline_args=["--direct_running_mode=multi_processing",
                                         f"--direct_num_workers={workers}"])
    seconds = time.perf_counter() - start
    return manifest["totals"]["in"], manifest["totals"]["kept"], seconds


def run_datatrove(files: list[Path], out: Path, workers: int) -> tuple[int, int, float]:
    """FineWeb-style datatrove pipeline: read + extract + filters + MinHash (4 stages)."""
    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.readers import JsonlReader, WarcReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter
    from datatrove.utils.hashing import HashConfig

    if out.exists():
        shutil.rmtree(out)
    tasks = len(files)
    # datatrove 0.10.1 passes str to xxhash, which xxhash 4.1 (pinned here) refuses; its
    # other shingle hash, sha1, works (shingle hashing is a small share of the time).
    cfg = MinhashConfig(hash_config=HashConfig(hash_fc="sha1"))
    common = {"workers": workers, "skip_completed": False}
    start = time.perf_counter()
    LocalPipelineExecutor(pipeline=[
        WarcReader(str(files[0].parent), glob_pattern="*.warc.gz"),
        Trafilatura(favour_precision=True),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        C4QualityFilter(filter_no_terminal_punct=False),
        FineWebQualityFilter(),
        JsonlWriter(str(out / "filtered")),
        MinhashDedupSignature(output_folder=str(out / "sigs"), config=cfg),
    ], tasks=tasks, logging_dir=str(out / "logs" / "1"), **common).run()
    LocalPipelineExecutor(pipeline=[
        MinhashDedupBuckets(input_folder=str(out / "sigs"), output_folder=str(out / "buckets"),
                            config=cfg),
    ], tasks=cfg.num_buckets, logging_dir=str(out / "logs" / "2"), **common).run()
    LocalPipelineExecutor(pipeline=[
        MinhashDedupCluster(input_folder=str(out / "buckets"), output_folder=str(out / "remove"),
                            config=cfg),
    ], tasks=1, logging_dir=str(out / "logs" / "3"), **common).run()
    LocalPipelineExecutor(pipeline=[
        JsonlReader(str(out / "filtered")),
        MinhashDedupFilter(input_folder=str(out / "remove")),
        JsonlWriter(str(out / "final")),
    ], tasks=tasks, logging_dir=str(out / "logs" / "4"), **common).run()
    seconds = time.perf_counter() - start
    kept = 0
    for f in (out / "final").glob("*.jsonl.gz"):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            kept += sum(1 for line in fh if line.strip())
    return _datatrove_pages_read(out / "logs" / "1" / "stats.json"), kept, seconds


def _datatrove_pages_read(stats_file: Path) -> int:
    """Documents datatrove's reader passed on (its extractor's input), from its stats."""
    try:
        steps = json.loads(stats_file.read_text())
    except (OSError, ValueError):
        return -1
    for step in steps:
        if "EXTRAC" in str(step.get("name", "")):
            return int(step.get("stats", {}).get("total", -1))
    return -1


def bench_curate(opts: BenchOptions) -> list[Comparison]:
    from afm.console import console

    if opts.shared_dir is None:
        raise RuntimeError("needs ../shared/eval/extraction (the real pages) for its input")
    work = Path(opts.workdir) / "curate"
    files, n_docs = build_corpus(opts.shared_dir, work, opts.quick)
    try:
        import datatrove  # noqa: F401
        have_dt = True
    except ImportError:
        have_dt = False
        console.print(f"[yellow]datatrove not installed (pip install datatrove=="
                      f"{DATATROVE_VERSION}): its rows are missing")
    rows: list[Comparison] = []
    rates: dict[tuple[str, int], float] = {}
    kept_counts: dict[str, int] = {}
    for workers in (1, 2):
        n_in, kept, secs = run_afm(files, work / f"afm-{workers}", workers)
        assert n_in == n_docs, (n_in, n_docs)
        rates[("afm", workers)] = n_docs / secs / workers
        kept_counts["afm"] = kept
        console.print(f"afm, {workers} worker(s): {n_docs} docs, {kept} kept, {secs:.1f} s")
        if have_dt:
            dt_in, dt_kept, dt_secs = run_datatrove(files, work / f"datatrove-{workers}",
                                                    workers)
            if dt_in != n_docs:
                console.print(f"[yellow]datatrove's reader passed on {dt_in} of {n_docs} pages")
            rates[("datatrove", workers)] = n_docs / dt_secs / workers
            kept_counts["datatrove"] = dt_kept
            console.print(f"datatrove, {workers} worker(s): {n_docs} docs, {dt_kept} kept, "
                          f"{dt_secs:.1f} s")
    for workers in (1, 2):
        rows.append(Comparison(
            f"docs/s/core, {workers} worker(s)", rates[("afm", workers)],
            rates.get(("datatrove", workers)), f"datatrove {DATATROVE_VERSION}", "docs/s/core",
            ">= 1.0x datatrove"))
    rows.append(Comparison(f"kept of {n_docs} docs", kept_counts["afm"],
                           kept_counts.get("datatrove"), f"datatrove {DATATROVE_VERSION}", "docs",
                           "same order (rule sets differ in detail)"))
    for name in ("afm",) + (("datatrove",) if have_dt else ()):
        speedup = rates[(name, 2)] * 2 / rates[(name, 1)]
        rows.append(Comparison(f"{name} speed-up 1->2 workers", speedup, 2.0,
                               "ideal (linear)", "x", ""))
    return rows


BENCHMARKS = {"curate": bench_curate}
