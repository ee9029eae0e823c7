"""``afm bench decontam``: scan speed and index memory of benchmark decontamination.

The index holds every n-gram of all shared benchmarks (``../shared/eval/benchmarks``:
GSM8K test + HumanEval; without ``../shared``, the project's demo-math set). The corpus is
the real article texts of the shared extraction benchmark (synthetic text without it),
repeated to the wanted size, with benchmark questions planted in a few documents.

Ours: the vectorised numpy scan against the memory-mapped index, then the full two-pass
decision. Baseline, in the same run: the obvious pure-Python scan, a ``set`` of n-gram
strings probed with every n-gram of every document (same normalisation, same n). Both run
in one process on one core; rates are bytes per CPU second of this process (time.
process_time), so they are per core and not skewed by other jobs sharing the machine.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from afm.app.bench.common import BenchOptions, Comparison, Timer
from afm.filters.benchmarks import (
    BenchmarkSpec,
    build_index,
    demo_benchmark_specs,
    load_benchmark,
    shared_benchmark_specs,
)
from afm.filters.ngram_index import MAX_N, MIN_N, NgramIndex, tokenize
from afm.pipelines.decontaminate import DecontamConfig, decontaminate_records
from afm.schema import make_document


class CpuTimer:
    """CPU seconds of this process (all its threads) spent inside the block."""

    def __enter__(self) -> CpuTimer:
        self.start = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = max(time.process_time() - self.start, 1e-9)


def _articles(opts: BenchOptions) -> list[str]:
    if opts.shared_dir is not None:
        truth = opts.shared_dir / "eval" / "extraction" / "ground-truth.json"
        if truth.exists():
            data = json.loads(truth.read_text(encoding="utf-8"))
            return [v["articleBody"] for v in data.values() if v.get("articleBody")]
    rng = random.Random(0)
    words = [
        "the", "city", "council", "said", "on", "monday", "that", "new", "bus", "lanes",
        "would", "open", "next", "year", "after", "residents", "asked", "for", "safer",
        "streets", "and", "more", "trees", "café", "naïve", "report", "2024", "of", "in",
    ]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(200, 1200))) + "."
            for _ in range(200)]


def _corpus(opts: BenchOptions, questions: list[str], megabytes: float) -> tuple[list[str], set[int]]:
    """Articles repeated (each copy numbered) to ``megabytes``; every 50th gets a question."""
    articles = _articles(opts)
    texts: list[str] = []
    planted: set[int] = set()
    size = 0
    rng = random.Random(1)
    while size < megabytes * 1e6:
        text = f"{articles[len(texts) % len(articles)]}\nCopy {len(texts)}."
        if len(texts) % 50 == 7:
            q = rng.choice(questions)
            cut = len(text) // 2
            text = f"{text[:cut]}\n{q.upper()}\n{text[cut:]}"
            planted.add(len(texts))
        texts.append(text)
        size += len(text.encode("utf-8"))
    return texts, planted


def _naive_index(specs: list, sizes_by_bench: dict[str, int]) -> dict[int, set[str]]:
    """The baseline index: per n, a Python set of n-gram strings (same short-example rule)."""
    out: dict[int, set[str]] = {}
    for spec in specs:
        bench = load_benchmark(spec)
        n = sizes_by_bench[bench.name]
        per_example: dict[int, list[list[str]]] = {}
        for ex, text in bench.segments:
            per_example.setdefault(ex, []).append(tokenize(text))
        for segs in per_example.values():
            has_full = any(len(t) >= n for t in segs)
            for toks in segs:
                if len(toks) >= n:
                    out.setdefault(n, set()).update(
                        " ".join(toks[i : i + n]) for i in range(len(toks) - n + 1)
                    )
                elif not has_full and len(toks) >= MIN_N:
                    out.setdefault(len(toks), set()).add(" ".join(toks))
    return out


def _naive_scan(texts: list[str], naive: dict[int, set[str]]) -> set[int]:
    hit_docs = set()
    for d, text in enumerate(texts):
        toks = tokenize(text)
        for n, grams in naive.items():
            if any(" ".join(toks[i : i + n]) in grams for i in range(len(toks) - n + 1)):
                hit_docs.add(d)
                break
    return hit_docs


def _set_bytes(naive: dict[int, set[str]]) -> int:
    return sum(sys.getsizeof(s) + sum(sys.getsizeof(x) for x in s) for s in naive.values())


def bench_decontam(opts: BenchOptions) -> list[Comparison]:
    workdir = Path(opts.workdir) / "decontam"
    shared = opts.shared_dir is not None and (opts.shared_dir / "eval" / "benchmarks").is_dir()
    specs = shared_benchmark_specs(opts.shared_dir / "eval") if shared else demo_benchmark_specs()
    label = "GSM8K test + HumanEval" if shared else "demo-math (no ../shared)"

    with Timer() as t_build:
        stats = build_index(specs, workdir / "index")
    index = NgramIndex(workdir / "index")
    naive = _naive_index(specs, {b["name"]: b["n"] for b in stats["per_benchmark"]})
    naive_count = sum(len(s) for s in naive.values())
    naive_bytes = _set_bytes(naive)

    questions = [t for _, t in load_benchmark(specs[0]).segments[::2]]
    texts, planted = _corpus(opts, questions, 2.0 if opts.quick else 12.0)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    docs = [make_document(t, url=f"https://bench.test/{i}") for i, t in enumerate(texts)]

    index.scan(texts[:8])  # warm-up: code-point tables and power arrays
    with CpuTimer() as t_scan:
        hit_docs = set()
        for lo in range(0, len(texts), 256):
            for i, hits in enumerate(index.scan(texts[lo : lo + 256])):
                if hits:
                    hit_docs.add(lo + i)
    with CpuTimer() as t_full:
        kept, rejects, _ = decontaminate_records(docs, DecontamConfig(index=str(index.path)))
    base_texts = texts if not opts.quick else texts[: max(1, len(texts) // 2)]
    base_mb = sum(len(t.encode("utf-8")) for t in base_texts) / 1e6
    with CpuTimer() as t_naive:
        naive_hits = _naive_scan(base_texts, naive)
    base_planted = {d for d in planted if d < len(base_texts)}
    ours_planted_caught = len(planted & {i for i, t in enumerate(texts) if i in hit_docs})
    naive_caught = len(base_planted & naive_hits)
    if {d for d in hit_docs if d < len(base_texts)} != naive_hits:
        raise AssertionError("vectorised scan and the naive scan disagree on which documents collide")

    # Many benchmarks with different n: the first benchmark indexed once per n in 4..13
    # (10 "benchmarks", every n present); ours hashes each document once per n, the
    # baseline probes one set per n.
    multi_specs = [
        BenchmarkSpec(name=f"{specs[0].name}@n{n}", path=specs[0].path, adapter=specs[0].adapter, n=n)
        for n in range(MIN_N, MAX_N + 1)
    ]
    multi_stats = build_index(multi_specs, workdir / "index-multi-n")
    multi = NgramIndex(workdir / "index-multi-n")
    multi_naive = _naive_index(multi_specs, {b["name"]: b["n"] for b in multi_stats["per_benchmark"]})
    part = texts[: max(1, len(texts) // (8 if opts.quick else 6))]
    part_mb = sum(len(t.encode("utf-8")) for t in part) / 1e6
    multi_hits: set[int] = set()
    with CpuTimer() as t_multi:
        for lo in range(0, len(part), 256):
            for i, hits in enumerate(multi.scan(part[lo : lo + 256])):
                if hits:
                    multi_hits.add(lo + i)
    with CpuTimer() as t_multi_naive:
        multi_naive_hits = _naive_scan(part, multi_naive)
    del multi_naive
    if multi_hits != multi_naive_hits:
        raise AssertionError("multi-n: vectorised and naive scans disagree on colliding documents")

    per_million = stats["index_bytes"] / max(stats["ngrams"], 1)  # bytes per n-gram == MB per million
    naive_per_million = naive_bytes / max(naive_count, 1)
    return [
        Comparison("scan (pass 1) MB/s/core", mb / t_scan.seconds, base_mb / t_naive.seconds,
                   "pure-Python set-of-strings scan", "MB/s", ">= 5"),
        Comparison("scan (pass 1) documents/s/core", len(texts) / t_scan.seconds,
                   len(base_texts) / t_naive.seconds, "pure-Python set-of-strings scan", "docs/s"),
        Comparison("two passes + decisions MB/s/core", mb / t_full.seconds, base_mb / t_naive.seconds,
                   "pure-Python scan (pass 1 only)", "MB/s"),
        Comparison(f"index memory per million n-grams ({label})", per_million,
                   naive_per_million, "Python set of n-gram strings", "MB", "lower is better"),
        Comparison(f"index memory, {stats['ngrams']:,} n-grams", stats["index_bytes"] / 1e6,
                   naive_bytes / 1e6, "Python set of n-gram strings", "MB"),
        Comparison(f"scan MB/s/core, 10 benchmarks with n = 4..13 ({multi_stats['ngrams']:,} n-grams)",
                   part_mb / t_multi.seconds, part_mb / t_multi_naive.seconds,
                   "pure-Python set-of-strings scan", "MB/s", ">= 5"),
        Comparison("index build seconds", t_build.seconds, None, "", "s"),
        Comparison(f"planted documents caught (corpus {mb:.1f} MB, {len(texts):,} docs)",
                   ours_planted_caught, naive_caught, "naive scan (its part of the corpus)", "docs",
                   f"= {len(planted)} / {len(base_planted)}"),
        Comparison("documents rejected by the two passes", len(rejects), len(base_planted),
                   "planted (naive's part)", "docs"),
    ]


BENCHMARKS = {"decontam": bench_decontam}
