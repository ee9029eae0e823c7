"""Every `afm` subcommand exists for real, has --help, and shows an example."""

from __future__ import annotations

import click
from click.testing import CliRunner

from afm.cli import main


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
