"""The curate pipeline: crawl output (WARC) or document files -> clean Parquet shards.

    read -> optout -> extract -> language -> safety -> PII -> dedup -> quality -> decontaminate
         -> documents-NNNNN.parquet + rejects-NNNNN.parquet + manifest.json + report.html

(``--source math`` and ``--source code`` swap in the math and code filters, see
``afm.pipelines.curate.stages.SOURCE_STAGES``). Every stage is switchable in
:class:`~afm.pipelines.curate.config.CurateConfig`; a stage whose module is not installed
is reported as unavailable and passes documents through. Every PCollection between stages
is counted, and the run ends by checking that documents in = kept + rejected per stage and
in total, and that the files written hold exactly those rows; a violation raises
:class:`~afm.pipelines.beam.accounting.AccountingError`.

Python API (used by ``afm curate`` and ``afm demo``)::

    manifest = run_curate(["crawl/"], "corpus/", config="curate.yaml")
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afm.pipelines.curate.config import CurateConfig, load_curate_config
from afm.pipelines.curate.stages import ResolvedStage

from afm.config import to_dict

MANIFEST = "manifest.json"
REPORT = "report.html"
STATS = ".stats.json"  # hidden: run scratch, never promoted


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
    text_fields: tuple[str, ...] = ()  # build `text` from these record fields (SFT files)
    command: str = "curate"
    local_workers: int = 0  # local runner processes unless the Beam options say (0 = cores)

    def worker_paths(self) -> list[Any]:
        """Every path the pipeline's DoFns open (checked before submission)."""
        from afm.pipelines.beam.worker_paths import WorkerPath
        from afm.pipelines.curate.stages import stage_paths

        paths = [WorkerPath("input", p) for p in self.inputs]
        paths.append(WorkerPath("output", self.output, "write"))
        paths += stage_paths(self.stages)
        if self.config.debug.marker_dir:
            paths.append(WorkerPath("fault marker directory", self.config.debug.marker_dir,
                                    "write"))
        return paths


def plan_curate(inputs: list[str], output: Path | str, *, config: Any = None,
                runner: str = "DirectRunner", source: str | None = None,
                pipeline_args: list[str] | None = None, text_fields: tuple[str, ...] = (),
                command: str = "curate", local_workers: int = 0) -> CuratePlan:
    from afm.pipelines.beam.io import is_remote, resolve_inputs
    from afm.pipelines.beam.runners import check_runner_name

    check_runner_name(runner)
    cfg = load_curate_config(config, source=source)
    cfg.check_runnable()
    stages = cfg.resolve()
    if not inputs:
        raise ValueError("no inputs given")
    files, skipped = resolve_inputs([str(i) for i in inputs], cfg.source)
    _crawl_snapshots(stages, [str(i) for i in inputs])
    _check_snapshots(stages)
    out = str(output)
    if not is_remote(out):
        out = os.path.abspath(out)
    return CuratePlan(cfg, stages, files, skipped, out, runner, list(pipeline_args or []),
                      tuple(text_fields), command, local_workers)


def _crawl_snapshots(stages: list[ResolvedStage], inputs: list[str]) -> None:
    """With no snapshots configured, the optout stage reads the robots.txt / tdmrep.json
    snapshots of the crawl directories it is given (their ``robotstxt/``)."""
    from afm.crawler.snapshots import SNAPSHOT_DIR

    from afm import fs

    for stage in stages:
        if stage.name != "optout" or not stage.active or stage.config.snapshots:
            continue
        stage.config.snapshots = [
            p if fs.is_remote(p) else os.path.abspath(p) for p in inputs
            if not fs.has_glob(p) and fs.isdir(p) and fs.isdir(fs.join(p, SNAPSHOT_DIR))]


