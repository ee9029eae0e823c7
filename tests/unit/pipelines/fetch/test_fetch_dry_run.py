"""``afm fetch --dry-run`` builds the fetch graph and checks Beam's options for every cluster
runner ``afm curate`` supports (Dataflow, Flink, Spark, a portable job service), with the
README's option forms; a gs:// URL list is kept as given where this machine has no GCS
filesystem (the option check, not the listing, decides)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from tests.cluster_runners import RUNNERS, url_list_workdir


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return url_list_workdir(tmp_path, monkeypatch)


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_the_fetch_graph_builds_for_every_cluster_runner(workdir: Path, runner: str) -> None:
    remote = runner == "DataflowRunner"
    urls, out = ("gs://my-bucket/urls/*.txt", "gs://my-bucket/fetched") if remote else ("urls.txt", "fetched/")
    res = CliRunner().invoke(main, ["fetch", "--urls", urls, "--output", out, "--runner", runner,
                                    *RUNNERS[runner], "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "dry run ok" in res.output and f"runner {runner}" in res.output
    assert not (workdir / "fetched").exists()  # a dry run writes nothing


def test_a_dry_run_names_what_a_cluster_cannot_see(workdir: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["fetch", "--urls", "urls.txt", "--output",
                                    str(Path(tempfile.tempdir) / "o"), "--runner", "FlinkRunner",
                                    *RUNNERS["FlinkRunner"], "--dry-run"])
    assert res.exit_code != 0 and "temporary directory" in res.output
    assert "Traceback" not in res.output
