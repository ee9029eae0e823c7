"""The ``afm`` command: one subcommand per capability.

The app sits on top of every area (``afm/areas.py``): its ``commands`` folder has one
subfolder per area whose modules export ``COMMANDS``, a list of click commands/groups, and
its ``bench`` folder the same for ``BENCHMARKS``; this entry point collects them. Command
modules import only click at top level and their heavy libraries (Scrapy, Beam, JAX) inside
the command bodies, so ``afm --help`` is instant and a training host without Beam still
gets every command it can run.
"""

from __future__ import annotations

import importlib

import click

from afm.app.discovery import app_modules

EPILOG = """\b
Examples:
  afm demo --workdir work/demo        # the whole flow on the bundled demo site
  afm crawl --seeds seeds.txt --out crawl/
  afm curate --input crawl/ --output corpus/ --decontam-index decontam-index/
  afm train --config tiny-core --workdir runs/tiny
"""


def collect_commands() -> list[click.Command]:
    commands: list[click.Command] = []
    for name in app_modules("commands"):
        module = importlib.import_module(name)
        commands.extend(getattr(module, "COMMANDS", []))
    return commands


# `afm --help` in recipe order: each section's commands, in the order a run uses them. A
# command no section names is listed under "Other", so a new command is never hidden.
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Start", ("demo",)),
    ("Crawl", ("crawl", "crawler", "robots", "fetch")),
    ("Curate", ("extract", "extraction", "inspect", "classifier", "quality", "decontam", "dedup", "curate")),
    ("Tokenize", ("tokenizer", "tokenize")),
    ("Pre-train", ("model", "train", "tpu-train", "bench-train", "train-compare")),
    ("Post-train", ("synth", "sft", "rm", "dpo", "ipo", "rl", "itec")),
    ("Compress", ("prune", "distill", "quantize", "adapter")),
    ("Evaluate", ("eval", "ablate", "score", "generate")),
    ("Tools", ("export", "import", "bench")),
)


class _RecipeGroup(click.Group):
    """Lists its commands by recipe section (:data:`SECTIONS`) in ``--help``."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        order = [name for _, names in SECTIONS for name in names if name in self.commands]
        return order + [name for name in self.commands if name not in order]

    def invoke(self, ctx: click.Context) -> object:
        """Run the command; an error in what the user gave (:class:`afm.errors.UserError`:
        an option, a file, data, a checkpoint) is one ``Error:`` line, whichever command
        raised it, never a traceback. Ctrl-C ends it with status 130 (128 + SIGINT, what
        a shell and a scheduler read as "interrupted"), not click's 1 ("Aborted!"): each
        command's ``finally`` blocks and context managers (temporary directories, staged
        outputs) have run by then."""
        from afm.errors import UserError

        try:
            return super().invoke(ctx)
        except UserError as exc:
            raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt:
            click.echo("\ninterrupted", err=True)
            raise SystemExit(130) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        placed: set[str] = set()
        width = formatter.width - 6 - max((len(n) for n in self.commands), default=0)
        for title, names in (*SECTIONS, ("Other", tuple(self.commands))):
            rows = [(n, self.commands[n].get_short_help_str(width)) for n in names
                    if n in self.commands and n not in placed and not self.commands[n].hidden]
            placed.update(n for n, _ in rows)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


@click.group(cls=_RecipeGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="afm")
@click.option("--compile-cache", "compile_cache", default=None, envvar="AFM_COMPILE_CACHE", metavar="DIR|off",
              help="Directory of JAX's persistent compilation cache, or 'off' "
                   "[default: $XDG_CACHE_HOME/afm/jax; env AFM_COMPILE_CACHE].")
def main(compile_cache: str | None) -> None:
    """afm: crawl the open web, curate a clean corpus, and train a model on it
    with the recipe of Apple's foundation-model report (AFM, 2024)."""
    from afm.app.compile_cache import configure

    configure(compile_cache)  # before any command compiles (afm.app.compile_cache)


def _register() -> None:
    from afm.app.bench.command import bench_command
    from afm.app.demo import demo_command

    main.add_command(demo_command)  # the whole flow first
    for command in collect_commands():
        main.add_command(command)
    main.add_command(bench_command)  # measurement last


_register()


if __name__ == "__main__":
    main()
