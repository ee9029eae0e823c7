"""The curate pipeline: crawl output (WARC) or document files -> clean Parquet shards.

    read -> optout -> extract -> language -> safety -> PII -> dedup -> quality -> decontaminate
         -> documents-NNNNN.parquet + rejects-NNNNN.parquet + manifest.json + report.html

(``--source math`` and ``--source code`` swap in the math and code filters: each source
runs the stages of the registry, ``afm.pipelines.curate.stages``, that name it). Every stage is switchable in
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
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afm import fs
from afm.config import print_config, to_dict
from afm.console import console, print_summary
from afm.outputs import OutputDir, refuse_empty
from afm.pipelines.beam.accounting import AccountingError, check_accounting, print_accounting
from afm.pipelines.beam.io import READ_NAMESPACE, is_remote, join, read_json, resolve_inputs
from afm.pipelines.beam.logs import beam_logs, log_file, worker_logs
from afm.pipelines.beam.progress import ProgressDisplay
from afm.pipelines.beam.runners import (
    LOCAL_RUNNERS,
    build_options,
    check_options,
    check_runner_name,
    make_runner,
    run_to_completion,
)
from afm.pipelines.beam.worker_paths import WorkerPath, check_worker_paths
from afm.pipelines.curate.advice import rejection_advice
from afm.pipelines.curate.config import CurateConfig, load_curate_config
from afm.pipelines.curate.costs import TreeMemory, Usage, run_costs
from afm.pipelines.curate.graph import build_pipeline
from afm.pipelines.curate.kinds import by_kind
from afm.pipelines.curate.report import write_report
from afm.pipelines.curate.stages import ResolvedStage, check_setup, registry, run_hooks, stage_paths

MANIFEST = "manifest.json"
REPORT = "report.html"


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
    allow_empty: bool = False  # promote a run whose inputs yielded no document (else EmptyOutput)
    progress_dir: str | None = None  # set for a watched local run (afm.pipelines.beam.progress)
    show_progress: bool = True  # the live line (local runners); off for quiet runs
    worker_logs: str = ""  # Beam's logs: "file" (beside the output) or "terminal"; "" = the process's

    def build(self, pipeline: Any, staging: str | None = None) -> dict[str, Any]:
        """Add the run's graph to ``pipeline`` (:func:`build_pipeline`; ``afm curate
        --urls`` adds its fetch before it: :mod:`afm.pipelines.curate.from_urls`)."""
        return build_pipeline(self, pipeline, staging)

    def complete(self, manifest: dict[str, Any], counts: dict[str, int]) -> None:
        """After the run, before anything is promoted: what a plan adds to the manifest
        and checks beyond curate's accounting (nothing here)."""

    def kept_names(self) -> tuple[str, ...]:
        """Names in the output a run keeps and resumes (:class:`~afm.outputs.OutputDir`'s
        ``keep``; none here)."""
        return ()

    def claim(self) -> None:
        """Once the output is claimed, before the config is printed: what the plan makes
        there first (nothing here)."""

    def worker_paths(self) -> list[Any]:
        """Every path the pipeline's DoFns open (checked before submission)."""

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
                command: str = "curate", local_workers: int = 0, allow_empty: bool = False) -> CuratePlan:
    check_runner_name(runner)
    cfg = load_curate_config(config, source=source)
    stages = cfg.resolve()
    run_hooks(stages, "check")
    check_setup(stages)
    if not inputs:
        raise ValueError("no inputs given")
    files, skipped = resolve_inputs([str(i) for i in inputs], cfg.source)
    run_hooks(stages, "prepare", [str(i) for i in inputs])
    out = str(output)
    if not is_remote(out):
        out = os.path.abspath(out)
    return CuratePlan(cfg, stages, files, skipped, out, runner, list(pipeline_args or []),
                      tuple(text_fields), command, local_workers, allow_empty)


def preflight(plan: CuratePlan, *, submitting: bool) -> tuple[Any, Any]:
    """The run's pipeline options and every problem with them or with the paths its
    workers will open (:mod:`afm.pipelines.beam.worker_paths`), before anything runs."""

    options = build_options(plan.runner, plan.pipeline_args, local_workers=plan.local_workers)
    check = check_options(plan.runner, options, submitting=submitting)
    check.extend(check_worker_paths(plan.worker_paths(), plan.runner, options))
    return options, check


