"""``afm bench curate``: steady-state curate throughput on real pages, afm next to
trafilatura alone and next to datatrove.

First, on the gold sets' real pages as they are (ScrapingHub's from ``../shared`` and the
others from ``--gold``: ``bench_real_pages``), in WARC files of 700 pages: trafilatura
alone (its defaults: the baseline), the extract stage alone with each method, and whole
``afm curate`` with every default stage (and with each extraction method), each on the
first file and on all files, the difference being the steady state; ``--repeat N`` runs
that round N times in turn and reports the median round, with each ratio's range over
the rounds (one round's ratio moved ~20% between two runs on a busy 2-core box);
``--block-model FILE`` adds whole curate with that block model file to every round. Whole
curate runs in one process (Beam's ``in_memory`` mode, one worker), and once more with
``method=blocks`` as ``afm curate`` runs by default, its stages in a worker process beside
the launcher (``multi_processing``, one worker; both processes' CPU counted), whose
allocator settings differ (pipelines/beam/allocator.py). ``--suite real-pages`` stops there. Then the recombined corpus below.

The input is a web-sized corpus made from the 181 real article pages of
``../shared/eval/extraction`` (:mod:`afm.app.bench.pipelines.webcorpus`: 10,000 pages of
real page HTML with recombined article bodies, 10% exact and 10% near copies in other WARC
files than their originals, so dedup does its share), in WARC files of 1,000 pages.

Three pipelines run on it, one worker each, every run in a child process of its own whose
CPU time (user + system, the child and what it waited for) is what is counted:

* ``afm, datatrove's stages``: extraction, the Gopher / C4 / FineWeb heuristics, MinHash
  dedup, the same work as
* ``datatrove``: its FineWeb-style reference pipeline (WarcReader, Trafilatura, the same
  four heuristic filters, MinHash signature / buckets / cluster / filter, JSONL writer);
* ``afm, every stage``: ``afm curate``'s default pipeline with a decontamination index
  built from ``../shared/eval/benchmarks``.

Each runs on the first file (1,000 pages) and on all of them, interleaved (every
pipeline's small run, then every big run, so a drift of the machine's load falls on all
alike); the steady state is the
difference, ``(N - n) / (CPU(N) - CPU(n))`` pages per CPU-second (= pages/s/core), and
start-up is what the small run cost beyond its pages at that rate, so a figure is not
quoted from start-up. The per-stage CPU table comes from the big afm run's manifest
(:mod:`afm.pipelines.curate.costs`). datatrove is a bench-only dependency (``afm[bench]``,
``pip install datatrove==0.10.1``); without it its rows are missing.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison
from afm.crawler.frontier.urls import clean_url
from afm.readers.warc import iter_warc_pages

DATATROVE_VERSION = "0.10.1"
PAGES_PER_FILE = 1000
BEFORE_44 = 31.0  # pages/s/core, every stage, one worker, measured when issue 44 was filed


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


AFM_CONFIG: dict[str, Any] = {
    # The stages datatrove's reference pipeline has: extraction, heuristics, MinHash dedup.
    "language": {"enabled": False},
    "safety": {"enabled": False},
    "pii": {"enabled": False},
    "quality_model": {"enabled": False},
    "decontaminate": {"enabled": False},
    "output": {"write_rejects": True},
}


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




# ----------------------------------------------------------------------------- the corpus


def build_web_corpus(shared: Path, workdir: Path, pages: int,
                     english_share: float | None = None) -> tuple[Path, Path]:
    """``(small, big)`` directories of WARC files: the big one holds ``pages`` generated
    pages in files of :data:`PAGES_PER_FILE`, the small one its first file. Kept between
    runs (the name says what was generated). ``english_share``: pages in one language each
    (:func:`afm.app.bench.pipelines.webcorpus.generate_pages`)."""
    from afm.app.bench.pipelines.webcorpus import corpus_key, generate_pages

    files = max(1, pages // PAGES_PER_FILE)
    root = workdir / corpus_key(pages, 0, files, english_share)
    big, small = root / "all", root / "first"
    if (root / "_DONE").exists():
        return small, big
    shutil.rmtree(root, ignore_errors=True)
    big.mkdir(parents=True)
    small.mkdir()
    records = generate_pages(shared / "eval" / "extraction", pages, english_share=english_share)
    paths = [big / f"part-{i:03d}.warc.gz" for i in range(files)]
    # Page i in file (i * 7 + 3) % files: the copies land in other files than their originals.
    write_html_warcs(records, paths, file_of=lambda i: i // PAGES_PER_FILE if files == 1 else
                     (i * 7 + 3) % files)
    os.symlink(paths[0], small / paths[0].name)
    (root / "_DONE").write_text(json.dumps({"pages": pages, "files": files}))
    return small, big


# ----------------------------------------------------------------------------- one run, measured


@dataclass
class Measured:
    """One pipeline run in a child process."""

    pages: int
    kept: int
    cpu_s: float  # user + system of the child and everything it waited for
    wall_s: float
    peak_rss_mb: float  # the child and its descendants together, sampled
    manifest: str = ""  # afm runs: the manifest, for the per-stage table


def measure(kind: str, inputs: Path, out: Path, extra: dict[str, Any]) -> Measured:
    """Run ``kind`` (afm-datatrove-stages | afm-all | datatrove | one of ``ALONE``) on ``inputs`` in a child
    process, which reports its own resource usage (``getrusage``: itself and the
    processes it waited for)."""
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    spec = json.dumps({"kind": kind, "inputs": str(inputs), "out": str(out), **extra})
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "afm.app.bench.pipelines.curate", spec],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{kind} failed on {inputs}:\n{stderr[-3000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    return Measured(result["pages"], result["kept"], result["cpu_s"], round(wall, 2),
                    result["peak_rss_mb"], result.get("manifest", ""))


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """In the child: run one pipeline, print what it did and what it cost (its own
    rusage, and its finished children's: Beam's and datatrove's helpers)."""
    from afm.pipelines.curate.costs import TreeMemory, Usage

    inputs, out = Path(spec["inputs"]), Path(spec["out"])
    files = sorted(inputs.glob("*.warc.gz"))
    # Sampled, not ru_maxrss: Linux carries a parent's peak over fork and exec.
    with TreeMemory() as memory:
        if spec["kind"] == "datatrove":
            pages, kept, _ = run_datatrove(files, out, 1)
            manifest = ""
        elif spec["kind"] in ALONE:
            pages, kept = run_alone(spec["kind"], files)
            manifest = ""
        else:
            from afm.pipelines.curate.pipeline import run_curate

            config: dict[str, Any] = dict(AFM_CONFIG) if spec["kind"] == "afm-datatrove-stages" else {}
            if spec.get("decontam_index"):
                config["decontaminate"] = {"params": {"index": spec["decontam_index"]}}
            config.update(spec.get("config") or {})  # a stage's settings, for experiments
            mode = spec.get("running_mode", "in_memory")
            m = run_curate([str(f) for f in files], out, config=config, quiet=True,
                           pipeline_args=[f"--direct_running_mode={mode}", "--direct_num_workers=1"])
            pages, kept, manifest = m["totals"]["in"], m["totals"]["kept"], str(out / "manifest.json")
    usage = Usage.now()  # the one getrusage reading of curate's own costs
    return {"pages": pages, "kept": kept, "manifest": manifest, "cpu_s": usage.self_cpu + usage.children_cpu,
            "peak_rss_mb": memory.peak_bytes / 2**20}


# ----------------------------------------------------------------------------- extractors alone

# Extraction with nothing around it, on the same WARC files (read by afm's WARC reader, as
# every pipeline reads them): trafilatura's defaults (the baseline), and the extract stage
# with each method (no early language check).
ALONE = ("trafilatura", "extract-blocks", "extract-selector")


def run_alone(kind: str, files: list[Path]) -> tuple[int, int]:
    """(pages read, pages with text) of one extractor over the response records."""
    if kind == "trafilatura":
        import trafilatura

        def extract(page: dict[str, Any]) -> bool:
            return bool(trafilatura.extract(page["body"], url=page.get("url")))
    else:
        from afm.filters.extract import ExtractConfig, Extractor

        extractor = Extractor(ExtractConfig(method=kind.removeprefix("extract-"),
                                            early_language=[]))

        def extract(page: dict[str, Any]) -> bool:
            return extractor(page).keep
    pages = kept = 0
    for f in files:
        for page in iter_warc_pages(str(f)):
            pages += 1
            kept += extract(page)
    return pages, kept


# ----------------------------------------------------------------------------- real pages

REAL_PAGES_PER_FILE = 700


def build_real_corpus(pages: list[Any], workdir: Path) -> tuple[Path, Path]:
    """``(small, big)`` directories of WARC files holding the gold sets' real pages as
    they are (not recombined), in a seeded order that mixes the sets, in files of
    :data:`REAL_PAGES_PER_FILE`; the small one is the first file."""
    import hashlib
    import random

    ids = sorted(f"{p.set}/{p.id}" for p in pages)
    key = hashlib.sha1("\n".join(["urls-as-requested", *ids]).encode()).hexdigest()[:10]  # the tag: how URLs are written
    root = workdir / f"real-{len(pages)}-{key}"
    big, small = root / "all", root / "first"
    if (root / "_DONE").exists():
        return small, big
    shutil.rmtree(root, ignore_errors=True)
    big.mkdir(parents=True)
    small.mkdir()
    order = sorted(pages, key=lambda p: (p.set, p.id))
    random.Random(0).shuffle(order)
    files = max(1, -(-len(order) // REAL_PAGES_PER_FILE))
    paths = [big / f"part-{i:03d}.warc.gz" for i in range(files)]
    # URLs as a crawler records them (no raw spaces: warcio rewrites such a URI and logs a
    # warning for every record, a cost of the bench's files that no crawl has)
    records = [(clean_url(p.url or f"http://{p.set}.gold.test/{p.id}"), p.body) for p in order]
    write_html_warcs(records, paths, file_of=lambda i: i // REAL_PAGES_PER_FILE)
    os.symlink(paths[0].resolve(), small / paths[0].name)
    (root / "_DONE").write_text(json.dumps({"pages": len(order), "files": files}))
    return small, big


def bench_real_pages(opts: BenchOptions, work: Path, index: str) -> list[Comparison]:
    """Whole curate and each extractor alone next to trafilatura alone, on the real pages
    of every gold set held, steady state, one worker; ``opts.repeat`` rounds of it."""
    from afm.app.bench.filters.filters import held_gold_pages
    from afm.console import console, print_table

    pages = held_gold_pages(opts, limit=60 if opts.quick else None)
    small, big = build_real_corpus(pages, work)
    console.print(f"real pages: {len(pages):,} in {big} (first file: {small}); load average "
                  f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    from afm.filters.extract import ExtractConfig

    default = ExtractConfig().method
    kinds = [("trafilatura alone (defaults)", "trafilatura", {}),
             ("extract stage alone, blocks", "extract-blocks", {}),
             ("extract stage alone, cascade", "extract-selector", {}),
             (f"afm curate, every default stage (extract={default})", "afm-all",
              {"decontam_index": index})]
    kinds += [(f"afm curate, every stage, extract={method}", "afm-all",
               {"decontam_index": index, "config": {"extract": {"params": {"method": method}}}})
              for method in ("blocks", "selector") if method != default]
    kinds.append(("afm curate, every stage, extract=blocks, one worker process", "afm-all",
                  {"decontam_index": index, "running_mode": "multi_processing",
                   "config": {"extract": {"params": {"method": "blocks"}}}}))
    # --block-model: a candidate block model file beside the shipped one, whole curate
    kinds += [(f"afm curate, every stage, extract=blocks, {path.name}", "afm-all",
               {"decontam_index": index, "config": {"extract": {"params": {
                   "method": "blocks", "block_model_path": str(path)}}}})
              for path in opts.block_models]
    rounds: list[dict[str, SteadyState]] = []
    for r in range(opts.repeat):
        runs: dict[str, list[Measured]] = {name: [] for name, _, _ in kinds}
        for label, inputs in (("first file", small), ("all files", big)):
            for i, (name, kind, extra) in enumerate(kinds):
                dest = work / "out" / f"real-round{r + 1}-{i}-{label.replace(' ', '-')}"
                m = measure(kind, inputs, dest, extra)
                console.print(f"round {r + 1}/{opts.repeat}, {name}, {label}: {m.pages:,} pages, {m.kept:,} kept, "
                              f"{m.cpu_s:.1f} CPU s; load {os.getloadavg()[0]:.2f}")
                runs[name].append(m)
        rounds.append({name: SteadyState(name, *runs[name]) for name, _, _ in kinds})
    traf_name = "trafilatura alone (defaults)"
    ratios = {name: sorted(rd[name].pages_per_cpu_s / rd[traf_name].pages_per_cpu_s for rd in rounds)
              for name, _, _ in kinds}
    # the round whose default-curate ratio is the median (the lower of the middle two)
    # stands for the run, its manifests giving the per-stage tables; the rounds give ranges
    default_name = f"afm curate, every default stage (extract={default})"
    middle = sorted(rounds, key=lambda rd: rd[default_name].pages_per_cpu_s / rd[traf_name].pages_per_cpu_s)
    results = middle[(len(middle) - 1) // 2]
    print_table("real pages, steady state, one worker (pages per CPU-second)",
                ["run", "pages/s/core", "CPU ms/page", "start-up CPU s", "pages -> kept",
                 "CPU s (all)", "wall s (all)", "peak MB"], [r.row() for r in results.values()])
    default_run = results[default_name]
    print_table("real pages, afm curate (every default stage): CPU per stage",
                ["stage", "documents in", "CPU s", "ms per document"], stage_table(default_run.big.manifest))
    steady = {name: steady_costs(r.small.manifest, r.big.manifest)
              for name, r in results.items() if r.big.manifest and r.small.manifest}
    for name, costs_ in steady.items():
        print_table(f"real pages, {name}: CPU per document at steady state (the two runs' difference)",
                    ["stage", "ms per document"],
                    [[k, f"{v:.2f}"] for k, v in costs_.items()])
    record = {k: {"steady_pages_per_cpu_s": v.pages_per_cpu_s, "startup_cpu_s": v.startup_cpu_s,
                  "small": asdict(v.small), "big": asdict(v.big)} for k, v in results.items()}
    record["steady_ms_per_document"] = steady
    record["ratios_to_trafilatura_by_round"] = ratios
    record["load_average"] = os.getloadavg()
    (work / "result-real-pages.json").write_text(json.dumps(record, indent=2))
    traf = results[traf_name].pages_per_cpu_s
    n = f" ({len(pages):,} real pages)"
    spread = "" if opts.repeat == 1 else f"; {opts.repeat} rounds, median round"

    def ratio_range(name: str) -> str:
        low, high = ratios[name][0], ratios[name][-1]
        return "" if opts.repeat == 1 else f" (rounds {low:.2f}x-{high:.2f}x)"

    out = [Comparison(f"curate, every default stage (extract={default}) vs trafilatura alone" + n + spread
                      + ratio_range(default_name), default_run.pages_per_cpu_s, traf,
                      "trafilatura 2.3.1 defaults alone", "pages/s/core", ">= 1.5x")]
    for name, _, _ in kinds[1:]:
        if not name.startswith("afm curate, every default"):
            out.append(Comparison(f"{name} vs trafilatura alone{ratio_range(name)}",
                                  results[name].pages_per_cpu_s, traf, "trafilatura alone",
                                  "pages/s/core", ">= 5x" if name == "extract stage alone, blocks" else ""))
    for name, costs_ in steady.items():
        if BEYOND_STAGES in costs_:
            out.append(Comparison(f"{name}: process CPU beyond the stages' own, per page, steady state",
                                  costs_[BEYOND_STAGES], costs_["all stages"],
                                  "the stages' own CPU per page", "ms"))
    return out


BEYOND_STAGES = "beyond the stages (Beam, packing, runner)"


def steady_costs(small_manifest: str, big_manifest: str) -> dict[str, float]:
    """Milliseconds per document at steady state, from two runs' manifests (the first
    file alone, every file): per stage, the stages together, and what the process spent
    beyond them (Beam's runner, packing, writing, bookkeeping; only where both manifests
    hold the process's CPU: local runs). The difference of the two runs leaves start-up
    out, which a single run's ``other_cpu_s`` does not."""
    small, big = (json.loads(Path(m).read_text())["costs"] for m in (small_manifest, big_manifest))

    def per_stage(costs: dict[str, Any]) -> dict[str, tuple[float, int]]:
        return {st["stage"]: (float(st["cpu_s"]), int(st["documents"])) for st in costs["stages"]}

    a, b = per_stage(small), per_stage(big)
    docs = (b.get("read", (0, 0))[1] - a.get("read", (0, 0))[1]) or 1
    out = {}
    for name, (cpu, n) in b.items():
        cpu0, n0 = a.get(name, (0.0, 0))
        if n - n0 > 0:
            out[name] = 1000 * (cpu - cpu0) / (n - n0)
    stages = 1000 * (float(big["stages_cpu_s"]) - float(small["stages_cpu_s"])) / docs
    out["all stages"] = stages
    if "process_cpu_s" in big and "process_cpu_s" in small:
        process = 1000 * (float(big["process_cpu_s"]) - float(small["process_cpu_s"])) / docs
        out[BEYOND_STAGES] = process - stages
        out["the whole process"] = process
    return out


# ----------------------------------------------------------------------------- the benchmark


@dataclass
class SteadyState:
    name: str
    small: Measured
    big: Measured

    @property
    def pages_per_cpu_s(self) -> float:
        """Pages per CPU-second beyond start-up: the difference of the two runs."""
        return (self.big.pages - self.small.pages) / max(self.big.cpu_s - self.small.cpu_s, 1e-9)

    @property
    def startup_cpu_s(self) -> float:
        return max(0.0, self.small.cpu_s - self.small.pages / self.pages_per_cpu_s)

    def row(self) -> list[Any]:
        return [self.name, f"{self.pages_per_cpu_s:.1f}", f"{1000 / self.pages_per_cpu_s:.1f}",
                f"{self.startup_cpu_s:.1f}", f"{self.big.pages:,} -> {self.big.kept:,}",
                f"{self.big.cpu_s:.0f}", f"{self.big.wall_s:.0f}", f"{self.big.peak_rss_mb:,.0f}"]


def decontam_index(shared: Path, workdir: Path) -> str:
    from afm.filters.benchmarks import build_index

    out = workdir / "decontam-index"
    if not (out / "_DONE").exists():
        shutil.rmtree(out, ignore_errors=True)
        build_index(shared / "eval" / "benchmarks", out)
        (out / "_DONE").write_text("ok")
    return str(out)


def stage_table(manifest_path: str) -> list[list[Any]]:
    """Rows of the big afm run's per-stage CPU (ms per document entering the stage)."""
    costs = json.loads(Path(manifest_path).read_text())["costs"]
    rows = [[s["stage"], f"{s['documents']:,}", f"{s['cpu_s']:.1f}",
             "" if s["ms_per_document"] is None else f"{s['ms_per_document']:.2f}"] for s in costs["stages"]]
    rows.append(["all stages, per page read", "", f"{costs['stages_cpu_s']:.1f}",
                 f"{costs['stages_ms_per_document']:.2f}"])
    rows.append(["the whole process, per page read", "", f"{costs['process_cpu_s']:.1f}",
                 f"{costs['process_ms_per_document']:.2f}"])
    return rows


def bench_curate(opts: BenchOptions) -> list[Comparison]:
    from afm.console import console, print_table

    if opts.shared_dir is None:
        raise RuntimeError("needs ../shared/eval/extraction (the real pages) for its input")
    work = Path(opts.workdir) / "curate"
    index = decontam_index(opts.shared_dir, work)
    real = bench_real_pages(opts, work, index)
    if opts.suite == "real-pages":
        return real
    pages = 2 * PAGES_PER_FILE if opts.quick else 10 * PAGES_PER_FILE
    small, big = build_web_corpus(opts.shared_dir, work, pages)
    console.print(f"corpus: {pages:,} pages in {big} (first file: {small}); load average "
                  f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        import datatrove  # noqa: F401
        have_dt = True
    except ImportError:
        have_dt = False
        console.print(f"[yellow]datatrove not installed (pip install datatrove=="
                      f"{DATATROVE_VERSION}): its rows are missing")
    kinds = [("afm, datatrove's stages", "afm-datatrove-stages", {}),
             ("afm, every stage (+ decontamination)", "afm-all", {"decontam_index": index})]
    if have_dt:
        kinds.insert(1, (f"datatrove {DATATROVE_VERSION}", "datatrove", {}))
    # Interleaved (every pipeline's small run, then every pipeline's big run), so that a
    # change of the machine's load over the benchmark falls on all pipelines alike.
    runs: dict[str, list[Measured]] = {kind: [] for _, kind, _ in kinds}
    for label, inputs in (("first file", small), ("all files", big)):
        for name, kind, extra in kinds:
            m = measure(kind, inputs, work / "out" / f"{kind}-{label.replace(' ', '-')}", extra)
            console.print(f"{name}, {label}: {m.pages:,} pages, {m.kept:,} kept, {m.cpu_s:.1f} CPU s, "
                          f"{m.wall_s:.1f} s, peak {m.peak_rss_mb:,.0f} MB; load "
                          f"{os.getloadavg()[0]:.2f}")
            runs[kind].append(m)
    results = {kind: SteadyState(name, *runs[kind]) for name, kind, _ in kinds}
    print_table("steady state, one worker (pages per CPU-second = pages/s/core)",
                ["pipeline", "pages/s/core", "CPU ms/page", "start-up CPU s", "pages -> kept",
                 "CPU s (all)", "wall s (all)", "peak MB"], [r.row() for r in results.values()])
    print_table("afm, every stage: CPU per stage (thread CPU in the stage's own code)",
                ["stage", "documents in", "CPU s", "ms per document"], stage_table(results["afm-all"].big.manifest))
    record = {k: {"steady_pages_per_cpu_s": v.pages_per_cpu_s, "startup_cpu_s": v.startup_cpu_s,
                  "small": asdict(v.small), "big": asdict(v.big)} for k, v in results.items()}
    record["load_average"] = os.getloadavg()
    (work / "result.json").write_text(json.dumps(record, indent=2))
    dt = results.get("datatrove")
    base = dt.pages_per_cpu_s if dt else None
    rows = [
        Comparison("steady pages/s/core, datatrove's stages", results["afm-datatrove-stages"].pages_per_cpu_s,
                   base, f"datatrove {DATATROVE_VERSION}", "pages/s/core", ">= 1.0x datatrove"),
        Comparison("steady pages/s/core, every stage", results["afm-all"].pages_per_cpu_s, base,
                   f"datatrove {DATATROVE_VERSION} (fewer stages)", "pages/s/core",
                   f">= {2 * BEFORE_44:.0f} (2x the {BEFORE_44:.0f} of before #44)"),
        Comparison("start-up CPU s, every stage", results["afm-all"].startup_cpu_s,
                   dt.startup_cpu_s if dt else None, "datatrove", "s", "reported apart"),
        Comparison("peak MB, every stage", results["afm-all"].big.peak_rss_mb,
                   dt.big.peak_rss_mb if dt else None, "datatrove", "MB", ""),
    ]
    return real + rows


def main(argv: list[str]) -> int:
    print(json.dumps(_child(json.loads(argv[0]))))
    return 0


BENCHMARKS = {"curate": bench_curate}

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