def _check_snapshots(stages: list[ResolvedStage]) -> None:
    """Missing, unreadable or damaged-beyond-attribution snapshot sources are one-line
    errors here, before any work, not failures inside a worker: local ones are read
    whole (the workers read them again), remote ones are listed."""
    from afm.crawler.snapshots import load_index, source_files

    from afm import fs

    for stage in stages:
        if stage.name != "optout" or not stage.active or not stage.config.snapshots:
            continue
        paths = list(stage.config.snapshots)
        if any(fs.is_remote(p) for p in paths):
            source_files(paths)
        else:
            load_index(paths)


def preflight(plan: CuratePlan, *, submitting: bool) -> tuple[Any, Any]:
    """The run's pipeline options and every problem with them or with the paths its
    workers will open (:mod:`afm.pipelines.beam.worker_paths`), before anything runs."""
    from afm.pipelines.beam.runners import build_options, check_options
    from afm.pipelines.beam.worker_paths import check_worker_paths

    options = build_options(plan.runner, plan.pipeline_args, local_workers=plan.local_workers)
    check = check_options(plan.runner, options, submitting=submitting)
    check.extend(check_worker_paths(plan.worker_paths(), plan.runner, options))
    return options, check


def refuse_unless_ok(runner: str, check: Any) -> None:
    """Raise the problems of a pre-flight check as one user error."""
    if not check.ok:
        raise ValueError(f"cannot run on {runner}:\n  - " + "\n  - ".join(check.errors))


