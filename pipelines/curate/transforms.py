"""The Beam wrappers around the stages: per-page extraction, per-document filters, global
stages, and the labelled counting behind the accounting rule.

Filters live in ``afm.filters`` and know nothing about Beam; here each is built once per
worker (``DoFn.setup``, so fastText models load once) and applied with
``afm.filters.base.apply_filter``, which turns a filter crash into a recorded reject.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from afm.filters.base import (
    apply_filter,
    apply_filter_batch,
    apply_page_filter,
    apply_record_filter,
)
from afm.filters.quality.model import QualityScoreCut
from afm.pipelines.beam.bundle_sums import SumKeysInBundle
from afm.pipelines.beam.cputime import StageClock
from afm.pipelines.beam.ids import ORIGIN
from afm.pipelines.beam.spill import RestoreFn
from afm.pipelines.curate.stages import ResolvedStage
from afm.schema import make_document

REJECTED = "rejected"


def tag_reject(rec: dict[str, Any], stage: str) -> dict[str, Any]:
    """Make ``rejected_by`` the pipeline stage (the funnel's unit); a filter that names
    itself differently keeps its name as the reason's prefix."""
    out = dict(rec)
    by = out.get("rejected_by")
    reason = out.get("reason") or "dropped"
    if by and by != stage:
        reason = f"{by}:{reason}"
    out["rejected_by"] = stage
    out["reason"] = reason
    return out


class _StageFn(beam.DoFn):
    def __init__(self, stage: ResolvedStage, source: str):
        self.stage = stage
        self.source = source
        self.kept_counter = Metrics.counter("curate", f"{stage.name}.kept")
        self.rejected_counter = Metrics.counter("curate", f"{stage.name}.rejected")
        self.clock = StageClock(stage.name)  # the stage's own CPU time (afm.pipelines.beam.cputime)

    def setup(self) -> None:
        self._impl = None

    @property
    def impl(self) -> Any:
        """The stage's instance, built on the first record (not in ``setup``, which some
        runners call when the job starts: the optout stage of ``afm curate --urls`` reads
        the snapshots its fetch writes before any page reaches it)."""
        if self._impl is None:
            self._impl = self.stage.build()
        return self._impl

    def finish_bundle(self) -> None:
        self.clock.flush()

    def _reject(self, rec: dict[str, Any]) -> beam.pvalue.TaggedOutput:
        self.rejected_counter.inc()
        return beam.pvalue.TaggedOutput(REJECTED, tag_reject(rec, self.stage.name))


class ExtractFn(_StageFn):
    """Crawl page -> document (kept) or reject (the extractor checks status, content type
    and size before parsing any HTML: cheap checks first)."""

    def process(self, page: dict[str, Any]) -> Iterator[Any]:
        doc, rejected = self.clock.call(apply_page_filter, self.impl, page, self._skeleton)
        if rejected is not None:
            yield self._reject(rejected)
            return
        doc[ORIGIN] = page.get(ORIGIN)  # input order, for the duplicate-id policy
        if self.source != "web" and doc.get("source") == "web":
            doc["source"] = self.source
        self.kept_counter.inc()
        yield doc

    def _skeleton(self, page: dict[str, Any]) -> dict[str, Any]:
        """The document record of a page that yielded no text (so its reject has an id)."""
        return make_document("", url=page.get("url"), source=self.source,
                             fetched_at=page.get("fetched_at"))


class FilterFn(_StageFn):
    """One per-document filter: kept document, or a reject with the filter's reason."""

    def process(self, doc: dict[str, Any]) -> Iterator[Any]:
        kept, rejected = self.clock.call(apply_filter, self.impl, doc)
        if rejected is not None:
            yield self._reject(rejected)
        else:
            self.kept_counter.inc()
            yield kept


class RecordFn(FilterFn):
    """A stage that runs right after reading, on crawl pages and documents alike (a
    ``record`` stage: the publishers' opt-outs): a page it drops becomes the reject of a text-less document with
    the page's URL, so its evidence is kept under the same id as an extracted one.

    ``measure``: the run's page stage; a page dropped here is then extracted (what the
    page stage would have done with it, had it been kept) and its words recorded in the
    reject's details (``text_words``): what the drop cost, for the report."""

    def __init__(self, stage: ResolvedStage, source: str, measure: ResolvedStage | None = None):
        super().__init__(stage, source)
        self.measure = measure

    def setup(self) -> None:
        super().setup()
        self.measures = self.measure is not None and self.measure.active
        self._extractor = None

    def extractor(self, page: dict[str, Any]) -> Any:
        if self._extractor is None:
            self._extractor = self.measure.build()
        return self._extractor(page)

    def _words(self, page: dict[str, Any]) -> dict[str, int]:
        """What the page stage would have extracted of a dropped page (``text_words``)."""
        try:
            decision = self.extractor(page)
        except Exception:  # noqa: BLE001 - a measurement: a page that fails extraction holds 0
            return {"text_words": 0}
        return {"text_words": int(decision.signals.get("text_words", 0)) if decision.keep else 0}

    def process(self, rec: dict[str, Any]) -> Iterator[Any]:
        is_page = "body" in rec and "text" not in rec
        if not is_page:  # a document: the plain filter
            yield from super().process(rec)
            return
        keep, rejected = self.clock.call(apply_record_filter, self.impl, rec, self._skeleton,
                                         self._words if self.measures else None)
        if keep:
            self.kept_counter.inc()
            yield rec
        else:
            yield self._reject(rejected)

    def _skeleton(self, page: dict[str, Any]) -> dict[str, Any]:
        return make_document("", url=page.get("url"), source=self.source,
                             fetched_at=page.get("fetched_at"))


class BatchFilterFn(_StageFn):
    """A per-document filter that decides a batch at once (a model scoring many texts
    in one call): a list of documents in, each kept or rejected as :class:`FilterFn`
    would."""

    def process(self, docs: list[dict[str, Any]]) -> Iterator[Any]:
        for kept, rejected in self.clock.call(apply_filter_batch, self.impl, docs):
            if rejected is not None:
                yield self._reject(rejected)
            else:
                self.kept_counter.inc()
                yield kept


def stage_batch_size(stage: ResolvedStage) -> int | None:
    """The batch a batched stage decides at once (its config's ``batch_size``), or None
    for a stage that decides one document at a time."""

    if not stage.batched:
        return None
    return max(1, int(getattr(stage.config, "batch_size", 64)))


def apply_record_stage(records: beam.PCollection, stage: ResolvedStage, source: str,
                       label: str, measure: ResolvedStage | None = None
                       ) -> tuple[beam.PCollection, beam.PCollection]:
    """A ``record`` stage over one part of what was read (``label``: pages / docs);
    ``measure``: see :class:`RecordFn`."""
    out = records | f"{stage.name} {label}" >> beam.ParDo(
        RecordFn(stage, source, measure)).with_outputs(REJECTED, main="kept")
    return out.kept, out[REJECTED]


def apply_document_stage(docs: beam.PCollection, stage: ResolvedStage, source: str
                         ) -> tuple[beam.PCollection, beam.PCollection]:
    batch = stage_batch_size(stage) if stage.kind == "document" else None
    if batch is not None:
        # Beam sizes the batches (up to the stage's batch_size) from how long each takes.
        out = (docs
               | f"{stage.name} batches" >> beam.BatchElements(min_batch_size=min(8, batch),
                                                                max_batch_size=batch)
               | stage.name >> beam.ParDo(BatchFilterFn(stage, source)).with_outputs(REJECTED,
                                                                                     main="kept"))
        return out.kept, out[REJECTED]
    fn_cls = ExtractFn if stage.kind == "page" else FilterFn
    out = docs | stage.name >> beam.ParDo(fn_cls(stage, source)).with_outputs(REJECTED,
                                                                               main="kept")
    return out.kept, out[REJECTED]


def apply_top_fraction_stage(docs: beam.PCollection, stage: ResolvedStage, source: str
                             ) -> tuple[beam.PCollection, beam.PCollection]:
    """The quality classifier with a corpus-wide cut (``top_fraction``): pass 1 scores
    every document (``quality_score``), a global approximate-quantile combine finds the
    score that keeps the top fraction (memory bounded, whatever the corpus size), pass 2
    drops documents below it (``QualityScoreCut``, no re-scoring)."""

    fraction = float(stage.config.top_fraction)
    scored, score_errors = apply_document_stage(docs, stage, source)
    resolution = 1000
    quantiles = (
        scored
        | f"{stage.name} scores" >> beam.Map(lambda d: float(d.get("quality_score") or 0.0))
        | f"{stage.name} quantiles" >> beam.ApproximateQuantiles.Globally(resolution + 1)
    )
    threshold = quantiles | f"{stage.name} cut" >> beam.Map(
        lambda q: q[min(len(q) - 1, max(0, round((1.0 - fraction) * (len(q) - 1))))]
        if q else float("-inf"))
    cut = scored | f"{stage.name} top fraction" >> beam.ParDo(
        _CutFn(stage.name), beam.pvalue.AsSingleton(threshold)
    ).with_outputs(REJECTED, main="kept")
    rejected = (score_errors, cut[REJECTED]) | f"{stage.name} rejects" >> beam.Flatten()
    _ = QualityScoreCut  # imported here so a missing module fails at graph build time
    return cut.kept, rejected


class _CutFn(beam.DoFn):
    def __init__(self, stage_name: str):
        self.stage_name = stage_name

    def process(self, doc: dict[str, Any], threshold: float) -> Iterator[Any]:
        kept, rejected = apply_filter(QualityScoreCut(threshold), doc)
        if rejected is not None:
            yield beam.pvalue.TaggedOutput(REJECTED, tag_reject(rejected, self.stage_name))
        else:
            yield kept


def apply_global_stage(docs: beam.PCollection, stage: ResolvedStage, spill_dir: str | None = None
                       ) -> tuple[beam.PCollection, beam.PCollection, beam.PCollection | None,
                                  Any]:
    """A global stage (a PTransform returning ``{"kept", "rejected"}`` and optionally a
    one-element ``"report"``); returns kept, rejected, report-or-None, and the transform
    (whose ``commit()``, if it has one, the driver calls once the run has succeeded).
    ``spill_dir``: where a stage that has a ``spill_dir`` attribute stows the texts its
    shuffles would carry (:mod:`afm.pipelines.beam.spill`)."""
    transform = stage.build()
    if spill_dir is not None and hasattr(transform, "spill_dir"):
        transform.spill_dir = spill_dir
    result = docs | stage.name >> transform
    if not isinstance(result, dict) or "kept" not in result or "rejected" not in result:
        raise TypeError(f"stage {stage.name}: transform must return {{'kept', 'rejected'}}, "
                        f"got {type(result).__name__}")
    kept, rejected = result["kept"], result["rejected"]
    if spill_dir is not None:  # a stage may hand back documents and rejects whose texts wait on disk
        kept = kept | f"{stage.name} restore texts" >> beam.ParDo(RestoreFn())
        rejected = rejected | f"{stage.name} restore reject texts" >> beam.ParDo(RestoreFn())
    rejected = rejected | f"{stage.name} tag rejects" >> beam.Map(tag_reject, stage.name)
    return kept, rejected, result.get("report"), transform


def _one_each(_record: Any, labels: list[str]) -> list[tuple[str, int]]:
    return [(label, 1) for label in labels]


class Counts:
    """Labelled exact counts of PCollections (one count per distinct PCollection).

    Counted with combiners rather than metrics: a retried bundle's output is discarded
    by the runner with its partial counts, and every runner supports combiners, while
    committed-metric support varies between runners.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[beam.PCollection, list[str]]] = {}

    def add(self, pcoll: beam.PCollection, label: str) -> None:
        entry = self._entries.setdefault(id(pcoll), (pcoll, []))
        entry[1].append(label)

    def labels(self) -> list[str]:
        return [label for _, labels in self._entries.values() for label in labels]

    def collect(self, pipeline: beam.Pipeline) -> beam.PCollection:
        """One PCollection of ``(label, count)`` (labels of empty PCollections are absent:
        read them with a default of 0). One flatten + one keyed sum keeps the graph small;
        each part sums its bundle's counts first, so one pair per label and bundle crosses
        the flatten, not one per document (:mod:`afm.pipelines.beam.bundle_sums`)."""
        parts = []
        names: set[str] = set()
        for pcoll, labels in self._entries.values():
            name = f"count {' + '.join(labels)}"
            while name in names:  # one label on several PCollections (a record stage's parts)
                name += " (more)"
            names.add(name)
            parts.append(pcoll | name >> beam.ParDo(SumKeysInBundle(_one_each, labels)))
        if not parts:
            return pipeline | "no counts" >> beam.Create([])
        return (tuple(parts) | "all counts" >> beam.Flatten()
                | "sum counts" >> beam.CombinePerKey(sum))
