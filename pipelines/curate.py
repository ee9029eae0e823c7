"""The curate pipeline: crawl output (WARC) or document files -> clean Parquet shards.

    read -> extract -> language -> safety -> PII -> dedup -> quality -> decontaminate
         -> documents-NNNNN.parquet + rejects-NNNNN.parquet + manifest.json + report.html

(``--source math`` and ``--source code`` swap in the math and code filters, see
``afm.pipelines.stages.SOURCE_STAGES``). Every stage is switchable in
:class:`~afm.pipelines.curate_config.CurateConfig`; a stage whose module is not installed
is reported as unavailable and passes documents through. Every PCollection between stages
is counted, and the run ends by checking that documents in = kept + rejected per stage and
in total, and that the files written hold exactly those rows; a violation raises
:class:`~afm.pipelines.accounting.AccountingError`.

Python API (used by ``afm curate`` and ``afm demo``)::

    manifest = run_curate(["crawl/"], "corpus/", config="curate.yaml")
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afm.pipelines.curate_config import CurateConfig, load_curate_config
from afm.pipelines.stages import ResolvedStage

from afm.config import to_dict

MANIFEST = "manifest.json"
REPORT = "report.html"
STATS = "stats.json"


@dataclass
class CuratePlan:
    """Everything decided before the pipeline is built: config, stages, inputs, runner."""

    config: CurateConfig
    stages: list[ResolvedStage]
    inputs: list[str]
    skipped_inputs: list[str]
    output: str
    runner: str
    pipeline_args: list[str] = field(default_factory=list)

    @property
    def stats_path(self) -> str:
        from afm.pipelines.io_beam import TMP_DIR, join

        return join(self.output, TMP_DIR, STATS)


def plan_curate(inputs: list[str], output: Path | str, *, config: Any = None,
                runner: str = "DirectRunner", source: str | None = None,
                pipeline_args: list[str] | None = None) -> CuratePlan:
    from afm.pipelines.io_beam import is_remote, resolve_inputs
    from afm.pipelines.runners import RUNNERS

    if runner not in RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; expected one of {RUNNERS}")
    cfg = load_curate_config(config, source=source)
    stages = cfg.resolve()
    if not inputs:
        raise ValueError("no inputs given")
    files, skipped = resolve_inputs([str(i) for i in inputs], cfg.source)
    out = str(output)
    if not is_remote(out):
        out = os.path.abspath(out)
    return CuratePlan(cfg, stages, files, skipped, out, runner, list(pipeline_args or []))


def build_pipeline(plan: CuratePlan, pipeline: Any) -> dict[str, Any]:
    """Add the whole curate graph to ``pipeline``; returns a few handles (for tests)."""
    import apache_beam as beam
    from afm.pipelines.io_beam import FailOncePerBundle, ReadInputs, WriteShards, write_json
    from afm.pipelines.transforms import (
        Counts,
        apply_document_stage,
        apply_global_stage,
        apply_top_fraction_stage,
    )
    from apache_beam.pvalue import AsSingleton

    from afm.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA

    cfg = plan.config
    source = cfg.source
    faults = set(cfg.debug.fail_once_at)
    marker_dir = cfg.debug.marker_dir
    counts = Counts()
    chain: dict[str, list[str]] = {}
    stage_reports: list[Any] = []

    names = [s.name for s in plan.stages]
    # Without an extract stage (code) crawl pages cannot become documents: read rejects them.
    read = pipeline | "read" >> ReadInputs(plan.inputs, source, allow_pages="extract" in names)
    counts.add(read["items"], "read.in")
    counts.add(read["pages"], "read.pages")
    counts.add(read["docs"], "read.docs")
    counts.add(read["rejected"], "read.rejected")
    rejected_parts = [read["rejected"]]

    current = read["docs"]
    current_labels = ["read.docs"]
    for stage in plan.stages:
        if stage.name == "extract":
            stage_in, in_labels = read["pages"], ["read.pages"]
        else:
            stage_in, in_labels = current, current_labels
        counts.add(stage_in, f"{stage.name}.in")
        chain[stage.name] = in_labels
        if not stage.active and stage.kind == "page":
            # Pages cannot pass an extractor that does not run: each becomes a reject.
            rejected = stage_in | f"{stage.name} not run" >> beam.Map(
                _unextracted, source, stage.status)
            rejected_parts.append(rejected)
            counts.add(rejected, f"{stage.name}.rejected")
            kept = pipeline | f"{stage.name} nothing extracted" >> beam.Create([])
        elif not stage.active:
            kept = stage_in
        elif stage.kind == "global":
            kept, rejected, report = apply_global_stage(stage_in, stage)
            rejected_parts.append(rejected)
            counts.add(rejected, f"{stage.name}.rejected")
            if report is not None:
                stage_reports.append(report | f"{stage.name} report" >> beam.Map(
                    lambda r, name: (name, r), stage.name))
        elif getattr(stage.config, "top_fraction", None):
            kept, rejected = apply_top_fraction_stage(stage_in, stage, source)
            rejected_parts.append(rejected)
            counts.add(rejected, f"{stage.name}.rejected")
        else:
            kept, rejected = apply_document_stage(stage_in, stage, source)
            rejected_parts.append(rejected)
            counts.add(rejected, f"{stage.name}.rejected")
        if stage.name in faults:
            kept = kept | f"fault after {stage.name}" >> beam.ParDo(
                FailOncePerBundle(stage.name, marker_dir))
        counts.add(kept, f"{stage.name}.kept")
        if stage.name == "extract":
            current = (kept, read["docs"]) | "extracted + documents" >> beam.Flatten()
            current_labels = ["extract.kept", "read.docs"]
        else:
            current, current_labels = kept, [f"{stage.name}.kept"]

    documents = current
    rejects = tuple(rejected_parts) | "all rejects" >> beam.Flatten()
    out_cfg = cfg.output
    write_fault = marker_dir if "write" in faults else None
    mb = 1024 * 1024
    doc_files = documents | "write documents" >> WriteShards(
        plan.output, "documents", DOCUMENT_SCHEMA, int(out_cfg.shard_target_mb * mb),
        out_cfg.compression, fail_marker_dir=write_fault)
    file_parts = [doc_files]
    if out_cfg.write_rejects:
        file_parts.append(rejects | "write rejects" >> WriteShards(
            plan.output, "rejects", REJECT_SCHEMA, int(out_cfg.rejects_shard_target_mb * mb),
            out_cfg.compression, text_chars=out_cfg.reject_text_chars,
            fail_marker_dir=write_fault))

    count_dict = counts.collect(pipeline) | "counts" >> beam.combiners.ToDict()
    reasons = (
        rejects
        | "reason keys" >> beam.Map(lambda r: (f"reason|{r['rejected_by']}|{r['reason']}", 1))
        | "count reasons" >> beam.CombinePerKey(sum)
        | "reasons" >> beam.combiners.ToDict()
    )
    samples = (
        rejects
        | "sample keys" >> beam.Map(lambda r: (f"{r['rejected_by']}|{r['reason']}",
                                               _sample_view(r)))
        | "sample per reason" >> beam.combiners.Top.PerKey(
            max(1, out_cfg.samples_per_reason), key=lambda r: r["id"], reverse=True)
        | "samples" >> beam.combiners.ToDict()
    )
    files = tuple(file_parts) | "all files" >> beam.Flatten() | "files" >> beam.combiners.ToList()
    if stage_reports:
        reports = tuple(stage_reports) | "stage reports" >> beam.Flatten()
    else:
        reports = pipeline | "no stage reports" >> beam.Create([])
    reports = reports | "reports" >> beam.combiners.ToDict()
    stats_path = plan.stats_path
    _ = (
        pipeline
        | "stats path" >> beam.Create([stats_path])
        | "write stats" >> beam.Map(
            lambda path, c, r, s, f, sr, ch: write_json(path, {
                "counts": c, "reasons": r, "samples": s, "files": f, "stage_reports": sr,
                "chain": ch}),
            c=AsSingleton(count_dict), r=AsSingleton(reasons), s=AsSingleton(samples),
            f=AsSingleton(files), sr=AsSingleton(reports), ch=chain)
    )
    return {"documents": documents, "rejects": rejects, "chain": chain}


def _unextracted(page: dict[str, Any], source: str, status: str) -> dict[str, Any]:
    """The reject of a crawl page when the extract stage is disabled or unavailable."""
    from afm.schema import make_document, make_reject

    doc = make_document("", url=page.get("url"), source=source,
                        fetched_at=page.get("fetched_at"))
    reason = "extract_disabled" if status == "disabled" else "extract_unavailable"
    return make_reject(doc, "extract", reason, status=status)


def _sample_view(rec: dict[str, Any]) -> dict[str, Any]:
    """The part of a reject shown in report.html (text trimmed)."""
    text = rec.get("text") or ""
    return {"id": rec.get("id"), "url": rec.get("url"), "reason": rec.get("reason"),
            "details": rec.get("details"), "text": text[:400] + ("..." if len(text) > 400 else "")}


def dry_run_curate(plan: CuratePlan) -> dict[str, Any]:
    """Build the graph and check the options for the chosen runner, without running it."""
    import apache_beam as beam
    from afm.pipelines.runners import build_options, check_options

    options = build_options(plan.runner, plan.pipeline_args)
    check = check_options(plan.runner, options, plan.inputs, plan.output, submitting=False)
    pipeline = beam.Pipeline(options=options)
    build_pipeline(plan, pipeline)
    proto = pipeline.to_runner_api()  # serialises every DoFn: unpicklable code fails here
    transforms = len(proto.components.transforms)
    return {
        "dry_run": True,
        "runner": plan.runner,
        "source": plan.config.source,
        "inputs": plan.inputs,
        "skipped_inputs": plan.skipped_inputs,
        "output": plan.output,
        "stages": [s.describe() for s in plan.stages],
        "pipeline_options": options.get_all_options(drop_default=True),
        "graph_transforms": transforms,
        "option_errors": check.errors,
        "option_warnings": check.warnings,
        "ok": check.ok,
    }


def execute_curate(plan: CuratePlan) -> dict[str, Any]:
    """Run the pipeline, check the accounting, write manifest.json and report.html."""
    import apache_beam as beam
    from afm.pipelines.accounting import AccountingError, check_accounting, print_accounting
    from afm.pipelines.io_beam import TMP_DIR, join, read_json, write_json
    from afm.pipelines.report import write_report
    from afm.pipelines.runners import build_options, check_options, make_runner
    from apache_beam.io.filesystems import FileSystems

    options = build_options(plan.runner, plan.pipeline_args)
    check = check_options(plan.runner, options, plan.inputs, plan.output, submitting=True)
    if not check.ok:
        raise ValueError(f"{plan.runner} options are not valid:\n  - "
                         + "\n  - ".join(check.errors))
    # Beam's INFO lines (worker start-up, channels) would bury the run's own output.
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    started = time.time()
    tmp_dir = join(plan.output, TMP_DIR)
    if FileSystems.exists(tmp_dir):  # leftovers of a crashed earlier run
        FileSystems.delete([tmp_dir])
    pipeline = beam.Pipeline(runner=make_runner(plan.runner), options=options)
    build_pipeline(plan, pipeline)
    result = pipeline.run()
    state = result.wait_until_finish()
    if str(state) not in ("DONE", "PipelineState.DONE"):
        raise RuntimeError(f"pipeline ended in state {state}")
    elapsed = time.time() - started
    stats = read_json(plan.stats_path)
    counts = dict(stats["counts"])
    counts["read.kept"] = counts.get("read.pages", 0) + counts.get("read.docs", 0)
    stage_status = [("read", "ready")] + [(s.name, s.status) for s in plan.stages]
    files = sorted(stats["files"], key=lambda f: f["path"])
    accounting = check_accounting(counts, stage_status, stats["chain"], files,
                                  rejects_written=plan.config.output.write_rejects,
                                  reasons=stats["reasons"])
    _remove_stale_shards(plan.output, {f["path"] for f in files})
    manifest = {
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runner": plan.runner,
        "source": plan.config.source,
        "pipeline_options": options.get_all_options(drop_default=True),
        "config": to_dict(plan.config),
        "stages": [s.describe() for s in plan.stages],
        "inputs": plan.inputs,
        "skipped_inputs": plan.skipped_inputs,
        "output": plan.output,
        "funnel": [
            {"stage": s.stage, "status": s.status, "in": s.docs_in, "kept": s.kept,
             "dropped": s.rejected, "reasons": s.reasons}
            for s in accounting.stages
        ],
        "totals": {"in": accounting.total_in, "kept": accounting.kept,
                   "rejected": accounting.rejected},
        "accounting": {"ok": accounting.ok, "checks": accounting.checks,
                       "problems": accounting.problems},
        "counts": counts,
        "stage_reports": stats.get("stage_reports", {}),
        "outputs": {
            "documents": [f for f in files if f["kind"] == "documents"],
            "rejects": [f for f in files if f["kind"] == "rejects"],
            "manifest": join(plan.output, MANIFEST),
            "report": join(plan.output, REPORT),
        },
        "elapsed_s": round(elapsed, 3),
        "docs_per_s": round(accounting.total_in / elapsed, 3) if elapsed > 0 else None,
    }
    write_report(manifest, stats["samples"], manifest["outputs"]["report"])
    write_json(manifest["outputs"]["manifest"], manifest)
    if FileSystems.exists(tmp_dir):
        FileSystems.delete([tmp_dir])
    print_accounting(accounting)
    if not accounting.ok:
        raise AccountingError("accounting rule violated:\n  - "
                              + "\n  - ".join(accounting.problems))
    return manifest


def _remove_stale_shards(output: str, keep: set[str]) -> None:
    """Shards of an earlier run into the same directory that this run did not rewrite."""
    from afm.pipelines.io_beam import join
    from apache_beam.io.filesystems import FileSystems

    stale = []
    for prefix in ("documents", "rejects"):
        pattern = join(output, f"{prefix}-*.parquet")
        stale += [m.path for m in FileSystems.match([pattern])[0].metadata_list
                  if m.path not in keep]
    if stale:
        FileSystems.delete(stale)


def run_curate(
    inputs: list[str],
    output: Path | str,
    *,
    config: CurateConfig | str | dict | None = None,
    runner: str = "DirectRunner",
    source: str = "web",
    pipeline_args: list[str] | None = None,
    dry_run: bool = False,
) -> dict:
    """Curate ``inputs`` (WARC / Parquet / JSONL paths, directories or globs) into
    ``output``; returns the manifest (also written to ``output/manifest.json``).

    ``config`` is a :class:`CurateConfig`, a YAML path or a dict; ``source`` picks the
    web / code / math stage list; ``pipeline_args`` are Beam options
    (e.g. ``["--direct_num_workers=2"]`` or Dataflow's ``--project ...``). With
    ``dry_run`` the graph is built and the options are checked, nothing runs.
    Raises :class:`~afm.pipelines.accounting.AccountingError` when documents in !=
    kept + rejected.
    """
    from afm.config import print_config
    from afm.console import console, print_summary

    plan = plan_curate(inputs, output, config=config, runner=runner, source=source,
                       pipeline_args=pipeline_args)
    print_config(plan.config, title=f"curate ({plan.config.source}) config")
    for stage in plan.stages:
        color = {"ready": "green", "disabled": "yellow"}.get(stage.status, "red")
        console.print(f"  stage [bold]{stage.name:<14}[/] [{color}]{stage.status}[/]")
    if dry_run:
        report = dry_run_curate(plan)
        print_summary("curate dry run", {
            "runner": plan.runner, "inputs": len(plan.inputs),
            "graph transforms": report["graph_transforms"],
            "option errors": len(report["option_errors"]),
            "option warnings": len(report["option_warnings"]),
        })
        for w in report["option_warnings"]:
            console.print(f"[yellow]warning: {w}")
        for e in report["option_errors"]:
            console.print(f"[red]error: {e}")
        return report
    manifest = execute_curate(plan)
    print_summary("curate", {
        "runner": plan.runner,
        "inputs": len(plan.inputs),
        "documents in": manifest["totals"]["in"],
        "kept": manifest["totals"]["kept"],
        "rejected": manifest["totals"]["rejected"],
        "document shards": len(manifest["outputs"]["documents"]),
        "seconds": manifest["elapsed_s"],
        "report": manifest["outputs"]["report"],
    })
    return manifest


__all__ = ["CuratePlan", "CurateConfig", "build_pipeline", "dry_run_curate", "execute_curate",
           "plan_curate", "run_curate"]
