"""Benchmarks of the document filters: extraction quality/speed and filter throughput.

* ``extraction``: the extract stage's methods (the block extractor, the cascade,
  trafilatura alone) and Resiliparse, F1 by source and pages per CPU-second, on the
  real pages of every gold set held (ScrapingHub's 181 in ``../shared/eval/extraction``,
  the others from ``--gold``), all measured in this run and process, with the load
  average. Metric as ScrapingHub's benchmark defines it: ``\\w+`` tokens, 4-token
  shingles, per-page TP/FP/FN normalised to sum 1, precision and recall averaged over
  pages, F1 of the two averages (snippet gold for trafilatura's pages).
* ``optout_throughput``: decisions/s of the ``optout`` stage on one core, every signal
  read, against 10,000 hosts' snapshots (Cloudflare's managed robots.txt, with Content
  Signals and Content-Usage), with afm's own training token and with
  ``preset:ai-training``, next to the extractor's pages/s on the same pages.
* ``filters_throughput``: documents/s on one core (process CPU time) for the language,
  safety and PII filters, on the benchmark's ground-truth articles (or built-in text
  without ``../shared``), next to a baseline that only lower-cases and splits the text
  (the floor any per-document Python filter pays).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from afm.app.bench.common import BenchOptions, Comparison
from afm.filters.extraction.gold import (
    LOADERS,
    GoldPage,
    counts,
    extraction_scores,
    load_scrapinghub,
    load_sets,
    page_counts,
)
from afm.filters.extraction.train import source_of

# The metric (4-token shingles, per-page precision/recall averaged, their F1) is the one in
# afm.filters.extraction.gold, which the selector's training and cross-validation use too.


def load_extraction_benchmark(eval_dir: Path, limit: int | None = None) -> list[dict]:
    """Pages of ``eval/extraction``: ``{"id", "url", "body": bytes, "truth": str}``, read by
    the one ScrapingHub loader (``afm.filters.extraction.gold.load_scrapinghub``)."""
    return [{"id": p.id, "url": p.url, "body": p.body, "truth": p.truth or ""}
            for p in load_scrapinghub(eval_dir, limit)]


def evaluate_extractor(pages: list[dict], fn: Callable[[bytes, str | None], str]) -> dict[str, float]:
    """Run ``fn(body, url) -> text`` over pages; scores plus pages/s of CPU time."""
    outputs = []
    start = time.process_time()
    for page in pages:
        outputs.append(fn(page["body"], page["url"]) or "")
    cpu = max(time.process_time() - start, 1e-9)
    scores = extraction_scores([page_counts(p["truth"], o) for p, o in zip(pages, outputs)])
    scores["pages_per_s"] = len(pages) / cpu
    return scores


# ---------------------------------------------------------------------------- benchmarks


def _candidate_fn(name: str) -> Callable[[bytes, str | None], str]:
    """One candidate as a whole extractor: decode, parse, extract (what it costs alone)."""
    from afm.filters.extraction.candidates import Page, run_candidate
    from afm.filters.extraction.table import decode

    def run(body: bytes, url: str | None) -> str:
        return run_candidate(name, Page(decode(body), url))

    return run


def _loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def held_gold_pages(opts: BenchOptions, limit: int | None = None) -> list[GoldPage]:
    """The real pages of every extraction gold set held: ScrapingHub's from ../shared, and
    WCXB's development split, trafilatura's evaluation pages, Utomo & Leu's and
    Google-Trends-2017 and Fundus's news pages from ``--gold`` (its ``wcxb/``,
    ``trafilatura/``, ``utomo/``, ``googletrends/``, ``fundus/``; each optional)."""
    if opts.shared_dir is None:
        raise RuntimeError("needs ../shared/eval/extraction (the 181-page benchmark)")
    gold = opts.gold_dir
    paths = {"scrapinghub": opts.shared_dir / "eval"}
    if gold is not None:
        paths.update({name: gold / name for name in LOADERS
                      if name != "scrapinghub" and (gold / name).is_dir()})
    return load_sets(**paths, limit=limit)


def _extractor_fn(method: str, block_model: Path | None = None) -> Callable[[bytes, str | None], str]:
    """The extract stage with one method (no early language check: extraction alone);
    ``block_model``: the blocks method with that model file instead of the shipped one."""
    from afm.filters.extract import ExtractConfig, Extractor

    extractor = Extractor(ExtractConfig(method=method, early_language=[],
                                        block_model_path=str(block_model) if block_model else None))

    def run(body: bytes, url: str | None) -> str:
        d = extractor({"url": url, "status": 200, "headers": {}, "body": body})
        return d.document["text"] if d.keep and d.document else ""

    return run


def bench_extraction(opts: BenchOptions) -> list[Comparison]:
    """Each extractor's F1 and pages per CPU-second on the real pages of every gold set
    held (``held_gold_pages``), all in this run and in this process: afm's block
    extractor, the cascade, trafilatura alone (its defaults; and without comments, the F1
    the issue compares with), Resiliparse. Pages go in chunks of 50, every extractor on
    each chunk in turn, so a change of the machine's load falls on all alike. F1 of the
    shipped models is in-sample on the sets they were trained on (each F1 line says which:
    the block model's file names its training sources); the held-out figures of those
    are ``afm extraction blocks cv``'s. ``--block-model FILE``: each such model file runs
    beside the shipped one (``afm blocks <file name>``), to compare a candidate before it
    ships."""
    import trafilatura

    from afm.filters.extraction.block_model import load_block_model

    pages = held_gold_pages(opts, limit=20 if opts.quick else None)
    trained = set(load_block_model().meta.get("sources", []))

    def plain(body: bytes, url: str | None) -> str:
        return trafilatura.extract(body, url=url) or ""

    fns: dict[str, Callable[[bytes, str | None], str]] = {
        "afm blocks": _extractor_fn("blocks"), "afm cascade": _extractor_fn("selector"),
        "trafilatura default": plain, "trafilatura no comments": _extractor_fn("trafilatura"),
        "resiliparse": _candidate_fn("resiliparse")}
    candidates = {f"afm blocks {path.name}": path for path in opts.block_models}
    if len(candidates) < len(opts.block_models):
        raise ValueError("--block-model files need distinct names")
    fns.update({name: _extractor_fn("blocks", path) for name, path in candidates.items()})
    for fn in fns.values():  # imports, models, caches: not part of a page's cost
        for page in pages[:3]:
            fn(page.body, page.url)
    load_start = _loadavg()
    cpu = dict.fromkeys(fns, 0.0)
    rows: dict[str, dict[str, list]] = {name: {} for name in fns}
    for at in range(0, len(pages), 50):
        chunk = pages[at: at + 50]
        for name, fn in fns.items():
            start = time.process_time()
            texts = [fn(p.body, p.url) for p in chunk]
            cpu[name] += time.process_time() - start
            for p, text in zip(chunk, texts):
                rows[name].setdefault(source_of(p.set), []).append(counts(p, text))
    rate = {name: len(pages) / max(c, 1e-9) for name, c in cpu.items()}
    sources = sorted(rows["afm blocks"])
    f1 = {name: {s: extraction_scores(r[s])["f1"] for s in sources} for name, r in rows.items()}
    for name in fns:
        f1[name]["pooled"] = extraction_scores([x for s in sources for x in rows[name][s]])["f1"]
    n = f" ({len(pages):,} pages of {len(sources)} sources)"
    out = [
        Comparison("speed: blocks vs trafilatura default" + n, rate["afm blocks"],
                   rate["trafilatura default"], "trafilatura 2.3.1 default", "pages/CPU-s",
                   ">= 5x"),
        Comparison("speed: cascade vs trafilatura default", rate["afm cascade"],
                   rate["trafilatura default"], "trafilatura 2.3.1 default", "pages/CPU-s"),
        Comparison("speed: resiliparse vs trafilatura default", rate["resiliparse"],
                   rate["trafilatura default"], "trafilatura 2.3.1 default", "pages/CPU-s"),
        Comparison("speed: trafilatura no comments vs default", rate["trafilatura no comments"],
                   rate["trafilatura default"], "trafilatura 2.3.1 default", "pages/CPU-s"),
    ]
    for name in candidates:
        out += [Comparison(f"speed: {name} vs trafilatura default", rate[name],
                           rate["trafilatura default"], "trafilatura 2.3.1 default", "pages/CPU-s"),
                Comparison(f"speed: {name} vs the shipped model", rate[name], rate["afm blocks"],
                           "afm blocks (shipped)", "pages/CPU-s")]
    for s in [*sources, "pooled"]:
        seen = ("in-sample" if s in trained else "held out" if s != "pooled"
                else "in-sample on its training sources")
        for other in ("trafilatura no comments", "afm cascade", "trafilatura default"):
            out.append(Comparison(f"F1 {s}: blocks vs {other} ({seen})", f1["afm blocks"][s],
                                  f1[other][s], other))
        for name in candidates:
            out.append(Comparison(f"F1 {s}: {name} vs the shipped model", f1[name][s],
                                  f1["afm blocks"][s], "afm blocks (shipped)"))
    out += [Comparison("load average (1 min) at start", load_start),
            Comparison("load average (1 min) at end", _loadavg())]
    return out


_FALLBACK_TEXTS = [
    "The city council met on Tuesday to discuss the new budget for public libraries and parks.",
    "Contact our office at 555-0100 or write to the address below for more information.",
    "Researchers found that the new battery design doubles capacity while halving charge time.",
]


def _docs_per_s(fn: Callable[[dict], object], docs: list[dict], min_seconds: float) -> float:
    n = 0
    start = time.process_time()
    while True:
        for doc in docs:
            fn(doc)
        n += len(docs)
        elapsed = time.process_time() - start
        if elapsed >= min_seconds:
            return n / elapsed


def bench_filters_throughput(opts: BenchOptions) -> list[Comparison]:
    from afm.filters.language import LanguageFilter
    from afm.filters.pii import PiiFilter
    from afm.filters.safety import SafetyFilter
    from afm.schema import make_document

    if opts.shared_dir is not None:
        truth = json.loads((opts.shared_dir / "eval/extraction/ground-truth.json").read_text())
        texts = [v.get("articleBody") or "" for v in truth.values()]
    else:
        texts = [" ".join(_FALLBACK_TEXTS * 20)] * 50
    texts = [t for t in texts if t][: 60 if opts.quick else 181]
    docs = [make_document(t, url=f"https://example.org/{i}") for i, t in enumerate(texts)]
    seconds = 0.5 if opts.quick else 2.0

    def floor(doc: dict) -> object:
        return doc["text"].lower().split()

    baseline = _docs_per_s(floor, docs, seconds)
    out = []
    for name, flt in (("language", LanguageFilter()), ("safety", SafetyFilter()), ("pii", PiiFilter())):
        rate = _docs_per_s(flt, docs, seconds)
        out.append(Comparison(f"{name} filter", rate, baseline, "lower()+split() floor", "docs/s/core"))
    return out


_ROBOTS_MANAGED = (
    "User-Agent: *\nContent-signal: search=yes, ai-train=no\nAllow: /\n\n"
    + "".join(f"User-agent: {t}\nDisallow: /\n\n" for t in
              ("Amazonbot", "Applebot-Extended", "Bytespider", "CCBot", "ClaudeBot",
               "Google-Extended", "GPTBot", "meta-externalagent"))
    + "User-agent: *\nDisallow: /lp\nContent-Usage: /blog/ train-ai=y\nContent-Usage: train-ai=n\n")


def _optout_pages(opts: BenchOptions, hosts: int) -> list[dict]:
    """Crawl pages as curate meets them: real HTML (the extraction benchmark) or built-in
    text, spread over ``hosts`` hosts, with a few header lines each."""
    if opts.shared_dir is not None:
        bodies = [p["body"] for p in load_extraction_benchmark(opts.shared_dir / "eval",
                                                               60 if opts.quick else None)]
    else:
        bodies = [f"<html><body><p>{' '.join(_FALLBACK_TEXTS * 40)}</p></body></html>".encode()] * 60
    return [{"url": f"https://h{i % hosts}.example/blog/{i}", "status": 200, "body": body,
             "headers": [["Content-Type", "text/html"], ["X-Robots-Tag", "noarchive"],
                         ["X-Robots-Tag", "max-snippet: 50"], ["Content-Usage", "search=y"]]}
            for i, body in enumerate(bodies)]


def bench_optout_throughput(opts: BenchOptions) -> list[Comparison]:
    """Decisions/s on one core of the ``optout`` stage (every signal: page headers and
    meta, TDMRep, robots.txt for the training tokens, Content Signals, Content-Usage)
    against an index of ``hosts`` hosts whose robots.txt is Cloudflare's managed file,
    with afm's own token and with ``preset:ai-training``, next to the extractor's pages/s
    on the same pages (the stage must stay noise beside extraction)."""
    import datetime as dt

    from afm.consent.snapshots import SnapshotIndex, make_snapshot
    from afm.filters.extract import Extractor
    from afm.filters.optout import OptoutConfig, OptoutFilter

    hosts = 1000 if opts.quick else 10_000
    when = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    index = SnapshotIndex(make_snapshot(f"https://h{i}.example/robots.txt", "robots.txt",
                                        fetched_at=when, status=200,
                                        body=_ROBOTS_MANAGED.encode()) for i in range(hosts))
    pages = _optout_pages(opts, hosts)
    seconds = 0.5 if opts.quick else 2.0
    extract = _docs_per_s(Extractor(), pages[:20], seconds)
    own = _docs_per_s(OptoutFilter(OptoutConfig(), index=index), pages, seconds)
    preset = _docs_per_s(OptoutFilter(OptoutConfig(training_agents=["preset:ai-training"]),
                                      index=index), pages, seconds)
    return [
        Comparison("optout decisions (afm's token) vs extraction", own, extract, "extractor",
                   "pages/s/core"),
        Comparison("optout decisions (preset:ai-training) vs afm's token", preset, own,
                   "afm's token", "pages/s/core"),
        Comparison("load average (1 min) at end", _loadavg()),
    ]


BENCHMARKS = {
    "extraction": bench_extraction,
    "filters_throughput": bench_filters_throughput,
    "optout_throughput": bench_optout_throughput,
}
