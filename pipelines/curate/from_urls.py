"""``afm curate --urls``: fetch and curate as one Beam job.

    URL lists -> the fetch graph (:mod:`afm.pipelines.fetch.graph`) -> every URL's outcome
              -> (once the fetch is done) its WARC files listed -> the curate graph
                 (:mod:`afm.pipelines.curate.graph`): read, optout, extract, ..., write

Both graphs are the ones ``afm fetch`` and ``afm curate`` build, composed in one pipeline.
The fetch writes its crawl directory under ``OUTPUT/fetch/`` exactly as ``afm fetch``
writes one (WARC files, the crawler's index, robots.txt / tdmrep.json snapshots,
``state/``, the per-host report, ``summary.json``), so a rerun into the same output
resumes it: only the URLs no earlier run ended are asked again. The pages reach curate
through those WARC files, read by the one reader once every fetch step has finished (the
listing waits for the count of every outcome, a side input): curate then reads exactly
what ``afm curate --input OUTPUT/fetch/`` would read, pages an earlier (resumed) run
fetched included, and its optout stage reads the fetch's own snapshots and each page's
stored training-use decision (``AFM-Training-Use``), as it does for any crawl directory.
Page bodies cross no shuffle on their way from the fetch to curate: they are written
once, to the WARC files the crawl keeps anyway.

The manifest holds the fetch's accounting beside curate's: ``fetch.urls_in`` =
``fetch.outcomes_out`` (URLs in = outcomes), and ``fetch.pages`` fetched = the pages curate
read, each then kept or rejected (curate's own rule). A run where either fails promotes
nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from afm import fs
from afm.crawler.batch.store import STATE_DIR
from afm.errors import UserError
from afm.outputs import new_run_id
from afm.pipelines.beam.accounting import AccountingError
from afm.pipelines.beam.io import is_remote, join, read_json, resolve_inputs
from afm.pipelines.beam.runners import check_runner_name
from afm.pipelines.beam.worker_paths import WorkerPath
from afm.pipelines.curate.config import load_curate_config
from afm.pipelines.curate.graph import build_pipeline
from afm.pipelines.curate.pipeline import CuratePlan, run_plan
from afm.pipelines.curate.stages import check_setup, run_hooks, stage_paths
from afm.pipelines.fetch.graph import FetchGraph
from afm.pipelines.fetch.pipeline import (
    SUMMARY,
    FetchPlan,
    check_outcomes,
    claim_output,
    fetch_summary,
    plan_fetch,
)

FETCH_DIR = "fetch"  # the fetch's crawl directory, under the output


@dataclass
class UrlsPlan(CuratePlan):
    """A curate plan whose input is fetched in the same job (:attr:`fetch`)."""

    fetch: FetchPlan | None = None
    fetch_stats: str = ""  # the fetch's run stats (under its state/)
    salvaged: dict[str, int] = field(default_factory=lambda: {"files": 0, "records": 0})

    def build(self, pipeline: Any, staging: str | None = None) -> dict[str, Any]:
        """The fetch graph, then the curate graph reading the WARC files the fetch wrote."""
        import apache_beam as beam
        from apache_beam.pvalue import AsSingleton

        assert self.fetch is not None
        self.fetch_stats = fs.join(self.fetch.output, STATE_DIR, f"run-{new_run_id()}.json")
        fetched = pipeline | "fetch" >> FetchGraph(self.fetch, self.fetch_stats)
        done = fetched["outcomes"] | "fetch done" >> beam.combiners.Count.Globally()
        files = (pipeline | "fetch directory" >> beam.Create([self.fetch.output])
                 | "fetched files" >> beam.FlatMap(list_fetched, self.config.source,
                                                    done=AsSingleton(done)))
        return build_pipeline(self, pipeline, staging, files=files)

    def complete(self, manifest: dict[str, Any], counts: dict[str, int]) -> None:
        """The fetch's ``summary.json`` (as ``afm fetch`` writes it) and its accounting in
        the manifest: URLs in = outcomes out; pages fetched = pages curate read."""
        assert self.fetch is not None
        stats = read_json(self.fetch_stats)
        summary = fetch_summary(self.fetch, stats, manifest["elapsed_s"], manifest["run_id"],
                                self.salvaged, None)
        summary_path = fs.join(self.fetch.output, SUMMARY)
        fs.write_bytes(summary_path, _json(summary))
        read = counts.get("read.pages", 0)
        manifest["fetch"] = {
            "output": self.fetch.output, "summary": summary_path,
            "urls_in": summary["urls_in"], "outcomes_out": summary["outcomes_out"],
            "outcomes": summary["outcomes"], "resumed": summary["resumed"],
            "hosts": summary["hosts"], "pages": summary["pages"], "pages_read": read,
            "accounting_ok": summary["accounting_ok"] and read == summary["pages"],
        }
        check_outcomes(stats, summary_path)
        if read < summary["pages"]:
            raise AccountingError(f"{summary['pages']} page(s) fetched but {read} read by curate "
                                  f"(nothing was promoted): see {summary_path}")
        if read > summary["pages"]:
            manifest["warnings"].append(
                f"{self.fetch.output} holds {read - summary['pages']} page(s) of URLs not in "
                "these lists (an earlier fetch into it): curated too, as `afm curate --input` would")

    def kept_names(self) -> tuple[str, ...]:
        return (FETCH_DIR,)

    def claim(self) -> None:
        """The fetch directory claimed (an earlier one resumed, its open files salvaged),
        then the stages prepared with it as their input, as ``afm curate --input`` would
        prepare them: the optout stage reads its snapshots (written during the job)."""
        assert self.fetch is not None
        self.salvaged = claim_output(self.fetch, overwrite=False)
        run_hooks(self.stages, "prepare", [], [self.fetch.output])

    def worker_paths(self) -> list[Any]:
        assert self.fetch is not None
        paths = [*self.fetch.worker_paths(), WorkerPath("output", self.output, "write")]
        paths += [p for p in stage_paths(self.stages) if p.path != self.fetch.output]
        if self.config.debug.marker_dir:
            paths.append(WorkerPath("fault marker directory", self.config.debug.marker_dir, "write"))
        return paths


def list_fetched(fetch_dir: str, source: str, done: int) -> list[tuple[int, str]]:
    """The fetch directory's files curate reads, numbered as ``afm curate --input`` numbers
    them (``done``, the fetch's outcome count, is only there to wait for the fetch). A
    fetch that stored no page yields none (the run then ends with no document read)."""
    del done
    try:
        files, _skipped = resolve_inputs([fetch_dir], source)
    except FileNotFoundError:
        return []
    return list(enumerate(files))


def plan_curate_urls(urls: list[str], output: str, *, config: Any = None, fetch_config: Any = None,
                     runner: str = "DirectRunner", source: str | None = None,
                     pipeline_args: list[str] | None = None, local_workers: int = 0,
                     allow_empty: bool = False) -> UrlsPlan:
    """The joint plan; curate's stages checked (their ``prepare`` hooks run by
    :func:`claim`, once the fetch directory exists)."""
    check_runner_name(runner)
    cfg = load_curate_config(config, source=source)
    stages = cfg.resolve()
    run_hooks(stages, "check")
    check_setup(stages)
    out = output if is_remote(str(output)) else os.path.abspath(str(output))
    fetch = plan_fetch(list(urls), join(out, FETCH_DIR), config=fetch_config, runner=runner,
                       pipeline_args=pipeline_args, local_workers=local_workers)
    fetch.show_progress = False  # one progress line: curate's (the fetch's would count URLs as read)
    return UrlsPlan(cfg, stages, [fetch.output], [], out, runner, list(pipeline_args or []),
                    (), "curate", local_workers, allow_empty, fetch=fetch)


def run_curate_urls(urls: list[str], output: str, *, config: Any = None, fetch_config: Any = None,
                    runner: str = "DirectRunner", source: str | None = None,
                    pipeline_args: list[str] | None = None, dry_run: bool = False,
                    overwrite: bool = False, quiet: bool = False, local_workers: int = 0,
                    allow_empty: bool = False) -> dict[str, Any]:
    """Fetch the URL lists ``urls`` and curate what came back, as one job, into ``output``
    (the fetch in ``output/fetch/``, resumed by a rerun; ``overwrite`` replaces the curated
    dataset, never the fetch). Returns the manifest (or with ``dry_run`` the graph check)."""
    plan = plan_curate_urls(urls, output, config=config, fetch_config=fetch_config, runner=runner,
                            source=source, pipeline_args=pipeline_args, local_workers=local_workers,
                            allow_empty=allow_empty)
    return run_plan(plan, dry_run=dry_run, overwrite=overwrite, quiet=quiet)


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data, indent=2, default=str).encode()


def refuse_both(urls: list[str], inputs: list[str]) -> None:
    """``--urls`` and ``--input`` name the input two ways: one of them."""
    if urls and inputs:
        raise UserError("--urls and --input are mutually exclusive: fetch and curate URL lists, "
                        "or curate files already fetched")
    if not urls and not inputs:
        raise UserError("no input: give --input FILE (crawl output, documents) or --urls FILE (URL lists)")


__all__ = ["FETCH_DIR", "UrlsPlan", "list_fetched", "plan_curate_urls", "refuse_both", "run_curate_urls"]
