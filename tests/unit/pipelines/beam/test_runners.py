"""The runner factory and the pre-flight checks: options and every path a worker opens."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.pipelines.beam.runners import RunnerError, build_options, check_options
from afm.pipelines.beam.worker_paths import WorkerPath, check_worker_paths

PORTABLE = ["--job_endpoint=localhost:8099", "--environment_type=EXTERNAL",
            "--environment_config=localhost:50000"]


def _errors(runner: str, args: list[str]) -> str:
    return " ".join(check_options(runner, build_options(runner, args), submitting=False).errors)


def test_local_defaults() -> None:
    from apache_beam.options.pipeline_options import DirectOptions

    direct = build_options("DirectRunner").view_as(DirectOptions)
    assert direct.direct_running_mode == "multi_processing" and direct.direct_num_workers == 0
    one = build_options("DirectRunner", local_workers=1).view_as(DirectOptions)
    assert one.direct_running_mode == "in_memory"
    user = build_options("DirectRunner", ["--direct_num_workers=2"], local_workers=1)
    assert user.view_as(DirectOptions).direct_num_workers == 2
    with pytest.raises(RunnerError, match="--name=value"):
        build_options("DirectRunner", ["stray"])
    with pytest.raises(RunnerError, match="unknown runner"):
        build_options("Prism")


def test_dataflow_options_checked() -> None:
    errors = _errors("DataflowRunner", [])
    for needle in ("project", "temp_location", "region", "sdk_container_image",
                   "deploy/dataflow/Dockerfile"):
        assert needle in errors
    good = ["--project=my-project-123", "--region=us-central1",
            "--temp_location=gs://my-bucket/tmp",
            "--sdk_container_image=us-docker.pkg.dev/my-project-123/afm/curate:1"]
    assert not _errors("DataflowRunner", good)


def test_portable_runner_needs_a_job_service_and_workers() -> None:
    assert not _errors("PortableRunner", PORTABLE)
    assert "--job_endpoint" in _errors("PortableRunner", PORTABLE[1:])
    assert "worker pool" in _errors("PortableRunner", PORTABLE[:2])
    assert "lacks afm" in _errors("PortableRunner", ["--job_endpoint=h:1"])


def test_flink_and_spark_need_their_job_server_jar(tmp_path: Path) -> None:
    env = ["--environment_type=DOCKER", "--environment_config=afm-curate:1"]
    flink = _errors("FlinkRunner", ["--flink_master=flink:8081", *env])
    assert "--flink_job_server_jar" in flink and "Maven" in flink
    assert "no such file" in _errors("FlinkRunner", ["--flink_master=flink:8081", *env,
                                                     f"--flink_job_server_jar={tmp_path}/x.jar"])
    assert "--flink_master" in _errors("FlinkRunner", env)
    # A running job server needs neither the jar nor the master.
    assert not _errors("FlinkRunner", ["--job_endpoint=flink-js:8099", *env])
    spark = _errors("SparkRunner", ["--spark_master_url=spark://m:7077", *env])
    assert "--spark_job_server_jar" in spark
    assert "local[N]" in _errors("SparkRunner", ["--spark_master_url=local[4]", *env])
    assert not _errors("SparkRunner", ["--job_endpoint=spark-js:8099", *env])


def test_launcher_temp_paths_fail_for_cluster_workers(tmp_path: Path) -> None:
    in_temp = Path(tempfile.mkdtemp())  # this process's temp directory
    (in_temp / "index.json").write_text("{}")
    paths = [WorkerPath("decontamination index", str(in_temp)),
             WorkerPath("quality model", "builtin")]
    portable = check_worker_paths(paths, "PortableRunner", build_options("PortableRunner",
                                                                         PORTABLE))
    assert len(portable.errors) == 1 and "temporary directory" in portable.errors[0]
    # Workers beside the launcher (local runner, LOOPBACK) see the same files.
    assert check_worker_paths(paths, "DirectRunner", build_options("DirectRunner")).ok
    loopback = build_options("PortableRunner", ["--job_endpoint=h:1",
                                                "--environment_type=LOOPBACK"])
    assert check_worker_paths(paths, "PortableRunner", loopback).ok
    # Dataflow workers see no local disk at all; a missing input is an error anywhere.
    dataflow = check_worker_paths([WorkerPath("input", __file__),
                                   WorkerPath("input", str(tmp_path / "missing.warc.gz"))],
                                  "DataflowRunner", build_options("DataflowRunner"))
    assert any("gs://" in e for e in dataflow.errors)
    assert any("not found" in e for e in dataflow.errors)


def test_dry_runs_report_problems_without_a_traceback(tmp_path: Path, monkeypatch) -> None:
    """(The launcher's temp directory is made a private one, so that tmp_path stands for
    storage the workers share.)"""
    from afm.app.commands.pipelines.curate import curate_command
    from afm.app.commands.pipelines.dedup import dedup_command
    from afm.io import write_parquet
    from afm.schema import make_document

    launcher_tmp = tmp_path / "launcher-tmp"
    launcher_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(launcher_tmp))
    for var in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.setenv(var, str(launcher_tmp))
    docs = tmp_path / "docs.parquet"
    write_parquet([make_document("a short document about rivers and bridges")], docs)
    runner = CliRunner()
    res = runner.invoke(dedup_command, ["--input", str(docs), "--output", str(tmp_path / "o"),
                                        "--runner", "FlinkRunner", "--flink_master=f:8081",
                                        "--environment_type=DOCKER",
                                        "--environment_config=img", "--dry-run"])
    assert res.exit_code == 1 and "flink_job_server_jar" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(dedup_command, ["--input", str(docs), "--output", str(tmp_path / "o"),
                                        "--runner", "PortableRunner", *PORTABLE, "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "dry run ok" in res.output and not (tmp_path / "o").exists()
    res = runner.invoke(curate_command, ["--input", str(docs), "--output", str(tmp_path / "c"),
                                         "--set", "decontaminate.enabled=false", "--runner",
                                         "PortableRunner", *PORTABLE[:2], "--dry-run"])
    assert res.exit_code == 1 and "worker pool" in res.output and "Traceback" not in res.output
    res = runner.invoke(dedup_command, ["--input", str(docs), "--output", str(launcher_tmp / "o"),
                                        "--runner", "PortableRunner", *PORTABLE, "--dry-run"])
    assert res.exit_code == 1 and "temporary directory" in res.output
