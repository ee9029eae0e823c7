"""An ``afm fetch`` run: plan, pre-flight, run, check, summary.

    run_fetch(["urls.txt"], "fetched/", config={"allow_private": True})

The output is a crawl directory (the crawler's layout: ``warc/``, ``index/``,
``robotstxt/``, ``state/``; :mod:`afm.crawler.batch.store`), written in place and resumable:
a rerun into the same directory first keeps the complete records of files a killed run
left open (:func:`~afm.crawler.batch.store.salvage_open_files`), then fetches only the URLs
no earlier run ended (timeouts, DNS failures and unavailable robots.txt are asked again).
``summary.json`` (as the crawler's) ends a run: URLs in, every outcome's count (URLs in =
outcomes out, or the run fails), hosts, and the per-host report (``report/hosts-*.parquet``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from afm import fs
from afm.config import load_config, print_config, to_dict
from afm.console import console, print_summary
from afm.crawler.batch.config import FetchConfig
from afm.crawler.batch.store import STATE_DIR, salvage_open_files
from afm.errors import UserError
from afm.outputs import new_run_id
from afm.pipelines.beam.accounting import AccountingError
from afm.pipelines.beam.io import read_json
from afm.pipelines.beam.logs import beam_logs, log_file, worker_logs
from afm.pipelines.beam.progress import ProgressDisplay, Snapshot
from afm.pipelines.beam.runners import (
    LOCAL_RUNNERS,
    build_options,
    check_options,
    check_runner_name,
    make_runner,
    run_to_completion,
)
from afm.pipelines.beam.worker_paths import WorkerPath, check_worker_paths
from afm.pipelines.fetch.graph import build_fetch_graph
from afm.pipelines.fetch.transforms import previous_outcomes
from afm.pipelines.fetch.urls import resolve_lists

SUMMARY = "summary.json"


@dataclass
class FetchPlan:
    """Everything decided before the graph is built."""

    config: FetchConfig
    inputs: list[str]
    output: str
    runner: str = "DirectRunner"
    pipeline_args: list[str] = field(default_factory=list)
    previous: list[str] = field(default_factory=list)  # earlier runs' outcome files (resume)
    local_workers: int = 0
    progress_dir: str | None = None
    show_progress: bool = True

    def worker_paths(self) -> list[WorkerPath]:
        return [*(WorkerPath("URL list", p) for p in self.inputs),
                WorkerPath("output", self.output, "write")]


def load_fetch_config(config: FetchConfig | str | dict | None = None,
                      overrides: tuple[str, ...] | list[str] = ()) -> FetchConfig:
    if isinstance(config, FetchConfig) and not overrides:
        return config
    base = to_dict(config) if isinstance(config, FetchConfig) else config
    cfg = load_config(FetchConfig, base, list(overrides))
    cfg.check()
    return cfg


def plan_fetch(urls: list[str], output: str, *, config: Any = None, runner: str = "DirectRunner",
               pipeline_args: list[str] | None = None, local_workers: int = 0) -> FetchPlan:
    check_runner_name(runner)
    cfg = config if isinstance(config, FetchConfig) else load_fetch_config(config)
    cfg.check()
    if not urls:
        raise UserError("no URL list given (--urls FILE)")
    out = output if fs.is_remote(output) else os.path.abspath(output)
    inputs = resolve_lists([str(u) for u in urls])
    return FetchPlan(cfg, inputs, out, runner, list(pipeline_args or []), local_workers=local_workers)


def preflight(plan: FetchPlan, *, submitting: bool) -> tuple[Any, Any]:
    options = build_options(plan.runner, plan.pipeline_args, local_workers=plan.local_workers)
    check = check_options(plan.runner, options, submitting=submitting)
    check.extend(check_worker_paths(plan.worker_paths(), plan.runner, options))
    return options, check


def claim_output(plan: FetchPlan, overwrite: bool) -> dict[str, int]:
    """An empty directory, or an earlier fetch's to resume (its open files salvaged);
    anything else is refused unless ``overwrite``."""
    names = [n for n in fs.list_dir(plan.output)] if fs.isdir(plan.output) else []
    ours = fs.isdir(fs.join(plan.output, STATE_DIR))
    if names and overwrite:
        fs.delete([fs.join(plan.output, n) for n in names])
        names, ours = [], False
    if names and not ours:
        raise UserError(f"{plan.output} is not empty and holds no earlier afm fetch to resume; "
                        "choose an empty directory, or pass --overwrite to replace its contents")
    fs.mkdirs(fs.join(plan.output, STATE_DIR))
    salvaged = salvage_open_files(plan.output) if ours else {"files": 0, "records": 0}
    plan.previous = previous_outcomes(plan.output) if ours else []
    return salvaged


def dry_run_fetch(plan: FetchPlan) -> dict[str, Any]:
    import apache_beam as beam

    options, check = preflight(plan, submitting=False)
    transforms = 0
    if check.ok:
        pipeline = beam.Pipeline(options=options)
        build_fetch_graph(plan, pipeline, fs.join(plan.output, STATE_DIR, "dry-run.json"))
        transforms = len(pipeline.to_runner_api().components.transforms)
    return {"dry_run": True, "runner": plan.runner, "inputs": plan.inputs, "output": plan.output,
            "pipeline_options": options.get_all_options(drop_default=True),
            "graph_transforms": transforms, "option_errors": check.errors,
            "option_warnings": check.warnings, "ok": check.ok}


def fetch_line(snap: Snapshot, elapsed: float, _total: Any = None) -> str:
    """The progress line of a local run."""
    c = snap.counts
    rate = c.get("fetched", 0) / elapsed if elapsed > 0 else 0.0
    return " · ".join([f"read {c.get('read', 0):,} URLs", f"ended {c.get('ended', 0):,}",
                       f"fetched {c.get('fetched', 0):,}", f"errors {c.get('errors', 0):,}",
                       f"slices {c.get('slices', 0):,}", f"{rate:,.1f} pages/s",
                       f"{int(elapsed) // 60}:{int(elapsed) % 60:02d} elapsed"])


def execute_fetch(plan: FetchPlan, options: Any, salvaged: dict[str, int]) -> dict[str, Any]:
    import logging

    import apache_beam as beam

    run_id = new_run_id()
    stats_path = fs.join(plan.output, STATE_DIR, f"run-{run_id}.json")
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    log_path = log_file(plan.output, run_id) if worker_logs() == "file" else None
    local = plan.runner in LOCAL_RUNNERS
    plan.progress_dir = tempfile.mkdtemp(prefix="afm-progress-") if local else None
    started = time.time()
    cpu0 = _cpu_seconds()
    try:
        with beam_logs(log_path), ProgressDisplay(plan.progress_dir or tempfile.gettempdir(), "fetch",
                                                  enabled=local and plan.show_progress,
                                                  line_of=fetch_line) as progress:
            pipeline = beam.Pipeline(runner=make_runner(plan.runner, worker_log=log_path), options=options)
            build_fetch_graph(plan, pipeline, stats_path)
            run_to_completion(pipeline, runner=plan.runner, options=options)
        if local and plan.show_progress and progress.last.counts:
            console.print(f"fetch: {fetch_line(progress.last, time.time() - started)}", highlight=False)
    finally:
        if plan.progress_dir:
            shutil.rmtree(plan.progress_dir, ignore_errors=True)
    elapsed = time.time() - started
    stats = read_json(stats_path)
    summary = fetch_summary(plan, stats, elapsed, run_id, salvaged, _cpu_seconds() - cpu0 if local else None)
    fs.write_bytes(fs.join(plan.output, SUMMARY), json.dumps(summary, indent=2, default=str).encode())
    check_outcomes(stats, fs.join(plan.output, SUMMARY))
    return summary


def check_outcomes(stats: dict[str, Any], where: str) -> None:
    """The fetch's accounting rule: URLs in = outcomes out."""
    if stats["urls_in"] != stats["outcomes_out"]:
        raise AccountingError(f"URLs in ({stats['urls_in']}) != outcomes out ({stats['outcomes_out']}): "
                              f"see {where}")


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the local runner's workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def fetch_summary(plan: FetchPlan, stats: dict[str, Any], elapsed: float, run_id: str,
                  salvaged: dict[str, int], cpu_s: float | None) -> dict[str, Any]:
    """``summary.json`` of a fetch from its run's stats (``afm fetch``, ``afm curate --urls``)."""
    from afm.crawler.storage.warc import read_index

    index = read_index(plan.output) if not fs.is_remote(plan.output) else []
    counts = stats["outcomes"]
    fetched = sum(v for k, v in counts.items() if k.startswith("fetched"))
    return {
        "run_id": run_id, "runner": plan.runner, "inputs": plan.inputs, "output": plan.output,
        "config": to_dict(plan.config),
        "urls_in": stats["urls_in"], "outcomes_out": stats["outcomes_out"],
        "accounting_ok": stats["urls_in"] == stats["outcomes_out"],
        "outcomes": dict(sorted(counts.items())), "pages": fetched,
        "resumed": stats["resumed"], "salvaged_files": salvaged["files"],
        "salvaged_records": salvaged["records"], "hosts": stats["hosts"],
        "hosts_most_not_fetched": stats["hosts_most_not_fetched"],
        "host_report": stats["host_report"],
        "warc_records_total": len(index),
        "elapsed_s": round(elapsed, 3),
        "pages_per_s": round((fetched - stats["resumed"]) / elapsed, 3) if elapsed > 0 else 0.0,
        "cpu_s": round(cpu_s, 3) if cpu_s is not None else None,
        "index_path": fs.join(plan.output, "index"),
    }


