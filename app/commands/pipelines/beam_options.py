"""The command-line options every Beam command shares (curate, dedup, decontam run,
tokenize): ``--runner``, ``--dry-run`` and Beam's own options, passed through to Beam
unchanged in either form users copy from Beam's and Dataflow's documentation:
``--project=P`` or ``--project P`` (``--job_endpoint localhost:8099``,
``--direct_num_workers=4``...). :class:`BeamCommand` joins the second form into the first
before click parses the line, asking Beam's own option parser which of its options take a
value (a flag such as ``--save_main_session`` never swallows the next argument:
:func:`afm.pipelines.beam.runners.join_option_values`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from afm.pipelines.beam.runners import RUNNERS, join_option_values

CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True}


class BeamCommand(click.Command):
    """A click command whose unknown options are Beam's, in either ``--name=value`` or
    ``--name value`` form (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("context_settings", dict(CONTEXT))
        super().__init__(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        own = {opt for param in self.params for opt in (*param.opts, *param.secondary_opts)}
        return super().parse_args(ctx, join_option_values(args, own))

BEAM_HELP = """\b
Runners (--runner): DirectRunner (this machine), PortableRunner (any Beam job service:
--job_endpoint=HOST:PORT --environment_type=EXTERNAL|DOCKER|PROCESS|LOOPBACK
--environment_config=...), FlinkRunner / SparkRunner (--flink_master / --spark_master_url
plus --flink_job_server_jar / --spark_job_server_jar, or --job_endpoint of a running job
server), DataflowRunner (--project --region --temp_location --sdk_container_image, with
afm[gcp]). Any other Beam option passes through, as --name=value or --name value. --dry-run checks the
options and every path the workers will open, and runs nothing. deploy/dataflow/README.md
has the details.
"""


def _set_worker_logs(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from afm.pipelines.beam.logs import set_worker_logs

    set_worker_logs(value)
    return value


def runner_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--runner``, ``--dry-run`` and ``--worker-logs`` to a command."""
    fn = click.option("--worker-logs", type=click.Choice(["file", "terminal"]), default="file",
                      show_default=True, expose_value=False, callback=_set_worker_logs,
                      help="Beam's own logs (worker start-up, channels): a file beside the output "
                           "(OUTPUT/_logs/RUN.log, named at the end), or the terminal.")(fn)
    fn = click.option("--dry-run", is_flag=True,
                      help="Build the pipeline, check the runner options and every path the "
                           "workers will open; run nothing.")(fn)
    return click.option("--runner", type=click.Choice(RUNNERS), default="DirectRunner",
                        show_default=True, help="Beam runner (DirectRunner = this machine).")(fn)


def split_beam_args(tokens: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``(Beam options, other arguments)`` of the extra command-line tokens: Beam options
    start with ``-`` (joined to ``--name=value`` by :class:`BeamCommand`), everything else
    is positional."""
    beam_args = [t for t in tokens if t.startswith("-")]
    return beam_args, [t for t in tokens if not t.startswith("-")]


def finish_dry_run(result: dict[str, Any], runner: str) -> None:
    """The last line of a dry run: ok, or the errors as a failing exit."""
    if not result["ok"]:
        raise click.ClickException(
            f"{len(result['option_errors'])} problem(s) for {runner}; see above")
    click.echo(f"dry run ok: {result['graph_transforms']} transforms, runner {runner}")