def refuse_unless_ok(runner: str, check: Any) -> None:
    """Raise the problems of a pre-flight check as one user error."""
    if not check.ok:
        raise ValueError(f"cannot run on {runner}:\n  - " + "\n  - ".join(check.errors))


def dry_run_curate(plan: CuratePlan) -> dict[str, Any]:
    """Build the graph and check the options for the chosen runner, without running it."""
    import apache_beam as beam

    options, check = preflight(plan, submitting=False)
    transforms = 0
    if check.ok:  # (Beam validates some options itself when a pipeline is made)
        pipeline = beam.Pipeline(options=options)
        plan.build(pipeline)  # writes nowhere: the graph is only serialised
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


    if options is None:
        options, check = preflight(plan, submitting=True)
        refuse_unless_ok(plan.runner, check)
    out = output_dir or OutputDir.prepare(plan.output)
    # Beam's INFO lines (worker start-up, channels) would bury the run's own output: they
    # go to a file beside the output (afm.pipelines.beam.logs) unless asked for.
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    log_path = log_file(plan.output, out.run_id) if (plan.worker_logs or worker_logs()) == "file" else None
    local = plan.runner in LOCAL_RUNNERS
    plan.progress_dir = tempfile.mkdtemp(prefix="afm-progress-") if local else None
    started, usage = time.time(), Usage.now()
    handles: dict[str, Any] = {"global_stages": []}
    try:
        with TreeMemory() as memory, beam_logs(log_path), ProgressDisplay(
                plan.progress_dir or tempfile.gettempdir(), plan.command,
                total_bytes=_local_bytes(plan.inputs),
                enabled=local and plan.show_progress) as progress:
            pipeline = beam.Pipeline(runner=make_runner(plan.runner, worker_log=log_path), options=options)
            handles = plan.build(pipeline, out.staging)
            result = run_to_completion(pipeline, runner=plan.runner, options=options)
        elapsed = time.time() - started
        stats = read_json(handles["stats_path"])
        accounting, counts, files = _checked_accounting(plan, stats)
        for f in files:  # where each shard will be once promoted
            f["path"] = join(plan.output, f["path"].rsplit("/", 1)[-1])
        manifest = _manifest(plan, options, accounting, counts, stats, files, elapsed,
                             out.run_id, _metrics(result))
        plan.complete(manifest, counts)
        refuse_empty(plan.command, accounting.kept, _empty_detail(plan, accounting), plan.allow_empty)
        if accounting.kept == 0:
            manifest["warnings"].append(f"no document kept (--allow-empty): {_empty_detail(plan, accounting)}")
        manifest["logs"] = log_path or "terminal"
        manifest["costs"] = run_costs(manifest["metrics"], manifest["funnel"], usage, Usage.now(),
                                      elapsed, local, memory.peak_bytes if local else 0)
        if local and plan.show_progress and progress.last.counts:
            console.print(f"{plan.command}: {progress.line()}", highlight=False, soft_wrap=True)
        write_report(manifest, stats["samples"], join(out.staging, REPORT))
        out.promote(manifest)
    except BaseException:
        out.abort()
        _each_global_stage(handles["global_stages"], "abort")
        if log_path:
            console.print(f"[yellow]Beam's logs of this run: {log_path}", highlight=False)
        raise
    finally:
        if plan.progress_dir:
            shutil.rmtree(plan.progress_dir, ignore_errors=True)
    _each_global_stage(handles["global_stages"], "commit")
    for warning in manifest["warnings"]:
        console.print(f"[bold yellow]warning: {warning}")
    return manifest


