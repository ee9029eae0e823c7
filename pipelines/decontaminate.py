"""Benchmark decontamination (AFM report step 5) as a Beam transform and as plain Python.

A document is dropped whole when it shares an n-gram with a benchmark, unless that n-gram
is *common usage*: it collides with at least ``threshold`` (1000) documents of the corpus.
That needs the whole corpus before any decision, hence two passes:

1. scan every document against the memory-mapped benchmark index (``afm.filters.
   ngram_index``) and keep, per document, the distinct benchmark n-grams it contains
   (almost every document has none and leaves right away);
2. count, across the whole corpus, the documents holding each colliding n-gram; a document
   is rejected when one of its n-grams is held by fewer than ``threshold`` documents.

Rejects name the benchmark, the example and the n-gram (the rarest one in the corpus, i.e.
the strongest evidence). Documents in = kept + rejected, always.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apache_beam as beam

from afm import fs
from afm.config import ConfigError
from afm.console import track
from afm.filters.benchmarks import DATA_DIR, BenchmarkSpec, build_index, specs_from
from afm.filters.ngram_index import HASH_NAME, INDEX_VERSION, Hit, NgramIndex
from afm.pipelines.beam.cputime import StageClock
from afm.pipelines.beam.spill import SpillReader, StowFn, WritingFn
from afm.schema import invalid_reject, make_reject

STAGE = "decontaminate"
REASON = "benchmark_overlap"
MIN_THRESHOLD = 2
log = logging.getLogger(__name__)
__all__ = [
    "BenchmarkSpec",
    "DecontamConfig",
    "Decontaminate",
    "NgramStat",
    "build_index",
    "build_report",
    "check_runnable",
    "decontaminate_records",
    "resolve_index",
]


DECONTAM_NEEDS_INDEX = """\
decontamination needs a benchmark index, and none is configured. Build one once:
    afm decontam build-index --suite report --benchmarks ../shared/eval/benchmarks --out decontam-index/
