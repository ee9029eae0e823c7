"""Runner choice and option checks: local, Dataflow, Flink, Spark from one command.

``DirectRunner`` here means Beam's FnApiRunner in ``multi_processing`` mode with one
worker process per core (``direct_num_workers=0``). We create that runner explicitly:
Beam 2.77's ``DirectRunner`` name first tries the Prism runner, which downloads a Go
binary at run time (forbidden offline, and slow). ``BundleBasedDirectRunner`` (Beam's
older local runner) is accepted too: it retries a failed bundle like Dataflow does,
which is what the fault-tolerance test exercises.

For the cluster runners, :func:`check_options` lists every missing or wrong option before
anything is submitted, so ``--dry-run`` catches them on a laptop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner",
           "BundleBasedDirectRunner")
LOCAL_RUNNERS = ("DirectRunner", "BundleBasedDirectRunner")
PORTABLE_ENVIRONMENTS = ("DOCKER", "PROCESS", "EXTERNAL", "LOOPBACK")


@dataclass
class OptionCheck:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _has_flag(args: list[str], name: str) -> bool:
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in args)


def build_options(runner: str, pipeline_args: list[str] | None = None) -> Any:
    """``PipelineOptions`` for ``runner`` from the user's Beam arguments plus our defaults
    (local: multi-process, all cores; Dataflow: staging under temp_location)."""
    from apache_beam.options.pipeline_options import (
        GoogleCloudOptions,
        PipelineOptions,
        SetupOptions,
    )

    if runner not in RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; expected one of {RUNNERS}")
    args = list(pipeline_args or [])
    if runner == "DirectRunner":
        if not _has_flag(args, "direct_running_mode"):
            args.append("--direct_running_mode=multi_processing")
        if not _has_flag(args, "direct_num_workers"):
            args.append("--direct_num_workers=0")  # 0 = one worker per core
    options = PipelineOptions(args)
    if runner not in LOCAL_RUNNERS:
        options.view_as(SetupOptions).save_main_session = False
    if runner == "DataflowRunner":
        gcp = options.view_as(GoogleCloudOptions)
        if gcp.temp_location and not gcp.staging_location:
            gcp.staging_location = gcp.temp_location.rstrip("/") + "/staging"
    return options


def make_runner(runner: str) -> Any:
    """The runner object for a runner name (see the module docstring for the local ones)."""
    if runner == "DirectRunner":
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return FnApiRunner()
    if runner == "BundleBasedDirectRunner":
        from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

        return BundleBasedDirectRunner()
    if runner == "DataflowRunner":
        try:
            import apitools  # noqa: F401 - the GCP client Beam's DataflowRunner needs
        except ImportError as exc:
            raise RuntimeError(
                "DataflowRunner needs Beam's GCP extra: "
                ".venv/bin/pip install 'apache-beam[gcp]==2.77.0'") from exc
        from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

        return DataflowRunner()
    if runner == "FlinkRunner":
        from apache_beam.runners.portability.flink_runner import FlinkRunner

        return FlinkRunner()
    if runner == "SparkRunner":
        from apache_beam.runners.portability.spark_runner import SparkRunner

        return SparkRunner()
    raise ValueError(f"unknown runner {runner!r}; expected one of {RUNNERS}")


def _is_cloud(path: str) -> bool:
    return "://" in path


def check_options(runner: str, options: Any, inputs: list[str], output: str,
                  *, submitting: bool = True) -> OptionCheck:
    """Everything wrong with ``options`` for ``runner``, before any work is submitted."""
    from apache_beam.options.pipeline_options import (
        DirectOptions,
        FlinkRunnerOptions,
        GoogleCloudOptions,
        PortableOptions,
        SetupOptions,
        SparkRunnerOptions,
        WorkerOptions,
    )

    check = OptionCheck()
    if runner == "DirectRunner":
        direct = options.view_as(DirectOptions)
        if direct.direct_num_workers < 0:
            check.errors.append("--direct_num_workers must be >= 0 (0 = all cores)")
        return check
    if runner == "BundleBasedDirectRunner":
        return check

    remote_paths = [p for p in [*inputs, output] if not _is_cloud(p)]
    if runner == "DataflowRunner":
        from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
        from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

        check.errors.extend(PipelineOptionsValidator(options, DataflowRunner()).validate())
        gcp = options.view_as(GoogleCloudOptions)
        if not gcp.region:
            check.errors.append("Missing required option: region (e.g. --region=us-central1).")
        worker = options.view_as(WorkerOptions)
        setup = options.view_as(SetupOptions)
        if not (worker.sdk_container_image or setup.setup_file or setup.requirements_file):
            check.errors.append(
                "Dataflow workers need the afm package: give --sdk_container_image=IMAGE "
                "(built from deploy/dataflow/Dockerfile) or --setup_file=./setup.py")
        if remote_paths:
            check.errors.append(
                f"Dataflow workers cannot read this machine's disk: use gs:// paths for "
                f"inputs and output, not {remote_paths[:3]}")
        if submitting:
            try:
                import apitools  # noqa: F401
            except ImportError:
                check.errors.append("submission needs Beam's GCP extra: "
                                    "pip install 'apache-beam[gcp]==2.77.0'")
        return check

    portable = options.view_as(PortableOptions)
    env = (portable.environment_type or "DOCKER").upper()
    if env not in PORTABLE_ENVIRONMENTS and not env.startswith("BEAM:ENV:"):
        check.errors.append(f"--environment_type={env}: expected one of {PORTABLE_ENVIRONMENTS}")
    if env == "DOCKER" and not portable.environment_config:
        check.warnings.append(
            "environment_type DOCKER without --environment_config: workers use the stock "
            "Beam SDK image, which lacks afm; give --environment_config=IMAGE built from "
            "deploy/dataflow/Dockerfile")
    if env != "LOOPBACK" and remote_paths:
        check.warnings.append(
            f"local paths {remote_paths[:3]} must exist on every cluster worker (shared "
            "filesystem); use gs:// / s3:// / hdfs:// paths otherwise")
    if runner == "FlinkRunner":
        flink = options.view_as(FlinkRunnerOptions)
        if portable.job_endpoint:
            pass
        elif flink.flink_master in (None, "", "[auto]", "[local]"):
            check.errors.append(
                "FlinkRunner needs --flink_master=HOST:PORT (the JobManager REST address) or "
                "--job_endpoint of a running Beam Flink job server; '[auto]'/'[local]' would "
                "download and start an embedded Flink, which this command does not do")
        if flink.parallelism is not None and flink.parallelism == 0:
            check.errors.append("--parallelism must be positive (or -1 for Flink's default)")
    elif runner == "SparkRunner":
        spark = options.view_as(SparkRunnerOptions)
        if portable.job_endpoint:
            pass
        elif spark.spark_submit_uber_jar:
            if not spark.spark_rest_url:
                check.errors.append("--spark_submit_uber_jar needs --spark_rest_url="
                                    "http://MASTER:6066")
        elif not spark.spark_master_url or spark.spark_master_url.startswith("local"):
            check.errors.append(
                "SparkRunner needs --spark_master_url=spark://HOST:7077 (or --job_endpoint of "
                "a running Beam Spark job server); 'local[N]' would download a job server")
    return check


def local_workers(options: Any) -> int:
    """How many worker processes the local runner will use."""
    from apache_beam.options.pipeline_options import DirectOptions

    n = options.view_as(DirectOptions).direct_num_workers
    return n if n > 0 else (os.cpu_count() or 1)
