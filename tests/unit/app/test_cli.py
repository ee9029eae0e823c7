"""Every `afm` subcommand exists for real, has --help, and shows an example."""

from __future__ import annotations

import click
from click.testing import CliRunner

from afm.app.cli import main


def _walk(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from _walk(cmd, (*prefix, name))


def test_top_level_help_lists_commands():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in ("demo", "bench"):
        assert name in result.output


def test_every_command_has_help_with_an_example():
    runner = CliRunner()
    missing = []
    for path, cmd in _walk(main):
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        if not isinstance(cmd, click.Group) and "Example" not in result.output:
            missing.append(" ".join(path))
    assert not missing, f"commands without an example in --help: {missing}"


def test_bench_lists_benchmarks():
    result = CliRunner().invoke(main, ["bench", "--list"])
    assert result.exit_code == 0


def test_help_lists_every_command_once_by_recipe_section() -> None:
    from click.testing import CliRunner

    from afm.app.cli import SECTIONS, main

    out = CliRunner().invoke(main, ["--help"]).output
    titles = [line[:-1] for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    recipe = [t for t, _ in SECTIONS]
    assert [t for t in titles if t in recipe] == [t for t in recipe if t in titles]  # in recipe order
    assert titles.index("Crawl") < titles.index("Curate") < titles.index("Pre-train") < titles.index("Post-train")
    sections = out[out.index("Start:"):out.index("Examples:")]
    listed = [line.split()[0] for line in sections.splitlines()
              if line.startswith("  ") and not line.startswith("   ") and line.split()]
    assert sorted(set(listed)) == sorted(main.commands) and len(listed) == len(set(listed))
    assert "Other:" not in out  # every command has its section


def test_ctrl_c_exits_130_after_the_command_cleaned_up(tmp_path) -> None:
    """Ctrl-C is "interrupted" (128 + SIGINT), not click's "Aborted!" with status 1, and the
    command's own clean-up (a temporary directory here) has run."""
    import tempfile

    import click
    from click.testing import CliRunner

    from afm.app.cli import _RecipeGroup

    made: list[str] = []

    @click.group(cls=_RecipeGroup)
    def group() -> None:
        pass

    @group.command("slow")
    def slow() -> None:
        with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
            made.append(scratch)
            raise KeyboardInterrupt

    result = CliRunner().invoke(group, ["slow"])
    assert result.exit_code == 130 and "interrupted" in result.output
    assert made and not list(tmp_path.iterdir())
