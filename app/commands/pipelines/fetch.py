"""``afm fetch``: URL lists -> WARC files, the crawler's index and training-use decisions,
as a Beam pipeline (``afm.pipelines.fetch``) on every runner ``afm curate`` supports.

Top-level imports stay light (click, stdlib): Beam and aiohttp load inside the command.
"""

from __future__ import annotations

import click

from afm.app.commands.pipelines.beam_options import (
    BEAM_HELP,
    BeamCommand,
    finish_dry_run,
    runner_options,
)

EPILOG = """\b
Examples:
  afm fetch --urls urls.txt --output fetched/
  afm fetch --urls cc-index-slice.parquet --output fetched/ --set host_interval=2
  afm fetch --urls 'lists/*.jsonl.gz' --output fetched/ --direct_num_workers=4
  afm fetch --urls urls.txt --output fetched/      # again: resumes, fetches nothing twice
  afm fetch --urls urls.txt --output fetched/ --set 'training_agents=[preset:ai-training]'
  afm fetch --urls http-list.txt --output fetched/ --allow-private   # a loopback test web
  afm fetch --urls gs://b/urls/ --output gs://b/fetched/ --runner DataflowRunner \\
      --project my-proj --region us-central1 --temp_location gs://b/tmp \\
      --sdk_container_image us-docker.pkg.dev/my-proj/afm/curate:latest --dry-run
  afm curate --input fetched/ --output corpus/ --decontam-index idx/

""" + BEAM_HELP


@click.command("fetch", cls=BeamCommand, epilog=EPILOG)
@click.option("--urls", "urls", multiple=True, required=True,
              help="URL list: text (one URL a line; Common Crawl CDXJ lines too), JSONL or "
                   "Parquet with a `url` column (a Common Crawl index slice as it is); a file, "
                   "directory or glob, local or gs:// / s3://; repeatable.")
@click.option("--output", "-o", required=True,
              help="Output directory (a crawl directory: warc/, index/, robotstxt/, state/, "
                   "report/, summary.json); an earlier fetch there is resumed.")
@click.option("--config", "-c", "config", default=None,
              help="YAML of the crawl's settings (CrawlConfig) plus host_interval, slice_urls, "
                   "slices_in_flight.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Setting override, e.g. host_interval=2 or user_agent=mybot (repeatable).")
@click.option("--user-agent", default=None, help="Our robots.txt product token (default afmbot).")
@click.option("--allow-private", is_flag=True, default=None,
              help="Allow loopback/private addresses (local test sites), as `afm crawl`'s.")
@click.option("--overwrite", is_flag=True,
              help="Delete what OUTPUT holds first (default: resume an earlier fetch there).")
@runner_options
@click.pass_context
def fetch_command(ctx: click.Context, urls: tuple[str, ...], output: str, config: str | None,
                  overrides: tuple[str, ...], user_agent: str | None, allow_private: bool | None,
                  overwrite: bool, runner: str, dry_run: bool) -> None:
    """Fetch URL lists politely on Beam workers, as `afm crawl` would fetch them.

    URLs are grouped by host (and by server, when hosts share an IP address); each host's
    robots.txt (and tdmrep.json) is fetched once per run with RFC 9309's rules and kept as
    a snapshot; Crawl-delay and the default per-host interval (host_interval) are kept,
    one worker fetches a host at a time, very large servers are split into slices that
    keep the limits together. The crawler's safety rules apply (private addresses, size
    and decompression limits, redirects, retries). Every URL ends as one outcome (fetched,
    disallowed, opted out, an error with its reason): URLs in = outcomes out, or the run
    fails. Pages go to WARC files with the crawler's index and training-use fields.
    """
    import logging

    from afm.app.commands.pipelines.usage import user_errors
    from afm.console import setup_logging
    from afm.pipelines.fetch.pipeline import load_fetch_config, run_fetch

    setup_logging("WARNING")
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    beam_args = list(ctx.args)
    if beam_args and not beam_args[0].startswith("-"):
        raise click.UsageError(f"unexpected argument {beam_args[0]!r} (Beam options start with --)")
    given = list(overrides)
    if user_agent is not None:
        given.append(f"user_agent={user_agent}")
    if allow_private:
        given.append("allow_private=true")
    with user_errors():
        cfg = load_fetch_config(config, given)
        result = run_fetch(list(urls), output, config=cfg, runner=runner, pipeline_args=beam_args,
                           dry_run=dry_run, overwrite=overwrite)
    if dry_run:
        finish_dry_run(result, runner)


COMMANDS = [fetch_command]