def build_pipeline(plan: CuratePlan, pipeline: Any, staging: str | None = None
                   ) -> dict[str, Any]:
    """Add the whole curate graph to ``pipeline``, writing into ``staging`` (the run's
    staging directory; default ``<output>/.staging-dry-run`` for graph checks). Returns
    a few handles: the global stage objects (whose ``commit`` runs after success), the
    stats path, and PCollections for tests."""
    import apache_beam as beam
    from afm.pipelines.beam.ids import UniqueIds
    from afm.pipelines.beam.io import (
        FailOncePerBundle,
        ReadInputs,
        WriteShards,
        join,
        should_reshuffle,
        write_json,
    )
    from afm.pipelines.beam.packing import pack_record, pack_reject, unpack
    from afm.pipelines.curate.transforms import (
        Counts,
        apply_document_stage,
        apply_global_stage,
        apply_record_stage,
        apply_top_fraction_stage,
        tag_reject,
    )
    from apache_beam.pvalue import AsSingleton

    from afm.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA

    cfg = plan.config
    source = cfg.source
    staging = staging or join(plan.output, ".staging-dry-run")
    faults = set(cfg.debug.fail_once_at)
    marker_dir = cfg.debug.marker_dir
    counts = Counts()
    chain: dict[str, list[str]] = {}
    stage_reports: list[Any] = []
    global_stages: list[Any] = []

    names = [s.name for s in plan.stages]
    # Without an extract stage (code, dedup, decontam run) crawl pages cannot become
    # documents: the reader rejects them.
    spread = should_reshuffle(cfg.read.reshuffle, len(plan.inputs),
                              cfg.read.reshuffle_below_files)
    read = pipeline | "read" >> ReadInputs(plan.inputs, source, allow_pages="extract" in names,
                                          text_fields=plan.text_fields, reshuffle=spread)
    # "in" is counted on each part: a Flatten of them would be one more full copy of the
    # input held by the local runner, only to be counted.
    for part, label in ((read["pages"], "read.pages"), (read["docs"], "read.docs"),
                        (read["rejected"], "read.rejected")):
        counts.add(part, "read.in")
        counts.add(part, label)
    counts.add(read["skipped"], "read.not_documents")
    rejected_parts = [read["rejected"]]

    def unique_ids(docs: Any, labels: list[str]) -> tuple[Any, list[str]]:
        """The duplicate-id policy, right after documents exist (see pipelines/beam/ids.py)."""
        counts.add(docs, "ids.in")
        chain["ids"] = labels
        out = docs | "ids" >> UniqueIds()
        rejected = out["rejected"] | "ids tag rejects" >> beam.Map(tag_reject, "ids")
        rejected_parts.append(rejected)
        counts.add(rejected, "ids.rejected")
        counts.add(out["kept"], "ids.kept")
        return out["kept"], ["ids.kept"]

    current = read["docs"]
    current_labels = ["read.docs"]
    pages, pages_labels = read["pages"], ["read.pages"]
    if "extract" not in names:
        current, current_labels = unique_ids(current, current_labels)
    for stage in plan.stages:
        if stage.kind == "record":
            # Right after reading (optout): on crawl pages and documents alike.
            chain[stage.name] = pages_labels + current_labels
            counts.add(pages, f"{stage.name}.in")
            counts.add(current, f"{stage.name}.in")
            if stage.active:
                pages, rejected_pages = apply_record_stage(pages, stage, source, "pages")
                current, rejected_docs = apply_record_stage(current, stage, source, "docs")
                for part in (rejected_pages, rejected_docs):
                    rejected_parts.append(part)
                    counts.add(part, f"{stage.name}.rejected")
            counts.add(pages, f"{stage.name}.kept")
            counts.add(current, f"{stage.name}.kept")
            counts.add(pages, f"{stage.name}.kept.pages")
            counts.add(current, f"{stage.name}.kept.docs")
            pages_labels = [f"{stage.name}.kept.pages"]
            current_labels = [f"{stage.name}.kept.docs"]
            continue
        if stage.name == "extract":
            stage_in, in_labels = pages, pages_labels
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
            kept, rejected, report, obj = apply_global_stage(stage_in, stage)
            global_stages.append(obj)
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
            current = (kept, current) | "extracted + documents" >> beam.Flatten()
            current, current_labels = unique_ids(current, ["extract.kept", *current_labels])
        else:
            current, current_labels = kept, [f"{stage.name}.kept"]

    documents = current
    out_cfg = cfg.output
    # Packed right where they are made: what the shuffles and the flatten of all
    # rejects carry is compressed bytes (and a reject's text is already trimmed).
    chars = out_cfg.reject_text_chars
    rejects = (
        tuple(part | f"pack rejects {i}" >> beam.Map(pack_reject, chars)
              for i, part in enumerate(rejected_parts))
        | "all rejects" >> beam.Flatten()
    )
    write_fault = marker_dir if "write" in faults else None
    mb = 1024 * 1024
    doc_files = (
        documents
        | "pack documents" >> beam.Map(pack_record)
        | "write documents" >> WriteShards(
            staging, "documents", DOCUMENT_SCHEMA, int(out_cfg.shard_target_mb * mb),
            out_cfg.compression, fail_marker_dir=write_fault)
    )
    file_parts = [doc_files]
    if out_cfg.write_rejects:
        file_parts.append(rejects | "write rejects" >> WriteShards(
            staging, "rejects", REJECT_SCHEMA, int(out_cfg.rejects_shard_target_mb * mb),
            out_cfg.compression, fail_marker_dir=write_fault))

    count_dict = counts.collect(pipeline) | "counts" >> beam.combiners.ToDict()
    reasons = (
        rejects
        | "reason keys" >> beam.Map(lambda p: (f"reason|{p[2]}", 1))
        | "count reasons" >> beam.CombinePerKey(sum)
        | "reasons" >> beam.combiners.ToDict()
    )
    not_documents = (
        read["skipped"]
        | "what keys" >> beam.Map(lambda s: (s["what"], 1))
        | "count what" >> beam.CombinePerKey(sum)
        | "not documents" >> beam.combiners.ToDict()
    )
    unknown_loss = (
        read["rejected"]
        | "unknown loss" >> beam.Filter(_unknown_loss)
        | "unknown loss places" >> beam.Map(
            lambda r: json.loads(r["details"] or "{}").get("file", "?"))
        | "unknown loss list" >> beam.combiners.ToList()
    )
    samples = (
        rejects
        | "sample keys" >> beam.Map(lambda p: (p[2], p))
        | "sample per reason" >> beam.combiners.Top.PerKey(
            max(1, out_cfg.samples_per_reason), key=lambda p: p[0], reverse=True)
        | "sample views" >> beam.MapTuple(
            lambda label, packed: (label, [_sample_view(unpack(p[3])) for p in packed]))
        | "samples" >> beam.combiners.ToDict()
    )
    files = tuple(file_parts) | "all files" >> beam.Flatten() | "files" >> beam.combiners.ToList()
    if stage_reports:
        reports = tuple(stage_reports) | "stage reports" >> beam.Flatten()
    else:
        reports = pipeline | "no stage reports" >> beam.Create([])
    reports = reports | "reports" >> beam.combiners.ToDict()
    stats_path = join(staging, STATS)
    _ = (
        pipeline
        | "stats path" >> beam.Create([stats_path])
        | "write stats" >> beam.Map(
            lambda path, c, r, s, f, sr, nd, ul, ch: write_json(path, {
                "counts": c, "reasons": r, "samples": s, "files": f, "stage_reports": sr,
                "not_documents": nd, "unknown_loss": ul, "chain": ch}),
            c=AsSingleton(count_dict), r=AsSingleton(reasons), s=AsSingleton(samples),
            f=AsSingleton(files), sr=AsSingleton(reports), nd=AsSingleton(not_documents),
            ul=AsSingleton(unknown_loss), ch=chain)
    )
    return {"documents": documents, "rejects": rejects, "chain": chain,
            "global_stages": global_stages, "stats_path": stats_path}


