"""``afm curate``: crawl output or document files -> curated Parquet shards (Apache Beam).

Top-level imports stay light (click, stdlib): Beam and the filters load inside the command.
The Dataflow flex template's launcher runs it as a script through
``deploy/dataflow/curate_main.py``.
"""

from __future__ import annotations

import click

from afm.app.commands.pipelines.beam_options import (
    BEAM_HELP,
    BeamCommand,
    finish_dry_run,
    runner_options,
)
from afm.app.commands.pipelines.output_options import output_policy_options

EPILOG = """\b
Examples:
  afm decontam build-index --suite report --benchmarks ../shared/eval/benchmarks --out idx/
  afm curate --input crawl/ --output corpus/ --decontam-index idx/
  afm curate --input 'cc/*.warc.gz' --output corpus/ --config curate.yaml
  afm curate --input docs.parquet --output corpus/ --decontam-index idx/ --set dedup.params.threshold=0.7
  afm curate --input crawl/ --output corpus/ --set decontaminate.enabled=false
  afm curate --input crawl/ --output corpus/ --decontam-index idx/ --set quality_model.enabled=true
  afm curate --input 'cc/*.warc.gz' --output corpus/ --robots-snapshots robots-store/ --decontam-index idx/
  afm curate --input crawl/ --output corpus/ --set optout.enabled=false --decontam-index idx/
  afm curate --input crawl/ --output corpus/ --set optout.params.domains=[news.example] --decontam-index idx/
  afm curate --input 'cc/*.warc.gz' --output corpus/ --robots-snapshots robots-store/ --set 'optout.params.training_agents=[preset:ai-training]' --decontam-index idx/
  afm curate --input crawl/ --output corpus/ --decontam-index idx/ --overwrite
  afm curate --urls urls.txt --output corpus/ --decontam-index idx/     # fetch + curate, one job
  afm curate --urls urls.txt --output corpus/ --fetch-set host_interval=2 --decontam-index idx/
  afm curate --source code --input repos/ --output code-corpus/ --decontam-index idx/
  afm curate --source math --input crawl/ --output math-corpus/ --decontam-index idx/
  afm curate --input crawl/ --output corpus/ --decontam-index idx/ --direct_num_workers=2
  afm curate --input gs://b/crawl/ --output gs://b/corpus/ --runner DataflowRunner \\
      --project my-proj --region us-central1 --temp_location gs://b/tmp \\
      --sdk_container_image us-docker.pkg.dev/my-proj/afm/curate:latest \\
      --set decontaminate.params.index=gs://b/decontam-index --dry-run
  afm curate --input /shared/crawl/ --output /shared/corpus/ --runner PortableRunner \\
      --job_endpoint=localhost:8099 --environment_type=EXTERNAL \\
      --environment_config=localhost:50000 --decontam-index /shared/idx/

""" + BEAM_HELP


@click.command("curate", cls=BeamCommand, epilog=EPILOG)
@click.option("--input", "-i", "inputs", multiple=True,
              help="WARC(.gz) / Parquet / JSONL file, directory or glob (local or gs://...); "
                   "repeatable. For --source code: a directory of cloned repositories or a "
                   "Parquet of files (path, content, repo).")
@click.option("--urls", "urls", multiple=True,
              help="URL lists to fetch and curate in one job (as `afm fetch --urls`; instead "
                   "of --input): the fetch goes to OUTPUT/fetch/ and a rerun resumes it.")
@click.option("--fetch-config", default=None, metavar="YAML",
              help="With --urls: the fetch's settings (as `afm fetch --config`).")
@click.option("--fetch-set", "fetch_overrides", multiple=True, metavar="KEY=VALUE",
              help="With --urls: a fetch setting, e.g. host_interval=2 (repeatable).")
@click.option("--allow-private", is_flag=True, default=False,
              help="With --urls: allow loopback/private addresses (local test sites).")
@click.option("--output", "-o", required=True, help="Output directory or bucket path.")
@click.option("--config", "-c", "config", default=None, help="CurateConfig YAML file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Config override, e.g. quality_model.enabled=true (the quality model, off by "
                   "default: docs/quality.md) (repeatable).")
@click.option("--source", type=click.Choice(["web", "code", "math"]), default=None,
              help="Stage list to run (default: the config's, else web).")
