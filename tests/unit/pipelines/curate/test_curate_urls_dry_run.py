"""``afm curate --urls ... --dry-run`` builds the joint graph (the fetch, then curate reading
what it wrote) and checks Beam's options for every cluster runner ``afm curate`` supports
(Dataflow, Flink, Spark, a portable job service); a dry run writes nothing, and the joint
graph holds both graphs' steps (the fetch's under one composite step)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from tests.cluster_runners import RUNNERS, url_list_workdir

NO_INDEX = ["--set", "decontaminate.enabled=false"]


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return url_list_workdir(tmp_path, monkeypatch)


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_the_joint_graph_builds_for_every_cluster_runner(workdir: Path, runner: str) -> None:
    remote = runner == "DataflowRunner"
    urls, out = ("gs://my-bucket/urls/*.txt", "gs://my-bucket/corpus") if remote else ("urls.txt", "corpus/")
    res = CliRunner().invoke(main, ["curate", "--urls", urls, "--output", out, *NO_INDEX,
                                    "--fetch-set", "host_interval=2", "--runner", runner,
                                    *RUNNERS[runner], "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "dry run ok" in res.output and f"runner {runner}" in res.output
    assert not (workdir / "corpus").exists()  # a dry run writes nothing


def test_the_joint_graph_holds_the_fetch_and_curate(workdir: Path) -> None:
    import apache_beam as beam

    from afm.pipelines.curate.from_urls import plan_curate_urls

    plan = plan_curate_urls(["urls.txt"], "corpus", config={"decontaminate": {"enabled": False}})
    pipeline = beam.Pipeline()
    plan.build(pipeline)
    labels = {t.unique_name for t in pipeline.to_runner_api().components.transforms.values()}
    # the fetch graph as one composite step, curate's read of what it wrote, curate's stages
    assert {"fetch/fetch", "fetch/write stats", "fetch done", "fetched files", "read/read records",
            "optout pages", "extract", "write documents"} <= labels
    assert plan.inputs == [str(workdir / "corpus" / "fetch")]
    assert not (workdir / "corpus").exists()


def test_urls_and_input_are_mutually_exclusive(workdir: Path) -> None:
    res = CliRunner().invoke(main, ["curate", "--urls", "urls.txt", "--input", "urls.txt",
                                    "--output", "corpus/", "--dry-run"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert res.output.strip().splitlines()[-1] == (
        "Error: --urls and --input are mutually exclusive: fetch and curate URL lists, or "
        "curate files already fetched")


def test_fetch_options_need_urls(workdir: Path) -> None:
    res = CliRunner().invoke(main, ["curate", "--input", "urls.txt", "--output", "corpus/",
                                    "--fetch-set", "host_interval=2", "--dry-run"])
    assert res.exit_code != 0 and "go with --urls" in res.output