then pass it:  --decontam-index decontam-index/   (or --set decontaminate.params.index=...)
or, to curate without decontamination (the manifest and report then say so):
    --set decontaminate.enabled=false"""


@dataclass
class DecontamConfig:
    """Settings of the decontamination stage."""

    index: str = ""  # an index built by `afm decontam build-index` (preferred)
    # Without `index`: benchmarks (a directory or YAML, see afm.filters.benchmarks) indexed
    # on the fly into `cache_dir` ("demo" is the project's own demo-math set). There is
    # no default on purpose: a corpus checked against nothing must never look checked.
    benchmarks: str = ""
    cache_dir: str = ""  # "" = <system temp>/afm-decontam
    # n-grams in >= this many documents are common usage. At least 2: with 1 every n-gram
    # found is "common" (it is in the document that contains it) and nothing is dropped.
    threshold: int = 1000
    batch_docs: int = 256  # documents hashed together (one numpy pass)
    batch_chars: int = 1_000_000  # ... or fewer when they are long
    report_top: int = 20  # n-grams listed per benchmark in the report

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) \
                or self.threshold < MIN_THRESHOLD:
            raise ValueError(
                f"decontamination threshold must be an integer >= {MIN_THRESHOLD}, got "
                f"{self.threshold!r} (with 1 every benchmark n-gram counts as common usage "
                "and nothing is ever dropped)")
        if self.batch_docs < 1 or self.batch_chars < 1:
            raise ValueError("batch_docs and batch_chars must be >= 1")

    @property
    def worker_index(self) -> str:
        """The index directory the workers will open (the stage's path field)."""
        return index_location(self) if (self.index or self.benchmarks) else ""

    @property
    def builds_index(self) -> bool:
        """No index given: one is built from ``benchmarks`` (the workers write it)."""
        return not self.index


def _cache_location(cfg: DecontamConfig) -> tuple[str, Any, list[BenchmarkSpec]]:
    """Where an index built on the fly from ``cfg.benchmarks`` lives (keyed by content)."""

    source = DATA_DIR if cfg.benchmarks == "demo" else Path(cfg.benchmarks)
    specs = specs_from(source)
    key = hashlib.sha1(f"{HASH_NAME}:{INDEX_VERSION}".encode())
    for spec in specs:
        key.update(json.dumps(spec.__dict__, sort_keys=True, default=str).encode())
        if spec.path and Path(spec.path).exists():
            st = Path(spec.path).stat()
            key.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    base = Path(cfg.cache_dir) if cfg.cache_dir else Path(tempfile.gettempdir()) / "afm-decontam"
    return str(base / key.hexdigest()[:16]), source, specs


def check_runnable(cfg: DecontamConfig) -> None:
    """The curate stage's ``check`` hook: a run needs an index (there is no default: an
    unchecked corpus must not look checked)."""
    if not cfg.index and not cfg.benchmarks:
        raise ConfigError(DECONTAM_NEEDS_INDEX)


def index_location(cfg: DecontamConfig) -> str:
    """The index directory the workers will open: ``cfg.index``, or where
    :func:`resolve_index` builds one from ``cfg.benchmarks`` (without building it): by
    default in this machine's temporary directory, which cluster workers do not see."""
    if cfg.index:
        return cfg.index
    if not cfg.benchmarks:
        raise ValueError(DECONTAM_NEEDS_INDEX)
    return _cache_location(cfg)[0]


def resolve_index(cfg: DecontamConfig) -> str:
    """The index directory to use: ``cfg.index`` (local or a URL such as ``gs://``), or
    one built (once, cached by content) from ``cfg.benchmarks`` into ``cfg.cache_dir``."""
    if cfg.index:
        try:
            found = fs.isfile(fs.join(cfg.index, "index.json"))
        except Exception:  # noqa: BLE001 - no filesystem for the scheme on this machine
            return cfg.index  # (the pre-flight check says it could not be checked)
        if not found:
            raise FileNotFoundError(
                f"decontamination index not found: {cfg.index} "
                "(build it with `afm decontam build-index`)"
            )
        return cfg.index
    location = index_location(cfg)
    _location, source, specs = _cache_location(cfg)
    out = Path(location)
    if not (out / "index.json").exists():
        log.info("building the benchmark index of %s into %s", source, out)
        # Build beside, then rename: concurrent runs never see (or mix) a half-built index.
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        build_index(specs, tmp)
        try:
            tmp.rename(out)
        except OSError:  # another process finished first: use its copy
            shutil.rmtree(tmp, ignore_errors=True)
    return str(out)


# ------------------------------------------------------------------ pass 1: scanning


NO_TEXT = "record has no text string to scan"  # an invalid_reject's message: rejected, never passed


def _valid_text(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("text"), str)


def iter_batches(docs: Iterable[Any], cfg: DecontamConfig) -> Iterator[list[Any]]:
    """Documents in batches of ``cfg.batch_docs`` or about ``cfg.batch_chars`` characters."""
    batch: list[Any] = []
    chars = 0
    for doc in docs:
        batch.append(doc)
        if _valid_text(doc):
            chars += len(doc["text"])
        if len(batch) >= cfg.batch_docs or chars >= cfg.batch_chars:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def scan_batch(index: NgramIndex, docs: Sequence[Any]) -> list[list[Hit] | None]:
    """Benchmark n-grams of each document (distinct per document); None = invalid record."""
    valid = [i for i, d in enumerate(docs) if _valid_text(d)]
    found = index.scan([docs[i]["text"] for i in valid]) if valid else []
    out: list[list[Hit] | None] = [None] * len(docs)
    for i, hits in zip(valid, found, strict=True):
        out[i] = hits
    return out


# ------------------------------------------------------------------ pass 2: deciding


@dataclass
class NgramStat:
    """A benchmark n-gram seen in the corpus and how many documents hold it."""

    key: int
    n: int
    ngram: str
    benchmark: str
    example_id: str
    also: tuple[str, ...] = ()
    documents: int = 0

    @classmethod
    def from_hit(cls, hit: Hit, documents: int = 1) -> NgramStat:
        return cls(hit.key, hit.n, hit.ngram, hit.benchmark, hit.example_id, hit.also, documents)

    @property
    def benchmarks(self) -> tuple[str, ...]:
        return (self.benchmark, *self.also)


def decide(
    doc: dict[str, Any], hits: list[Hit], counts: dict[int, int] | Any, threshold: int
) -> dict[str, Any] | None:
    """The reject record for ``doc``, or None to keep it. ``counts``: documents per n-gram
    key over the whole corpus (any mapping)."""
    bad = [h for h in hits if counts.get(h.key, 1) < threshold]
    if not bad:
        return None
    worst = min(bad, key=lambda h: (counts.get(h.key, 1), -h.n, h.token))
    benchmarks = sorted({b for h in bad for b in (h.benchmark, *h.also)})
    return make_reject(
        doc,
        STAGE,
        REASON,
        benchmark=worst.benchmark,
        example_id=worst.example_id,
        ngram=worst.ngram,
        n=worst.n,
        ngram_documents=int(counts.get(worst.key, 1)),
        contaminating_ngrams=len(bad),
        excused_ngrams=len(hits) - len(bad),
        benchmarks=benchmarks,
    )


# ------------------------------------------------------------------------ the report


@dataclass
class BenchmarkSummary:
    """One benchmark's part of the report, built one n-gram at a time in bounded memory:
    counts of colliding and excused n-grams, and the ``top`` most frequent of each."""

    top: int
    colliding: int = 0
    excused: int = 0
    top_colliding: list[tuple[int, str, int, str]] = field(default_factory=list)
    top_excused: list[tuple[int, str, int, str]] = field(default_factory=list)

    def add(self, stat: NgramStat, threshold: int) -> BenchmarkSummary:
        entry = (-stat.documents, stat.ngram, stat.n, stat.example_id)
        if stat.documents < threshold:
            self.colliding += 1
            self.top_colliding = heapq.nsmallest(self.top, [*self.top_colliding, entry])
        else:
            self.excused += 1
            self.top_excused = heapq.nsmallest(self.top, [*self.top_excused, entry])
        return self

    def merge(self, other: BenchmarkSummary) -> BenchmarkSummary:
        self.colliding += other.colliding
        self.excused += other.excused
        self.top_colliding = heapq.nsmallest(self.top, self.top_colliding + other.top_colliding)
        self.top_excused = heapq.nsmallest(self.top, self.top_excused + other.top_excused)
        return self

    def as_report(self, removed: int) -> dict[str, Any]:
        return {
            "documents_removed": int(removed),
            "colliding_ngrams": self.colliding,
            "excused_ngrams": self.excused,
            "top_colliding": [{"ngram": g, "n": n, "documents": -d, "example_id": e}
                              for d, g, n, e in self.top_colliding],
            "excused_as_common": [{"ngram": g, "n": n, "documents": -d}
                                  for d, g, n, _e in self.top_excused],
        }


def assemble_report(summaries: dict[str, BenchmarkSummary], removed_per_benchmark: dict[str, int],
                    threshold: int, documents_in: int, documents_rejected: int,
                    invalid: int = 0, top: int = 20) -> dict[str, Any]:
    """The stage report from per-benchmark summaries (see :func:`build_report`)."""
    names = sorted(set(summaries) | set(removed_per_benchmark))
    return {
        "stage": STAGE,
        "threshold": threshold,
        "documents_in": documents_in,
        "documents_kept": documents_in - documents_rejected,
        "documents_rejected": documents_rejected,
        "documents_invalid": invalid,
        "benchmarks": {name: summaries.get(name, BenchmarkSummary(top)).as_report(
            removed_per_benchmark.get(name, 0)) for name in names},
    }


def build_report(
    stats: Iterable[NgramStat],
    removed_per_benchmark: dict[str, int],
    threshold: int,
    documents_in: int,
    documents_rejected: int,
    invalid: int = 0,
    top: int = 20,
) -> dict[str, Any]:
    """Per benchmark: documents removed, its most frequent colliding n-grams (those that
    removed documents) and the n-grams excused as common usage."""
    summaries: dict[str, BenchmarkSummary] = {}
    for stat in stats:
        for b in stat.benchmarks:
            summaries.setdefault(b, BenchmarkSummary(top)).add(stat, threshold)
    return assemble_report(summaries, removed_per_benchmark, threshold, documents_in,
                           documents_rejected, invalid, top)


def reject_benchmarks(reject: dict[str, Any]) -> list[str]:
    """The benchmarks a reject record names (empty for other rejects)."""
    if reject.get("reason") != REASON or not reject.get("details"):
        return []
    return list(json.loads(reject["details"]).get("benchmarks", []))


# ------------------------------------------------------------------ plain Python API


def decontaminate_records(
    records: Iterable[dict[str, Any]],
    cfg: DecontamConfig,
    index: NgramIndex | None = None,
    progress: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Both passes in one process: returns (kept, rejects, report).

    Holds only each document's benchmark hits between the passes (documents themselves
    stay in ``records`` order in the outputs)."""
    index = index or NgramIndex(resolve_index(cfg))
    docs = list(records)
    hits: list[list[Hit] | None] = []
    batches: Iterable[list[Any]] = iter_batches(docs, cfg)
    if progress:
        total = -(-len(docs) // cfg.batch_docs)
        batches = track(batches, "scanning for benchmark n-grams", total=total, unit="batches")
    for batch in batches:
        hits.extend(scan_batch(index, batch))
    counts: Counter[int] = Counter()
    first: dict[int, Hit] = {}
    for doc_hits in hits:
        for h in doc_hits or ():
            counts[h.key] += 1
            first.setdefault(h.key, h)
    kept: list[dict[str, Any]] = []
    rejects: list[dict[str, Any]] = []
    invalid = 0
    for doc, doc_hits in zip(docs, hits, strict=True):
        if doc_hits is None:
            rejects.append(invalid_reject(doc, STAGE, NO_TEXT))
            invalid += 1
            continue
        reject = decide(doc, doc_hits, counts, cfg.threshold) if doc_hits else None
        if reject is None:
            kept.append(doc)
        else:
            rejects.append(reject)
    removed: Counter[str] = Counter(b for r in rejects for b in reject_benchmarks(r))
    stats = [NgramStat.from_hit(h, counts[k]) for k, h in first.items()]
    report = build_report(
        stats, dict(removed), cfg.threshold, len(docs), len(rejects), invalid, cfg.report_top
    )
    return kept, rejects, report


# ------------------------------------------------------------------------- Beam API
#
# Pass 2 never gathers anything per n-gram beyond a bounded evidence list: documents
# holding an n-gram meet its count in a combiner that keeps at most ``threshold - 1``
# document references (past that the n-gram is common usage and only its count matters),
# and the verdict reaches each document through a CoGroupByKey on the document's key,
# whose groups hold one document and its own evidence. A broadcast of every colliding
# n-gram's count (an ``AsDict`` side input in every worker process) or a join keyed by
# the n-gram (one list of every document holding "of the united states of", on one
# worker) would both grow with the corpus.


def doc_ref(doc: dict[str, Any]) -> str:
    """The join key of a document with hits: equal only for the same id and text (which
    have the same hits, so share one verdict)."""
    raw = f"{doc.get('id')}\0{doc.get('text')}".encode("utf-8", "surrogatepass")
    return hashlib.sha1(raw).hexdigest()


class _ScanFn(WritingFn):
    """Pass 1 on a batch of documents: clean ones out (main), ``(ref, (doc, hits))`` to
    "hits", records without text to "invalid" as rejects. The index is opened through
    :func:`afm.fs.localize`: a ``gs://`` / ``s3://`` index is copied to the worker's disk
    once, then memory-mapped. With ``spill_dir`` a document with hits waits for its verdict
    with its text stowed (:mod:`afm.pipelines.beam.spill`): the join by document is a
    shuffle."""

    def __init__(self, index_path: str, spill_dir: str | None = None) -> None:
        super().__init__(spill_dir)
        self.index_path = index_path
        self.index: NgramIndex | None = None

    def setup(self) -> None:
        self.index = NgramIndex(fs.localize(self.index_path))  # memory-mapped per worker
        self.clock = StageClock("decontaminate")  # the n-gram scan: the stage's own CPU

    def finish_bundle(self) -> None:
        self.clock.flush()
        super().finish_bundle()

    def process(self, batch: list[Any]) -> Iterator[Any]:
        assert self.index is not None
        hits = self.clock.call(lambda: list(scan_batch(self.index, batch)))
        for doc, doc_hits in zip(batch, hits, strict=True):
            if doc_hits is None:
                yield beam.pvalue.TaggedOutput("invalid", invalid_reject(doc, STAGE, NO_TEXT))
            elif doc_hits:
                yield beam.pvalue.TaggedOutput("hits", (doc_ref(doc), (self.stow(doc), doc_hits)))
            else:
                yield doc


# (documents holding the n-gram, its description, references of those documents or
# None once there are ``threshold`` of them)
Evidence = tuple[int, NgramStat | None, list[tuple[str, Hit]] | None]


class NgramEvidence(beam.CombineFn):
    """Per n-gram key: how many documents hold it, one description, and which documents
    (only while fewer than ``threshold``: a common n-gram rejects nothing, so its
    documents need not be named). Memory per key is bounded by ``threshold``."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold

    def create_accumulator(self) -> Evidence:
        return 0, None, []

    def add_input(self, acc: Evidence, ref_hit: tuple[str, Hit]) -> Evidence:
        count, stat, refs = acc
        count += 1
        if refs is not None:
            refs = [*refs, ref_hit] if count < self.threshold else None
        return count, stat or NgramStat.from_hit(ref_hit[1], 0), refs

    def merge_accumulators(self, accs: Iterable[Evidence]) -> Evidence:
        count, stat, refs = 0, None, []
        for c, s, r in accs:
            count += c
            stat = stat or s
            refs = None if (refs is None or r is None or count >= self.threshold) else refs + r
        return count, stat, refs

    def extract_output(self, acc: Evidence) -> Evidence:
        count, stat, refs = acc
        if stat is not None:
            stat = NgramStat(stat.key, stat.n, stat.ngram, stat.benchmark, stat.example_id,
                             stat.also, count)
        return count, stat, refs


def _hit_refs(item: tuple[str, tuple[dict[str, Any], list[Hit]]]) -> Iterator[tuple[int, tuple[str, Hit]]]:
    ref, (_doc, hits) = item
    for h in hits:
        yield h.key, (ref, h)


def _colliding(element: tuple[int, Evidence], threshold: int) -> Iterator[tuple[str, tuple[int, int]]]:
    """Evidence against each document holding an n-gram rarer than ``threshold``:
    ``(ref, (n-gram key, documents holding it))``."""
    key, (count, _stat, refs) = element
    if count < threshold and refs:
        for ref, _hit in refs:
            yield ref, (key, count)


class _DecideFn(beam.DoFn):
    """Pass 2 for one document with hits: its evidence -> kept, or a reject naming the
    rarest colliding n-gram. A document that came stowed leaves kept as it came; a reject
    is made from it read back (:meth:`Decontaminate.expand` stows the rejects again)."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold

    def start_bundle(self) -> None:
        self.reader = SpillReader()

    def finish_bundle(self) -> None:
        self.reader.close()

    def process(self, element: tuple[str, dict[str, list]]) -> Iterator[Any]:
        _ref, joined = element
        rare = dict(joined["evidence"])
        for doc, hits in joined["doc"]:
            # Keys without evidence are common usage (counted at >= threshold).
            counts = {h.key: rare.get(h.key, self.threshold) for h in hits}
            reject = None
            if rare:
                reject = decide(self.reader.restore(doc), hits, counts, self.threshold)
            if reject is None:
                yield doc
            else:
                yield beam.pvalue.TaggedOutput("rejected", reject)


class _BenchmarkSummaryFn(beam.CombineFn):
    def __init__(self, threshold: int, top: int) -> None:
        self.threshold, self.top = threshold, top

    def create_accumulator(self) -> BenchmarkSummary:
        return BenchmarkSummary(self.top)

    def add_input(self, acc: BenchmarkSummary, stat: NgramStat) -> BenchmarkSummary:
        return acc.add(stat, self.threshold)

    def merge_accumulators(self, accs: Iterable[BenchmarkSummary]) -> BenchmarkSummary:
        out = BenchmarkSummary(self.top)
        for acc in accs:
            out.merge(acc)
        return out

    def extract_output(self, acc: BenchmarkSummary) -> BenchmarkSummary:
        return acc


def _make_report(_: Any, summaries: dict[str, BenchmarkSummary], removed: dict[str, int],
                 n_in: int, n_rejected: int, n_invalid: int, threshold: int,
                 top: int) -> dict[str, Any]:
    return assemble_report(summaries, dict(removed), threshold, n_in, n_rejected, n_invalid, top)


class Decontaminate(beam.PTransform):
    """Documents -> ``{"kept", "rejected", "ngram_stats", "report"}`` (two passes; see the
    module docstring). ``ngram_stats``: one :class:`NgramStat` per benchmark n-gram seen
    in the corpus; ``report``: a single dict (see :func:`build_report`)."""

    def __init__(self, cfg: DecontamConfig, label: str | None = None, spill_dir: str | None = None) -> None:
        super().__init__(label)
        self.cfg = cfg
        self.index_path = resolve_index(cfg)  # built/checked at construction, not on workers
        # Clean documents wait for the verdicts on the others (the Flatten of kept), and
        # documents with hits for their own (the join by document): with a spill directory
        # their texts wait on disk, and the caller restores the kept documents and the rejects
        # (afm.pipelines.beam.spill.RestoreFn; the curate graph does).
        self.spill_dir = spill_dir

    def expand(self, docs: beam.PCollection) -> dict[str, beam.PCollection]:
        cfg = self.cfg
        scanned = (
            docs
            | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=cfg.batch_docs)
            | "ScanBenchmarkNgrams" >> beam.ParDo(_ScanFn(self.index_path, self.spill_dir)).with_outputs(
                "hits", "invalid", main="clean"
            )
        )
        evidence = (
            scanned.hits
            | "HitsByNgram" >> beam.FlatMap(_hit_refs)
            | "EvidencePerNgram" >> beam.CombinePerKey(NgramEvidence(cfg.threshold))
        )
        stats = evidence | "Stats" >> beam.Map(lambda kv: kv[1][1])
        against = evidence | "RareNgramEvidence" >> beam.FlatMap(_colliding, cfg.threshold)
        decided = (
            {"doc": scanned.hits, "evidence": against}
            | "JoinByDocument" >> beam.CoGroupByKey()
            | "Decide" >> beam.ParDo(_DecideFn(cfg.threshold)).with_outputs("rejected",
                                                                            main="kept")
        )
        clean, contaminated = scanned.clean, decided.rejected
        if self.spill_dir:  # both cross a flatten next: texts wait on disk (unchanged ones keep their place)
            clean = clean | "StowClean" >> beam.ParDo(StowFn(self.spill_dir))
            contaminated = contaminated | "StowRejected" >> beam.ParDo(StowFn(self.spill_dir))
        kept = (clean, decided.kept) | "Kept" >> beam.Flatten()
        rejected = (scanned.invalid, contaminated) | "Rejected" >> beam.Flatten()

        removed = (
            decided.rejected
            | "RejectBenchmarks" >> beam.FlatMap(reject_benchmarks)
            | "RemovedPerBenchmark" >> beam.combiners.Count.PerElement()
        )
        summaries = (
            stats
            | "StatsByBenchmark" >> beam.FlatMap(lambda s: [(b, s) for b in s.benchmarks])
            | "SummaryPerBenchmark" >> beam.CombinePerKey(
                _BenchmarkSummaryFn(cfg.threshold, cfg.report_top))
        )
        report = (
            docs.pipeline
            | "ReportSeed" >> beam.Create([None])
            | "Report" >> beam.Map(
                _make_report,
                beam.pvalue.AsDict(summaries),
                beam.pvalue.AsDict(removed),
                beam.pvalue.AsSingleton(docs | "CountIn" >> beam.combiners.Count.Globally()),
                beam.pvalue.AsSingleton(rejected | "CountRejected" >> beam.combiners.Count.Globally()),
                beam.pvalue.AsSingleton(
                    scanned.invalid | "CountInvalid" >> beam.combiners.Count.Globally()
                ),
                cfg.threshold,
                cfg.report_top,
            )
        )
        return {"kept": kept, "rejected": rejected, "ngram_stats": stats, "report": report}
