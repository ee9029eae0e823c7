"""The README's Dataflow and Flink examples pass ``--dry-run`` as printed, with Beam's options
in either form (``--project my-project`` as printed, ``--project=my-project`` too), and a bad
option is one line before any config is printed."""

from __future__ import annotations

import re
import shlex
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from tests.paths import ROOT

BEAM_VALUE = re.compile(r"(--(?:project|region|temp_location|sdk_container_image|job_endpoint|"
                        r"environment_type|environment_config)) (\S+)")


def readme_cluster_commands() -> list[str]:
    """The `afm curate ... --runner ...` commands of the README's bash blocks, one line each."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.split("#", 1)[0].strip()
            if command.startswith("afm curate") and "--runner" in command:
                commands.append(command)
    return commands


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout-like working directory the "workers" can see (not this machine's temp
    directory, which cluster runners refuse), with the Flink example's inputs."""
    from afm.filters.benchmarks import DATA_DIR, build_index, specs_from

    work = tmp_path / "shared"
    (work / "crawl").mkdir(parents=True)
    (work / "crawl" / "docs.jsonl").write_text('{"id": "1", "text": "a document about rivers and bridges"}\n')
    build_index(specs_from(DATA_DIR), work / "decontam-index")
    launcher_tmp = tmp_path / "launcher-tmp"
    launcher_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(launcher_tmp))
    monkeypatch.chdir(work)
    return work


def test_the_readme_shows_a_dataflow_and_a_flink_example() -> None:
    runners = [re.search(r"--runner (\S+)", c).group(1) for c in readme_cluster_commands()]
    assert runners == ["DataflowRunner", "FlinkRunner"]


@pytest.mark.parametrize("form", ["as printed", "name=value"])
def test_readme_cluster_examples_pass_dry_run(workdir: Path, form: str) -> None:
    for command in readme_cluster_commands():
        if form == "name=value":
            command = BEAM_VALUE.sub(r"\1=\2", command)
            assert "--project my-project" not in command
        out = CliRunner().invoke(main, shlex.split(command)[1:])
        assert out.exit_code == 0, f"{command}\n{out.output}"
        assert "dry run ok" in out.output


def test_a_bad_beam_option_is_one_line_before_the_config(workdir: Path) -> None:
    out = CliRunner().invoke(main, ["curate", "--input", "crawl/", "--output", "corpus/", "--set",
                                    "decontaminate.enabled=false", "--dry-run", "stray"])
    assert out.exit_code != 0
    assert "stray" in out.output and "Traceback" not in out.output
    assert "config" not in out.output.split("stray")[0]  # nothing printed before the error
