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

EXTERNAL = ["--environment_type", "EXTERNAL", "--environment_config", "localhost:50000"]
RUNNERS = {
    "DataflowRunner": ["--project", "my-project", "--region", "us-central1", "--temp_location",
                       "gs://my-bucket/tmp", "--sdk_container_image",
                       "us-docker.pkg.dev/my-project/afm/curate:latest"],
    "FlinkRunner": ["--job_endpoint", "localhost:8099", *EXTERNAL],
    "SparkRunner": ["--job_endpoint=localhost:8099", *EXTERNAL],
    "PortableRunner": ["--job_endpoint=localhost:8099", *EXTERNAL],
}


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Storage the workers see (not the launcher's temporary directory, which cluster
    runners refuse), with a URL list."""
    work = tmp_path / "shared"
    work.mkdir()
    (work / "urls.txt").write_text("http://example.com/a\nhttp://example.org/b\n")
    launcher_tmp = tmp_path / "launcher-tmp"
    launcher_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(launcher_tmp))
    monkeypatch.chdir(work)
    return work


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