def _unknown_loss(reject: dict[str, Any]) -> bool:
    """A read reject standing for an unknown number of records (e.g. a truncated tail)."""
    return '"records_lost": "unknown"' in (reject.get("details") or "")


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

    options, check = preflight(plan, submitting=False)
    transforms = 0
    if check.ok:  # (Beam validates some options itself when a pipeline is made)
        pipeline = beam.Pipeline(options=options)
        build_pipeline(plan, pipeline)  # writes nowhere: the graph is only serialised
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


def execute_curate(plan: CuratePlan, output_dir: Any = None, options: Any = None
                   ) -> dict[str, Any]:
    """Run the pipeline into a staging directory, check the accounting, and only then
    promote the shards and write manifest.json, report.html and ``_SUCCESS``
    (:mod:`afm.outputs`); commit what global stages keep beyond the run (the dedup index)
    last. ``output_dir``: an :class:`~afm.outputs.OutputDir` claimed before (default: one
    claimed here, refusing a non-empty output); ``options``: from :func:`preflight`
    (default: checked here)."""
    import apache_beam as beam
    from afm.pipelines.beam.accounting import AccountingError, check_accounting, print_accounting
    from afm.pipelines.beam.io import join, read_json
    from afm.pipelines.beam.runners import make_runner, run_to_completion
    from afm.pipelines.curate.report import write_report

    from afm.console import console
    from afm.outputs import OutputDir

    if options is None:
        options, check = preflight(plan, submitting=True)
        refuse_unless_ok(plan.runner, check)
    out = output_dir or OutputDir.prepare(plan.output)
    # Beam's INFO lines (worker start-up, channels) would bury the run's own output.
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    started = time.time()
    handles: dict[str, Any] = {"global_stages": []}
    try:
        pipeline = beam.Pipeline(runner=make_runner(plan.runner), options=options)
        handles = build_pipeline(plan, pipeline, out.staging)
        result = run_to_completion(pipeline)
        elapsed = time.time() - started
        stats = read_json(handles["stats_path"])
        counts = dict(stats["counts"])
        counts["read.kept"] = counts.get("read.pages", 0) + counts.get("read.docs", 0)
        stage_status = [("read", "ready")]
        if not any(s.name == "extract" for s in plan.stages):
            stage_status.append(("ids", "ready"))  # right after reading
        for s in plan.stages:
            stage_status.append((s.name, s.status))
            if s.name == "extract":
                stage_status.append(("ids", "ready"))  # once pages became documents
        files = sorted(stats["files"], key=lambda f: f["path"])
        accounting = check_accounting(counts, stage_status, stats["chain"], files,
                                      rejects_written=plan.config.output.write_rejects,
                                      reasons=stats["reasons"])
        print_accounting(accounting)
        if not accounting.ok:
            raise AccountingError("accounting rule violated (nothing was promoted):\n  - "
                                  + "\n  - ".join(accounting.problems))
        for f in files:  # where each shard will be once promoted
            f["path"] = join(plan.output, f["path"].rsplit("/", 1)[-1])
        manifest = _manifest(plan, options, accounting, counts, stats, files, elapsed,
                             out.run_id, _metrics(result))
        write_report(manifest, stats["samples"], join(out.staging, REPORT))
        out.promote(manifest)
    except BaseException:
        out.abort()
        for obj in handles["global_stages"]:
            abort = getattr(obj, "abort", None)
            if abort is not None:
                abort()
        raise
    for obj in handles["global_stages"]:
        commit = getattr(obj, "commit", None)
        if commit is not None:
            commit()
    if manifest["decontamination"] == "off":
        console.print("[bold yellow]decontamination: off (the config turned the stage off); "
                      "this corpus is NOT checked against benchmarks")
    if manifest["warnings"]:
        for warning in manifest["warnings"]:
            console.print(f"[bold yellow]warning: {warning}")
    return manifest


