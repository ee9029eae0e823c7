"""The command-line options every Beam command shares (curate, dedup, decontam run,
tokenize): ``--runner``, ``--dry-run`` and Beam options passed through as
``--name=value`` (``--job_endpoint=localhost:8099``, ``--project=P``,
``--direct_num_workers=4``...)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from afm.pipelines.beam.runners import RUNNERS

CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True}

BEAM_HELP = """\b
Runners (--runner): DirectRunner (this machine), PortableRunner (any Beam job service:
--job_endpoint=HOST:PORT --environment_type=EXTERNAL|DOCKER|PROCESS|LOOPBACK
--environment_config=...), FlinkRunner / SparkRunner (--flink_master / --spark_master_url
plus --flink_job_server_jar / --spark_job_server_jar, or --job_endpoint of a running job
server), DataflowRunner (--project --region --temp_location --sdk_container_image, with
afm[gcp]). Any other Beam option passes through as --name=value. --dry-run checks the
options and every path the workers will open, and runs nothing. deploy/dataflow/README.md
has the details.
"""


def runner_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--runner`` and ``--dry-run`` to a command."""
    fn = click.option("--dry-run", is_flag=True,
                      help="Build the pipeline, check the runner options and every path the "
                           "workers will open; run nothing.")(fn)
    return click.option("--runner", type=click.Choice(RUNNERS), default="DirectRunner",
                        show_default=True, help="Beam runner (DirectRunner = this machine).")(fn)


def split_beam_args(tokens: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``(Beam options, other arguments)`` of the extra command-line tokens: Beam options
    start with ``-`` (given as ``--name=value``), everything else is positional."""
    beam_args = [t for t in tokens if t.startswith("-")]
    return beam_args, [t for t in tokens if not t.startswith("-")]


def finish_dry_run(result: dict[str, Any], runner: str) -> None:
    """The last line of a dry run: ok, or the errors as a failing exit."""
    if not result["ok"]:
        raise click.ClickException(
            f"{len(result['option_errors'])} problem(s) for {runner}; see above")
    click.echo(f"dry run ok: {result['graph_transforms']} transforms, runner {runner}")