def run_fetch(urls: list[str], output: str, *, config: Any = None, runner: str = "DirectRunner",
              pipeline_args: list[str] | None = None, dry_run: bool = False, overwrite: bool = False,
              quiet: bool = False, local_workers: int = 0) -> dict[str, Any]:
    """Fetch the URL lists ``urls`` into ``output`` (see the module docstring); returns the
    summary (also ``output/summary.json``), or with ``dry_run`` the graph check."""
    plan = plan_fetch(urls, output, config=config, runner=runner, pipeline_args=pipeline_args,
                      local_workers=local_workers)
    plan.show_progress = not quiet
    if dry_run:
        report = dry_run_fetch(plan)
        if not quiet:
            print_summary("fetch dry run", {"runner": plan.runner, "URL lists": len(plan.inputs),
                                            "graph transforms": report["graph_transforms"],
                                            "option errors": len(report["option_errors"])})
            for e in report["option_errors"]:
                console.print(f"[red]error: {e}")
            for w in report["option_warnings"]:
                console.print(f"[yellow]warning: {w}")
        return report
    options, check = preflight(plan, submitting=True)
    if not check.ok:
        raise UserError(f"cannot run on {plan.runner}:\n  - " + "\n  - ".join(check.errors))
    salvaged = claim_output(plan, overwrite)
    if not quiet:
        print_config(plan.config, title="fetch config")
        if plan.previous:
            console.print(f"resuming: {len(plan.previous)} outcome file(s) of earlier runs"
                          + (f", {salvaged['records']} page(s) kept from {salvaged['files']} "
                             "file(s) a killed run left open" if salvaged["files"] else ""))
    summary = execute_fetch(plan, options, salvaged)
    if not quiet:
        print_summary("fetch", {"URLs in": summary["urls_in"], "outcomes out": summary["outcomes_out"],
                                **{k: v for k, v in summary["outcomes"].items()},
                                "resumed (ended by an earlier run)": summary["resumed"],
                                "hosts": summary["hosts"], "seconds": summary["elapsed_s"],
                                "pages/s": summary["pages_per_s"],
                                "summary": fs.join(plan.output, SUMMARY)})
    return summary


__all__ = ["FetchPlan", "SUMMARY", "check_outcomes", "claim_output", "dry_run_fetch", "execute_fetch", "fetch_line",
           "fetch_summary", "load_fetch_config", "plan_fetch", "preflight", "run_fetch"]