def _metrics(result: Any) -> dict[str, Any]:
    """The run's reader and stage counters (informational; the accounting uses exact
    combiner counts). Empty when the runner cannot report metrics."""
    from apache_beam.metrics.metric import MetricsFilter

    out: dict[str, Any] = {}
    try:
        queried = result.metrics().query(MetricsFilter())
    except Exception:  # noqa: BLE001 - metrics are optional on some runners
        return out
    for c in queried["counters"]:
        value = c.committed if c.committed is not None else c.attempted
        key = f"{c.key.metric.namespace}/{c.key.metric.name}"
        out[key] = out.get(key, 0) + (value or 0)
    for d in queried["distributions"]:
        value = d.committed if d.committed is not None else d.attempted
        if value is not None and value.count:
            out[f"{d.key.metric.namespace}/{d.key.metric.name}.max"] = value.max
            out[f"{d.key.metric.namespace}/{d.key.metric.name}.count"] = value.count
    return dict(sorted(out.items()))


def _manifest(plan: CuratePlan, options: Any, accounting: Any, counts: dict[str, int],
              stats: dict[str, Any], files: list[dict[str, Any]], elapsed: float,
              run_id: str, metrics: dict[str, Any]) -> dict[str, Any]:
    from afm.pipelines.beam.io import READ_NAMESPACE, join

    cfg = plan.config
    notes = {k.split("/", 1)[1][len("note."):]: v for k, v in metrics.items()
             if k.startswith(f"{READ_NAMESPACE}/note.")}
    warnings = []
    if stats.get("unknown_loss"):
        places = sorted(set(stats["unknown_loss"]))
        warnings.append(
            f"{len(stats['unknown_loss'])} damaged stretch(es) of input whose number of "
            f"records cannot be known (truncated or corrupt tails) in {len(places)} file(s), "
            f"e.g. {places[0]}; each is one reject in the count, but more records may have "
            "been lost there")
    optout = next((s for s in plan.stages if s.name == "optout" and s.active), None)
    if optout is not None and not optout.config.snapshots and (
            optout.config.robots or optout.config.tdmrep):
        warnings.append(
            "optout: no robots.txt / tdmrep.json snapshots (no --robots-snapshots, and no "
            "input is a crawl directory with robotstxt/): only the pages' own noai / TDM "
            "signals and the domain list were checked")
    if "decontaminate" in cfg.stage_names():
        decontam = "off" if cfg.decontamination_off else "on"
    else:
        decontam = "not part of this command"
    return {
        "run_id": run_id,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runner": plan.runner,
        "source": cfg.source,
        "command": plan.command,
        "pipeline_options": options.get_all_options(drop_default=True),
        "config": to_dict(cfg),
        "stages": [s.describe() for s in plan.stages],
        "decontamination": decontam,
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
        "not_documents": stats.get("not_documents", {}),
        "read_notes": notes,
        "warnings": warnings,
        "counts": counts,
        "metrics": metrics,
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


def run_curate(
    inputs: list[str],
    output: Path | str,
    *,
    config: CurateConfig | str | dict | None = None,
    runner: str = "DirectRunner",
    source: str | None = None,
    pipeline_args: list[str] | None = None,
    dry_run: bool = False,
    overwrite: bool = False,
    text_fields: tuple[str, ...] = (),
    command: str = "curate",
    quiet: bool = False,
    local_workers: int = 0,
) -> dict:
    """Curate ``inputs`` (WARC / Parquet / JSONL paths, directories or globs) into
    ``output``; returns the manifest (also written to ``output/manifest.json``).

    ``config`` is a :class:`CurateConfig`, a YAML path or a dict; ``source`` picks the
    web / code / math stage list (default: the config's); ``pipeline_args`` are Beam
    options (e.g. ``["--direct_num_workers=2"]`` or Dataflow's ``--project ...``). With
    ``dry_run`` the graph is built and the options are checked, nothing runs. The output
    directory must be empty unless ``overwrite`` (it is checked, and must be writable,
    before anything is computed). Raises
    :class:`~afm.pipelines.beam.accounting.AccountingError` when documents in != kept +
    rejected, and then nothing is promoted.
    """
    from afm.pipelines.beam.runners import build_options

    from afm.config import print_config
    from afm.console import console, print_summary
    from afm.outputs import OutputDir

    # Everything known before any work is checked before the config is printed, so the one
    # line that matters is not below a screen of YAML: the config and inputs (plan), the
    # Beam options, and for a real run the workers' paths and the output directory.
    plan = plan_curate(inputs, output, config=config, runner=runner, source=source,
                       pipeline_args=pipeline_args, text_fields=text_fields, command=command,
                       local_workers=local_workers)
    build_options(plan.runner, plan.pipeline_args, local_workers=plan.local_workers)
    if not dry_run:
        options, check = preflight(plan, submitting=True)
        refuse_unless_ok(plan.runner, check)
        out = OutputDir.prepare(plan.output, overwrite=overwrite)
    if not quiet:
        print_config(plan.config, title=f"{command} ({plan.config.source}) config")
        for stage in plan.stages:
            color = {"ready": "green", "disabled": "yellow"}.get(stage.status, "red")
            console.print(f"  stage [bold]{stage.name:<14}[/] [{color}]{stage.status}[/]")
    if dry_run:
        report = dry_run_curate(plan)
        print_summary(f"{command} dry run", {
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
    for warning in check.warnings:
        console.print(f"[yellow]warning: {warning}")
    manifest = execute_curate(plan, out, options)
    if not quiet:
        print_summary(command, {
            "runner": plan.runner,
            "inputs": len(plan.inputs),
            "documents in": manifest["totals"]["in"],
            "kept": manifest["totals"]["kept"],
            "rejected": manifest["totals"]["rejected"],
            "not documents (e.g. WARC requests)": sum(manifest["not_documents"].values()),
            "decontamination": manifest["decontamination"],
            "document shards": len(manifest["outputs"]["documents"]),
            "seconds": manifest["elapsed_s"],
            "report": manifest["outputs"]["report"],
        })
    return manifest


__all__ = ["CuratePlan", "CurateConfig", "build_pipeline", "dry_run_curate", "execute_curate",
           "plan_curate", "run_curate"]