def _empty_detail(plan: CuratePlan, accounting: Any) -> str:
    """Why nothing was kept: what was read, and the commonest reasons for rejecting it."""
    reasons: dict[str, int] = {}
    for stage in accounting.stages:
        for reason, n in (stage.reasons or {}).items():
            reasons[f"{stage.stage}: {reason}"] = reasons.get(f"{stage.stage}: {reason}", 0) + n
    top = ", ".join(f"{r} {n}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:3])
    skipped = f", {len(plan.skipped_inputs)} input(s) skipped" if plan.skipped_inputs else ""
    return (f"{accounting.total_in} document(s) read from {len(plan.inputs)} input file(s){skipped}, "
            f"{accounting.rejected} rejected" + (f": {top}" if top else ""))


def _local_bytes(inputs: list[str]) -> int | None:
    """The input's size where every file is local (the progress estimate), else None."""

    if any(fs.is_remote(p) for p in inputs):
        return None
    try:
        return sum(os.path.getsize(p) for p in inputs if os.path.isfile(p)) or None
    except OSError:
        return None


def _checked_accounting(plan: CuratePlan, stats: dict[str, Any]) -> tuple[Any, dict[str, int], list[dict]]:
    """The run's counts checked against the accounting rule (documents in = kept + rejected
    per stage and in total, the files holding exactly those rows); raises
    :class:`~afm.pipelines.beam.accounting.AccountingError`, promoting nothing, when not."""

    counts = dict(stats["counts"])
    counts["read.kept"] = counts.get("read.pages", 0) + counts.get("read.docs", 0)
    stage_status = [("read", "ready")]
    if not any(s.kind == "page" for s in plan.stages):
        stage_status.append(("ids", "ready"))  # right after reading
    for s in plan.stages:
        stage_status.append((s.name, s.status))
        if s.kind == "page":
            stage_status.append(("ids", "ready"))  # once pages became documents
    files = sorted(stats["files"], key=lambda f: f["path"])
    accounting = check_accounting(counts, stage_status, stats["chain"], files,
                                  rejects_written=plan.config.output.write_rejects, reasons=stats["reasons"])
    print_accounting(accounting, [s.stage for s in accounting.stages
                                  if not _applies(plan, s.stage, s.docs_in, counts)])
    if not accounting.ok:
        raise AccountingError("accounting rule violated (nothing was promoted):\n  - "
                              + "\n  - ".join(accounting.problems))
    return accounting, counts, files


def _each_global_stage(objects: list[Any], method: str) -> None:
    """``commit`` (after the output is promoted) or ``abort`` what global stages keep
    beyond the run (the dedup index)."""
    for obj in objects:
        call = getattr(obj, method, None)
        if call is not None:
            call()


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
    for lines in run_hooks(plan.stages, "warnings", counts):
        warnings.extend(lines)
    safeguards = cfg.switched_off()
    warnings += [s.off_warning for s in registry() if s.off_flag and safeguards.get(s.off_flag) == "off"]
    return {
        "run_id": run_id,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runner": plan.runner,
        "source": cfg.source,
        "command": plan.command,
        "pipeline_options": options.get_all_options(drop_default=True),
        "config": to_dict(cfg),
        "stages": [s.describe() for s in plan.stages],
        **safeguards,  # "decontamination": on | off | not part of this command
        "inputs": plan.inputs,
        "skipped_inputs": plan.skipped_inputs,
        "output": plan.output,
        "funnel": [
            {"stage": s.stage, "status": s.status, "in": s.docs_in, "kept": s.kept,
             "dropped": s.rejected, "reasons": s.reasons,
             "applies": _applies(plan, s.stage, s.docs_in, counts)}
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
        # a stage's own report (the optout stage: pages, hosts and words removed, per signal)
        "stage_reports": dict(stats.get("stage_reports", {})),
        # what each stage kept and rejected by source, language, length and page type
        "by_kind": by_kind(stats.get("kinds") or {}, [s.name for s in plan.stages]),
        "outputs": {
            "documents": [f for f in files if f["kind"] == "documents"],
            "rejects": [f for f in files if f["kind"] == "rejects"],
            "manifest": join(plan.output, MANIFEST),
            "report": join(plan.output, REPORT),
        },
        "rejected_most": _rejected_most(accounting),
        "elapsed_s": round(elapsed, 3),
        "docs_per_s": round(accounting.total_in / elapsed, 3) if elapsed > 0 else None,
    }


def _rejected_most(accounting: Any) -> list[dict[str, Any]]:
    """The stages that rejected most, each with the setting that relaxes it."""
    from dataclasses import asdict


    funnel = [{"stage": s.stage, "in": s.docs_in, "dropped": s.rejected, "reasons": s.reasons}
              for s in accounting.stages]
    return [{**asdict(a), "line": a.line()} for a in rejection_advice(funnel)]


def _print_rejected_most(manifest: dict[str, Any]) -> None:
    most = manifest.get("rejected_most") or []
    if not most:
        return
    totals = manifest["totals"]
    share = totals["kept"] / totals["in"] if totals["in"] else 1.0
    color = "yellow" if share < 0.5 else "default"
    console.print(f"[bold {color}]kept {totals['kept']:,} of {totals['in']:,} "
                  f"({100 * share:.0f}%); rejected most:")
    for item in most:
        console.print(f"  - {item['line']}", highlight=False, markup=False)


def _applies(plan: CuratePlan, stage: str, docs_in: int, counts: dict[str, int]) -> bool:
    """Whether a stage had anything of its kind to work on: a page stage (extraction) only
    applies when crawl pages were read (document input has its text already)."""
    page_stages = {s.name for s in plan.stages if s.kind == "page"}
    return not (stage in page_stages and docs_in == 0 and not counts.get("read.pages", 0))


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
    allow_empty: bool = False,
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
    rejected, and :class:`~afm.outputs.EmptyOutput` when it kept no document (the inputs
    empty or unreadable, or every document rejected) unless ``allow_empty``; either way
    nothing is promoted (:func:`afm.outputs.refuse_empty`, the one rule).
    """


    # Everything known before any work is checked before the config is printed, so the one
    # line that matters is not below a screen of YAML: the config and inputs (plan), the
    # Beam options, and for a real run the workers' paths and the output directory.
    plan = plan_curate(inputs, output, config=config, runner=runner, source=source,
                       pipeline_args=pipeline_args, text_fields=text_fields, command=command,
                       local_workers=local_workers, allow_empty=allow_empty)
    return run_plan(plan, dry_run=dry_run, overwrite=overwrite, quiet=quiet)


def run_plan(plan: CuratePlan, *, dry_run: bool = False, overwrite: bool = False,
             quiet: bool = False) -> dict[str, Any]:
    """Run (or with ``dry_run`` check) a planned curate run: :func:`run_curate` from its
    second step, for every plan (``afm curate --urls``'s too)."""
    command = plan.command
    plan.show_progress = not quiet
    build_options(plan.runner, plan.pipeline_args, local_workers=plan.local_workers)
    if not dry_run:
        options, check = preflight(plan, submitting=True)
        refuse_unless_ok(plan.runner, check)
        out = OutputDir.prepare(plan.output, overwrite=overwrite, keep=plan.kept_names())
        plan.claim()
    if not quiet:
        _print_plan(plan, command)
    if dry_run:
        report = dry_run_curate(plan)
        _print_dry_run(plan, report, command)
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
            **_fetch_lines(manifest.get("fetch")),
            **_report_lines(manifest["stage_reports"]),
            **{s.off_flag: manifest[s.off_flag] for s in registry() if s.off_flag},
            "document shards": len(manifest["outputs"]["documents"]),
            "seconds": manifest["elapsed_s"],
            "report": manifest["outputs"]["report"],
        })
        if manifest["logs"] != "terminal":
            console.print(f"Beam's logs: {manifest['logs']}", highlight=False, markup=False)
        _print_rejected_most(manifest)
    return manifest


def _fetch_lines(fetch: dict[str, Any] | None) -> dict[str, Any]:
    """The run summary's lines of a fetch in the same job (``afm curate --urls``)."""
    if not fetch:
        return {}
    return {"URLs in": fetch["urls_in"], "URL outcomes": fetch["outcomes_out"],
            "pages fetched": fetch["pages"], "resumed (ended by an earlier run)": fetch["resumed"],
            "fetch": fetch["summary"]}


def _report_lines(reports: dict[str, Any]) -> dict[str, str]:
    """The run summary's lines from the stages' reports (their ``summary`` hooks)."""
    lines: dict[str, str] = {}
    for stage in registry():
        if stage.summary and reports.get(stage.name):
            lines.update(stage.hook("summary")(reports[stage.name]))
    return lines


def _print_plan(plan: CuratePlan, command: str) -> None:
    print_config(plan.config, title=f"{command} ({plan.config.source}) config")
    for stage in plan.stages:
        color = {"ready": "green", "disabled": "yellow"}.get(stage.status, "red")
        console.print(f"  stage [bold]{stage.name:<14}[/] [{color}]{stage.status}[/]")


def _print_dry_run(plan: CuratePlan, report: dict[str, Any], command: str) -> None:
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

__all__ = ["CuratePlan", "CurateConfig", "build_pipeline", "dry_run_curate", "execute_curate",
           "plan_curate", "run_curate", "run_plan"]
