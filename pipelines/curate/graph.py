"""The curate graph, built as a short line of named steps:

    read inputs -> (ids) -> each stage of the source's list -> write shards -> write stats

:func:`build_pipeline` adds it to a Beam pipeline; :class:`CurateGraph` holds what the
steps share (the counted PCollections, the rejects of every stage, the chain of labels each
stage's "in" count is made of), so each step is one small method. Every PCollection between
stages is counted under ``<stage>.in`` / ``.kept`` / ``.rejected``; the run's accounting
(``afm.pipelines.beam.accounting``) checks documents in = kept + rejected from those counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from afm.pipelines.beam.ids import UniqueIds
from afm.pipelines.beam.io import (
    FailOncePerBundle,
    ReadInputs,
    WriteShards,
    join,
    should_reshuffle,
    write_json,
)
from afm.pipelines.beam.packing import unpack
from afm.pipelines.beam.progress import make_tick, stage_label
from afm.pipelines.beam.runners import LOCAL_RUNNERS, local_workers
from afm.pipelines.beam.spill import PackFn, StowFn, restore_all, spill_dir
from afm.pipelines.curate.kinds import KindCounts
from afm.pipelines.curate.stages import ResolvedStage, registry
from afm.pipelines.curate.transforms import (
    Counts,
    apply_document_stage,
    apply_global_stage,
    apply_record_stage,
    apply_top_fraction_stage,
    tag_reject,
)
from afm.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA, make_document, make_reject

STATS = ".stats.json"  # hidden: run scratch, never promoted


def build_pipeline(plan: Any, pipeline: Any, staging: str | None = None, files: Any = None
                   ) -> dict[str, Any]:
    """Add the whole curate graph of ``plan`` (a :class:`~afm.pipelines.curate.pipeline.CuratePlan`)
    to ``pipeline``, writing into ``staging`` (the run's staging directory; default
    ``<output>/.staging-dry-run`` for graph checks). ``files``: a PCollection of ``(file
    number, path)`` to read instead of ``plan.inputs`` (files made earlier in the same job:
    ``afm curate --urls``'s fetch). Returns a few handles: the global stage objects (whose
    ``commit`` runs after success), the stats path, and PCollections for tests."""

    staging = staging or join(plan.output, ".staging-dry-run")
    graph = CurateGraph(plan, pipeline, staging=staging, files=files)
    graph.read_inputs()
    for stage in plan.stages:
        graph.run_stage(stage)
    graph.stage_report_hooks()
    files = graph.write_shards(staging)
    stats_path = graph.write_stats(staging, files)
    return {"documents": graph.documents, "rejects": graph.rejects, "chain": graph.chain,
            "global_stages": graph.global_stages, "stats_path": stats_path}


@dataclass
class CurateGraph:
    """What the steps of the graph share; see the module docstring."""

    plan: Any
    pipeline: Any
    staging: str = ""  # the run's staging directory (spill files go under it)
    counts: Any = None
    chain: dict[str, list[str]] = field(default_factory=dict)
    rejected_parts: list[Any] = field(default_factory=list)
    stage_reports: list[Any] = field(default_factory=list)
    global_stages: list[Any] = field(default_factory=list)
    global_order: int = 0  # global stages met so far (their progress ticks' order)
    read: dict[str, Any] = field(default_factory=dict)
    pages: Any = None  # crawl pages not yet extracted
    pages_labels: list[str] = field(default_factory=list)
    documents: Any = None  # the documents kept so far
    labels: list[str] = field(default_factory=list)
    rejects: Any = None
    stage_rejects: dict[str, list[Any]] = field(default_factory=dict)  # of stages with a report hook
    made: Any = None  # the run's documents once every record read is one (after the page stage)
    files: Any = None  # (file number, path) listed in the job; None = plan.inputs

    def __post_init__(self) -> None:
        self.counts = Counts()
        self.kinds = KindCounts()  # what each stage kept and rejected, by kind (report.html)
        self.source = self.plan.config.source
        self.faults = set(self.plan.config.debug.fail_once_at)
        self.names = [s.name for s in self.plan.stages]
        # A page stage (extraction) turns crawl pages into documents; without one (code,
        # dedup, decontam run) pages cannot become documents and the reader rejects them.
        self.page_stage = next((s for s in self.plan.stages if s.kind == "page"), None)
        self.reporting = {s.name for s in self.plan.stages if s.active and registry()[s.name].report}
        self.spill = should_spill(self.plan.config.output.spill_texts, self.plan.runner) and bool(self.staging)

    def spill_dir(self, step: str) -> str | None:
        """Where ``step`` writes the texts it stows (:mod:`afm.pipelines.beam.spill`), or
        None when texts cross the shuffles in the records."""

        return spill_dir(self.staging, step) if self.spill else None

    def stow(self, part: Any, step: str) -> Any:
        """``part`` with its texts stowed (when spilling): for a PCollection that waits in
        the runner, e.g. one branch of a Flatten of branches made in different stages."""
        import apache_beam as beam

        directory = self.spill_dir(step)
        return part if directory is None else part | f"stow {step}" >> beam.ParDo(StowFn(directory))

    def reject(self, part: Any, stage: str) -> None:
        """``part`` holds rejects of ``stage``: counted and written with the others (and kept
        apart for the stage's report, when it has one)."""
        self.rejected_parts.append(part)
        self.counts.add(part, f"{stage}.rejected")
        self.kinds.add(part, stage, "rejected")
        if stage in self.reporting:
            self.stage_rejects.setdefault(stage, []).append(part)

    # -- reading ----------------------------------------------------------------------------
    def worker_processes(self) -> int | None:
        """The local runner's worker processes (None on other runners: they decide)."""
        options = getattr(self.pipeline, "options", None)
        if self.plan.runner != "DirectRunner" or options is None:
            return None
        return local_workers(options)

    def read_inputs(self) -> None:
        """Every input record met once: crawl pages, documents, rejects, non-documents.
        Without a page stage (code, dedup, decontam run) crawl pages cannot become
        documents: the reader rejects them."""

        cfg = self.plan.config
        spread = should_reshuffle(cfg.read.reshuffle, len(self.plan.inputs), cfg.read.reshuffle_below_files,
                                  self.worker_processes())
        start = self.pipeline if self.files is None else self.files
        read = start | "read" >> ReadInputs(
            self.plan.inputs, self.source, allow_pages=self.page_stage is not None,
            text_fields=self.plan.text_fields, reshuffle=spread,
            progress_dir=getattr(self.plan, "progress_dir", None), spill_dir=self.spill_dir("pages"))
        # "in" is counted on each part: a Flatten of them would be one more full copy of
        # the input held by the local runner, only to be counted.
        for part, label in ((read["pages"], "read.pages"), (read["docs"], "read.docs"),
                            (read["rejected"], "read.rejected")):
            self.counts.add(part, "read.in")
            self.counts.add(part, label)
        self.counts.add(read["skipped"], "read.not_documents")
        # Whether any document carries a URL: the warnings about URL-based checks (robots.txt
        # snapshots) apply only then.
        import apache_beam as beam

        self.counts.add(read["docs"] | "documents with a url" >> beam.Filter(
            lambda d: bool(d.get("url"))), "read.docs_with_url")
        self.rejected_parts.append(read["rejected"])
        self.read = read
        self.pages, self.pages_labels = read["pages"], ["read.pages"]
        self.documents, self.labels = read["docs"], ["read.docs"]
        if self.page_stage is None:
            self.unique_ids()

    def unique_ids(self) -> None:
        """The duplicate-id policy, right after documents exist (``afm.pipelines.beam.ids``):
        from here on every record read is a document."""
        import apache_beam as beam

        self.counts.add(self.documents, "ids.in")
        self.chain["ids"] = self.labels
        out = self.documents | "ids" >> UniqueIds(self.spill_dir("ids"))
        self.reject(out["rejected"] | "ids tag rejects" >> beam.Map(tag_reject, "ids"), "ids")
        self.counts.add(out["kept"], "ids.kept")
        self.documents, self.labels = out["kept"], ["ids.kept"]
        self.made = self.documents

    # -- the stages --------------------------------------------------------------------------
    def run_stage(self, stage: ResolvedStage) -> None:
        """One stage of the source's list: on pages and documents alike (a record stage), on
        pages (the page stage: extraction), or on the documents kept so far."""
        import apache_beam as beam

        if stage.kind == "record":
            self.record_stage(stage)
            return
        stage_in, in_labels = (self.pages, self.pages_labels) if stage.kind == "page" else (
            self.documents, self.labels)
        progress = getattr(self.plan, "progress_dir", None)
        if progress and stage.kind == "global" and stage.active:  # the progress line names the stage
            self.global_order += 1
            stage_in = stage_in | f"progress {stage.name}" >> make_tick(
                progress, stage_label(self.global_order, stage.name))
        self.counts.add(stage_in, f"{stage.name}.in")
        self.chain[stage.name] = in_labels
        kept = self.apply(stage, stage_in)
        if stage.active:
            self.kinds.add(kept, stage.name, "kept")
        if stage.name in self.faults:
            kept = kept | f"fault after {stage.name}" >> beam.ParDo(
                FailOncePerBundle(stage.name, self.plan.config.debug.marker_dir))
        self.counts.add(kept, f"{stage.name}.kept")
        if stage.kind == "page":
            # The documents read wait for extraction in the runner: stowed, they wait small.
            self.documents = ((self.stow(kept, "extracted"), self.stow(self.documents, "read"))
                              | "extracted + documents" >> beam.Flatten())
            self.labels = [f"{stage.name}.kept", *self.labels]
            self.unique_ids()
        else:
            self.documents, self.labels = kept, [f"{stage.name}.kept"]

    def record_stage(self, stage: ResolvedStage) -> None:
        """Right after reading (optout): on crawl pages and documents alike."""

        self.chain[stage.name] = self.pages_labels + self.labels
        self.counts.add(self.pages, f"{stage.name}.in")
        self.counts.add(self.documents, f"{stage.name}.in")
        if stage.active:
            self.pages, rejected_pages = apply_record_stage(self.pages, stage, self.source, "pages",
                                                            self.page_stage)
            self.documents, rejected_docs = apply_record_stage(self.documents, stage, self.source, "docs")
            self.reject(rejected_pages, stage.name)
            self.reject(rejected_docs, stage.name)
        for part, kind in ((self.pages, "pages"), (self.documents, "docs")):
            self.counts.add(part, f"{stage.name}.kept")
            self.counts.add(part, f"{stage.name}.kept.{kind}")
            if stage.active:
                self.kinds.add(part, stage.name, "kept")
        self.pages_labels, self.labels = [f"{stage.name}.kept.pages"], [f"{stage.name}.kept.docs"]
        if self.page_stage is None:  # no page stage follows: these are the run's documents
            self.made = self.documents

    def stage_report_hooks(self) -> None:
        """The report of every stage with a ``report`` hook (what the optout stage removed,
        per signal: :mod:`afm.pipelines.curate.optout_cost`), made from its rejects and the
        run's documents."""
        import apache_beam as beam

        for name, parts in self.stage_rejects.items():
            rejects = tuple(parts) | f"{name} rejects" >> beam.Flatten()
            report = registry()[name].hook("report")(rejects, self.made, self.pipeline)
            self.stage_reports.append(report | f"{name} report key" >> beam.Map(lambda r, n: (n, r), name))

    def apply(self, stage: ResolvedStage, stage_in: Any) -> Any:
        """The stage's kept PCollection; its rejects (and a global stage's report) recorded."""
        import apache_beam as beam

        if not stage.active and stage.kind == "page":
            # Pages cannot pass an extractor that does not run: each becomes a reject.
            self.reject(stage_in | f"{stage.name} not run" >> beam.Map(
                _unextracted, stage.name, self.source, stage.status), stage.name)
            return self.pipeline | f"{stage.name} nothing extracted" >> beam.Create([])
        if not stage.active:
            return stage_in
        if stage.kind == "global":
            kept, rejected, report, obj = apply_global_stage(stage_in, stage, self.spill_dir(stage.name))
            self.global_stages.append(obj)
            if report is not None:
                self.stage_reports.append(report | f"{stage.name} report" >> beam.Map(
                    lambda r, name: (name, r), stage.name))
        elif getattr(stage.config, "top_fraction", None):
            kept, rejected = apply_top_fraction_stage(stage_in, stage, self.source)
        else:
            kept, rejected = apply_document_stage(stage_in, stage, self.source)
        self.reject(rejected, stage.name)
        return kept

    # -- writing ------------------------------------------------------------------------------
    def write_shards(self, staging: str) -> Any:
        """Documents and rejects as Parquet shards; the list of files written. Packed right
        where they are made: what the shuffles and the flatten of all rejects carry is
        compressed bytes (and a reject's text is already trimmed)."""
        import apache_beam as beam


        out, debug = self.plan.config.output, self.plan.config.debug
        rejects_dir, documents_dir = self.spill_dir("rejects"), self.spill_dir("documents")
        self.rejects = (tuple(part | f"pack rejects {i}" >> beam.ParDo(PackFn(rejects_dir, True,
                                                                             out.reject_text_chars))
                              for i, part in enumerate(self.rejected_parts))
                        | "all rejects" >> beam.Flatten())
        fault = debug.marker_dir if "write" in self.faults else None
        mb = 1024 * 1024
        documents, progress = self.documents, getattr(self.plan, "progress_dir", None)
        if progress:  # local runners: live counts (afm.pipelines.beam.progress)

            documents = documents | "progress kept" >> make_tick(progress, "kept")
            _ = self.rejects | "progress rejected" >> make_tick(progress, "rejected")
        parts = [documents | "pack documents" >> beam.ParDo(PackFn(documents_dir)) | "write documents" >> WriteShards(
            staging, "documents", DOCUMENT_SCHEMA, int(out.shard_target_mb * mb), out.compression,
            fail_marker_dir=fault)]
        if out.write_rejects:
            parts.append(self.rejects | "write rejects" >> WriteShards(
                staging, "rejects", REJECT_SCHEMA, int(out.rejects_shard_target_mb * mb), out.compression,
                fail_marker_dir=fault))
        return tuple(parts) | "all files" >> beam.Flatten() | "files" >> beam.combiners.ToList()

    def write_stats(self, staging: str, files: Any) -> str:
        """``.stats.json`` in the staging directory: counts, reasons, sample rejects, files,
        stage reports, counts by kind and what was read but is no document; the manifest is
        made from it."""
        import apache_beam as beam
        from apache_beam.pvalue import AsSingleton

        sides = {"counts": self.counts.collect(self.pipeline) | "counts" >> beam.combiners.ToDict(),
                 "reasons": self._reasons(), "samples": self._samples(), "files": files,
                 "stage_reports": self._stage_reports(),
                 "kinds": self.kinds.collect(self.pipeline) | "kinds" >> beam.combiners.ToDict(),
                 **self._read_notes()}
        path = join(staging, STATS)
        _ = (self.pipeline | "stats path" >> beam.Create([path])
             | "write stats" >> beam.Map(_write_stats, write_json, self.chain,
                                         **{k: AsSingleton(v) for k, v in sides.items()}))
        return path

    def _reasons(self) -> Any:
        import apache_beam as beam

        return (self.rejects | "reason keys" >> beam.Map(lambda p: (f"reason|{p[2]}", 1))
                | "count reasons" >> beam.CombinePerKey(sum) | "reasons" >> beam.combiners.ToDict())

    def _samples(self) -> Any:
        import apache_beam as beam

        per_reason = max(1, self.plan.config.output.samples_per_reason)
        return (self.rejects
                | "sample keys" >> beam.Map(lambda p: (p[2], p))
                | "sample per reason" >> beam.combiners.Top.PerKey(per_reason, key=lambda p: p[0], reverse=True)
                | "sample views" >> beam.MapTuple(
                    lambda label, packed: (label, [_sample_view(r) for r in restore_all(unpack(p[3]) for p in packed)]))
                | "samples" >> beam.combiners.ToDict())

    def _stage_reports(self) -> Any:
        import apache_beam as beam

        if self.stage_reports:
            reports = tuple(self.stage_reports) | "stage reports" >> beam.Flatten()
        else:
            reports = self.pipeline | "no stage reports" >> beam.Create([])
        return reports | "reports" >> beam.combiners.ToDict()

    def _read_notes(self) -> dict[str, Any]:
        """What the reader met that is no document, and the places records were lost."""
        import apache_beam as beam

        not_documents = (self.read["skipped"] | "what keys" >> beam.Map(lambda s: (s["what"], 1))
                         | "count what" >> beam.CombinePerKey(sum) | "not documents" >> beam.combiners.ToDict())
        unknown_loss = (self.read["rejected"] | "unknown loss" >> beam.Filter(_unknown_loss)
                        | "unknown loss places" >> beam.Map(
                            lambda r: json.loads(r["details"] or "{}").get("file", "?"))
                        | "unknown loss list" >> beam.combiners.ToList())
        return {"not_documents": not_documents, "unknown_loss": unknown_loss}


def should_spill(setting: str, runner: str) -> bool:
    """Whether texts cross the shuffles on disk (``output.spill_texts``): ``auto`` = on
    the local runners, which hold every shuffle in their own memory."""

    return setting == "always" or (setting == "auto" and runner in LOCAL_RUNNERS)


def _write_stats(path: str, write_json: Any, chain: dict[str, list[str]], *, counts: Any, reasons: Any,
                 samples: Any, files: Any, stage_reports: Any, kinds: Any, not_documents: Any,
                 unknown_loss: Any) -> None:
    write_json(path, {"counts": counts, "reasons": reasons, "samples": samples, "files": files,
                      "stage_reports": stage_reports, "kinds": kinds, "not_documents": not_documents,
                      "unknown_loss": unknown_loss, "chain": chain})


def _unknown_loss(reject: dict[str, Any]) -> bool:
    """A read reject standing for an unknown number of records (e.g. a truncated tail)."""
    return '"records_lost": "unknown"' in (reject.get("details") or "")


def _unextracted(page: dict[str, Any], stage: str, source: str, status: str) -> dict[str, Any]:
    """The reject of a crawl page when the page stage is disabled or unavailable."""
    doc = make_document("", url=page.get("url"), source=source, fetched_at=page.get("fetched_at"))
    reason = f"{stage}_disabled" if status == "disabled" else f"{stage}_unavailable"
    return make_reject(doc, stage, reason, status=status)


def _sample_view(rec: dict[str, Any]) -> dict[str, Any]:
    """The part of a reject shown in report.html (text trimmed)."""
    text = rec.get("text") or ""
    return {"id": rec.get("id"), "url": rec.get("url"), "reason": rec.get("reason"),
            "details": rec.get("details"), "text": text[:400] + ("..." if len(text) > 400 else "")}


__all__ = ["STATS", "CurateGraph", "build_pipeline"]