@click.option("--decontam-index", default=None, metavar="DIR",
              help="Benchmark index from `afm decontam build-index` (the decontaminate "
                   "stage needs one, unless the config turns the stage off); local or "
                   "gs:// / s3://, read by every worker.")
@click.option("--robots-snapshots", "robots_snapshots", multiple=True, metavar="PATH",
              help="robots.txt / tdmrep.json snapshots for the optout stage: a store from "
                   "`afm robots snapshots`, a crawl directory or robots.txt WARC files "
                   "(repeatable; default: the robotstxt/ of crawl directories given as input).")
@output_policy_options
@runner_options
@click.pass_context
def curate_command(ctx: click.Context, inputs: tuple[str, ...], urls: tuple[str, ...],
                   fetch_config: str | None, fetch_overrides: tuple[str, ...], allow_private: bool,
                   output: str, config: str | None,
                   overrides: tuple[str, ...], runner: str, source: str | None,
                   dry_run: bool, decontam_index: str | None, robots_snapshots: tuple[str, ...],
                   overwrite: bool, allow_empty: bool) -> None:
    """Curate crawl output into clean Parquet shards with the report's pipeline:
    optout -> extract -> language -> safety -> PII -> dedup -> quality -> decontamination.

    Writes documents-NNNNN.parquet, rejects-NNNNN.parquet (every dropped document with
    stage and reason), manifest.json, report.html and _SUCCESS (last) into OUTPUT, and
    fails, promoting nothing, when documents in != kept + rejected. With --urls the URL
    lists are fetched first in the same job (`afm fetch`'s graph, into OUTPUT/fetch/):
    URLs in = outcomes, and every page fetched is kept or rejected.
    """
    import logging

    from afm.app.commands.pipelines.usage import user_errors
    from afm.console import setup_logging
    from afm.io import directories_are_inputs
    from afm.pipelines.curate.config import load_curate_config
    from afm.preflight import check_inputs

    setup_logging("WARNING")
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    beam_args = list(ctx.args)
    if beam_args and not beam_args[0].startswith("-"):
        raise click.UsageError(f"unexpected argument {beam_args[0]!r} (Beam options start "
                               "with --)")
    if decontam_index:
        overrides = (*overrides, f"decontaminate.params.index={decontam_index}")
    if robots_snapshots:
        import json

        overrides = (*overrides, f"optout.params.snapshots={json.dumps(list(robots_snapshots))}")
    with user_errors():
        if urls or not inputs:  # --urls, --input, both or neither (this import loads Beam)
            from afm.pipelines.curate.from_urls import refuse_both

            refuse_both(list(urls), list(inputs))
        if not urls and (fetch_config or fetch_overrides or allow_private):
            raise click.UsageError("--fetch-config, --fetch-set and --allow-private go with --urls")
        if not dry_run and not urls:  # before Beam is even imported (the stages import it): one line in seconds
            check_inputs(inputs, allow_rejects=True,
                         directories_as_inputs=directories_are_inputs(_source(source, config, overrides)))
        cfg = load_curate_config(config, source=source, overrides=overrides)
        from afm.pipelines.curate.from_urls import run_curate_urls
        from afm.pipelines.curate.pipeline import run_curate
        from afm.pipelines.fetch.pipeline import load_fetch_config

        if urls:
            fetch_cfg = load_fetch_config(fetch_config, [*fetch_overrides,
                                                         *(["allow_private=true"] if allow_private else [])])
            result = run_curate_urls(list(urls), output, config=cfg, fetch_config=fetch_cfg, runner=runner,
                                     source=cfg.source, pipeline_args=beam_args, dry_run=dry_run,
                                     overwrite=overwrite, allow_empty=allow_empty)
        else:
            result = run_curate(list(inputs), output, config=cfg, runner=runner,
                                source=cfg.source, pipeline_args=beam_args, dry_run=dry_run,
                                overwrite=overwrite, allow_empty=allow_empty)
    if dry_run:
        finish_dry_run(result, runner)
    else:
        click.echo(result["outputs"]["report"])


def _source(source: str | None, config: str | None, overrides: tuple[str, ...]) -> str | None:
    """The run's source as the config will say, read without loading the stages."""
    for item in reversed(overrides):
        if item.startswith("source="):
            return item.split("=", 1)[1]
    if source or not config:
        return source
    from afm.config import read_yaml

    data = read_yaml(config)
    return data.get("source") if isinstance(data, dict) else None


COMMANDS = [curate_command]
