"""One runner factory for every data pipeline (curate, dedup, decontam run, tokenize).

Every command builds its pipeline with :func:`build_options` + :func:`make_runner`, checks
the options with :func:`check_options` (and the paths its workers will open with
:mod:`afm.pipelines.beam.worker_paths`) before anything is submitted, and runs it with
:func:`run_to_completion`. Any Beam option given on the command line
(``--name=value``) passes through unchanged.

Runners:

* ``DirectRunner``: Beam's FnApiRunner on this machine, created explicitly because Beam
  2.77's ``DirectRunner`` name first tries the Prism runner, which downloads a Go binary
  at run time. ``--direct_num_workers=N`` worker processes (0 = one per core). Its
  buffers between stages move to disk when they grow (:mod:`afm.pipelines.beam.local_shuffle`)
  and its processes give freed memory back (:mod:`afm.pipelines.beam.allocator`), so a
  run's memory does not grow with the corpus.
* ``BundleBasedDirectRunner``: Beam's older local runner; it retries a failed bundle
  like Dataflow does (the fault-injection test uses it).
* ``PortableRunner``: any Beam job service given by ``--job_endpoint=HOST:PORT`` (a Flink
  or Spark job server, Beam's local job service) with the SDK workers named by
  ``--environment_type`` / ``--environment_config`` (``EXTERNAL`` = a running worker
  pool, ``DOCKER`` = the image of ``deploy/dataflow/``, ``PROCESS``, ``LOOPBACK``).
* ``FlinkRunner`` / ``SparkRunner``: the portable runner plus a Beam job server that Beam
  starts from its jar. Without ``--job_endpoint`` of a running job service, the jar must
  be given (``--flink_job_server_jar`` / ``--spark_job_server_jar``): Beam would
  otherwise download it from Maven at submission time.
* ``DataflowRunner``: Google Cloud Dataflow; needs Beam's GCP extra (``afm[gcp]``) and a
  worker image with afm (``deploy/dataflow/Dockerfile``).
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from afm import fs
from afm.console import console
from afm.errors import UserError
from afm.pipelines.beam.allocator import returning_freed_memory
from afm.pipelines.beam.logs import logged_local_runner

RUNNERS = ("DirectRunner", "PortableRunner", "DataflowRunner", "FlinkRunner", "SparkRunner",
           "BundleBasedDirectRunner")
LOCAL_RUNNERS = ("DirectRunner", "BundleBasedDirectRunner")
PORTABLE_RUNNERS = ("PortableRunner", "FlinkRunner", "SparkRunner")
PORTABLE_ENVIRONMENTS = ("DOCKER", "PROCESS", "EXTERNAL", "LOOPBACK")
GCP_HINT = ("install Beam's GCP extra on the submitting machine: pip install -c "
            "constraints.txt 'afm[gcp]' (from the afm checkout)")
IMAGE_HINT = "the image built from deploy/dataflow/Dockerfile (afm, its models, gcp + aws extras)"


class RunnerError(UserError):
    """A runner that cannot be used as configured (a user error: reported without a
    traceback by every command)."""


@dataclass
class OptionCheck:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def extend(self, other: OptionCheck) -> OptionCheck:
        self.errors += other.errors
        self.warnings += other.warnings
        return self


def _has_flag(args: list[str], name: str) -> bool:
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in args)


def check_runner_name(runner: str) -> None:
    if runner not in RUNNERS:
        raise RunnerError(f"unknown runner {runner!r}; expected one of {', '.join(RUNNERS)}")


@functools.lru_cache(maxsize=1)
def _beam_flags() -> frozenset[str]:
    """Beam's options that take no value (``store_true`` and the like), from Beam's parser."""
    try:
        from apache_beam.options import pipeline_options as po
    except ImportError:  # no Beam here: the command will say so; assume every option has a value
        return frozenset()
    parser = po._BeamArgumentParser(allow_abbrev=False)
    seen: set[type] = set()
    stack = list(po.PipelineOptions.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        if "_add_argparse_args" in cls.__dict__:
            try:
                cls._add_argparse_args(parser)
            except Exception:  # noqa: BLE001 - an option defined twice by plugins: keep the first
                continue
    return frozenset(opt for action in parser._actions if action.nargs == 0 for opt in action.option_strings)


def join_option_values(tokens: Sequence[str], own: set[str]) -> list[str]:
    """``--name value`` -> ``--name=value`` for options that are not the command's own
    (``own``) and take a value in Beam; everything else unchanged, in order."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if (token.startswith("--") and "=" not in token and token not in own and following is not None
                and not following.startswith("-") and token not in _beam_flags()):
            out.append(f"{token}={following}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def build_options(runner: str, pipeline_args: list[str] | None = None,
                  *, local_workers: int = 0) -> Any:
    """``PipelineOptions`` for ``runner`` from the user's Beam arguments plus our defaults.

    Local runner: ``local_workers`` worker processes unless ``--direct_num_workers`` is
    given (0 = one per core; 1 runs in this process). Cluster runners: nothing of the
    launcher's ``__main__`` is pickled. Dataflow: staging under ``temp_location``.
    """
    from apache_beam.options.pipeline_options import (
        GoogleCloudOptions,
        PipelineOptions,
        SetupOptions,
    )

    check_runner_name(runner)
    args = join_option_values(list(pipeline_args or []), set())  # --name value -> --name=value
    bad = [a for a in args if not a.startswith("-")]
    if bad:
        raise RunnerError(f"unexpected argument {bad[0]!r}: not a Beam option (options start with --; "
                          "give them as --name=value or --name value)")
    if runner == "DirectRunner":
        if not _has_flag(args, "direct_num_workers"):
            args.append(f"--direct_num_workers={local_workers}")
        if not _has_flag(args, "direct_running_mode"):
            one = any(a == "--direct_num_workers=1" for a in args)
            args.append("--direct_running_mode=" + ("in_memory" if one else "multi_processing"))
    options = PipelineOptions(args)
    if runner not in LOCAL_RUNNERS:
        options.view_as(SetupOptions).save_main_session = False
    if runner == "DataflowRunner":
        gcp = options.view_as(GoogleCloudOptions)
        if gcp.temp_location and not gcp.staging_location:
            gcp.staging_location = gcp.temp_location.rstrip("/") + "/staging"
    return options


def make_runner(runner: str, *, worker_log: str | None = None) -> Any:
    """The runner object for a runner name (see the module docstring). ``worker_log``:
    the local runner's worker processes write their output there, not to the terminal
    (:mod:`afm.pipelines.beam.logs`)."""
    check_runner_name(runner)
    if runner == "DirectRunner":
        return _bounded_memory(worker_log)
    if runner == "BundleBasedDirectRunner":
        from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

        return BundleBasedDirectRunner()
    if runner == "DataflowRunner":
        if not _have_gcp():
            raise RunnerError(f"DataflowRunner needs Beam's GCP extra: {GCP_HINT}")
        from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

        return DataflowRunner()
    if runner == "FlinkRunner":
        from apache_beam.runners.portability.flink_runner import FlinkRunner

        return FlinkRunner()
    if runner == "SparkRunner":
        from apache_beam.runners.portability.spark_runner import SparkRunner

        return SparkRunner()
    from apache_beam.runners.portability.portable_runner import PortableRunner

    return PortableRunner()


def _bounded_memory(worker_log: str | None) -> Any:
    """The local runner whose every run keeps its buffers between stages on disk when they
    grow and gives freed memory back (:mod:`afm.pipelines.beam.local_shuffle`,
    :mod:`afm.pipelines.beam.allocator`): its memory does not grow with the corpus."""
    from afm.pipelines.beam.local_shuffle import disk_backed_shuffles

    runner = logged_local_runner(worker_log)
    run = runner.run_pipeline

    def run_pipeline(pipeline: Any, options: Any) -> Any:
        with returning_freed_memory(), disk_backed_shuffles():
            return run(pipeline, options)

    runner.run_pipeline = run_pipeline
    return runner


def _have_gcp() -> bool:
    try:
        import apitools  # noqa: F401 - the client Beam's DataflowRunner and gs:// need
    except ImportError:
        return False
    return True


def workers_share_this_machine(runner: str, options: Any) -> bool:
    """Whether the SDK workers run in (or beside) the launching process, so that its
    local files, temp directory included, are theirs: the local runners, and portable
    runs with ``LOOPBACK`` workers or an embedded job service."""
    if runner in LOCAL_RUNNERS:
        return True
    if runner == "DataflowRunner":
        return False
    from apache_beam.options.pipeline_options import PortableOptions

    portable = options.view_as(PortableOptions)
    env = (portable.environment_type or "").upper()
    return env == "LOOPBACK" or portable.job_endpoint == "embed"


def check_options(runner: str, options: Any, *, submitting: bool = True) -> OptionCheck:
    """Everything wrong with ``options`` for ``runner``, before any work is submitted
    (the paths the workers open are checked by :mod:`afm.pipelines.beam.worker_paths`)."""
    from apache_beam.options.pipeline_options import DirectOptions

    check = OptionCheck()
    if runner == "DirectRunner":
        if options.view_as(DirectOptions).direct_num_workers < 0:
            check.errors.append("--direct_num_workers must be >= 0 (0 = all cores)")
        return check
    if runner == "BundleBasedDirectRunner":
        return check
    if runner == "DataflowRunner":
        return _check_dataflow(options, submitting)
    _check_environment(runner, options, check)
    if runner == "PortableRunner":
        _check_job_endpoint(options, check)
    elif runner == "FlinkRunner":
        _check_flink(options, check)
    else:
        _check_spark(options, check)
    return check


def _check_dataflow(options: Any, submitting: bool) -> OptionCheck:
    from apache_beam.options.pipeline_options import (
        GoogleCloudOptions,
        SetupOptions,
        WorkerOptions,
    )
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

    check = OptionCheck()
    check.errors.extend(PipelineOptionsValidator(options, DataflowRunner()).validate())
    if not options.view_as(GoogleCloudOptions).region:
        check.errors.append("Missing required option: region (e.g. --region=us-central1).")
    worker = options.view_as(WorkerOptions)
    setup = options.view_as(SetupOptions)
    if not (worker.sdk_container_image or setup.setup_file or setup.requirements_file):
        check.errors.append(
            f"Dataflow workers need afm and its models: give --sdk_container_image=IMAGE, "
            f"{IMAGE_HINT}")
    if submitting and not _have_gcp():
        check.errors.append(f"submitting to Dataflow needs Beam's GCP extra: {GCP_HINT}")
    return check


def _check_environment(runner: str, options: Any, check: OptionCheck) -> None:
    from apache_beam.options.pipeline_options import PortableOptions

    portable = options.view_as(PortableOptions)
    env = (portable.environment_type or "DOCKER").upper()
    if env not in PORTABLE_ENVIRONMENTS and not env.startswith("BEAM:ENV:"):
        check.errors.append(f"--environment_type={env}: expected one of "
                            f"{', '.join(PORTABLE_ENVIRONMENTS)}")
    elif env == "EXTERNAL" and not portable.environment_config:
        check.errors.append("--environment_type=EXTERNAL needs --environment_config=HOST:PORT "
                            "of a running SDK worker pool (python -m apache_beam.runners."
                            "worker.worker_pool_main --service_port=PORT, with afm installed)")
    elif env == "PROCESS" and not portable.environment_config:
        check.errors.append("--environment_type=PROCESS needs --environment_config="
                            "'{\"command\": \"/path/to/boot\"}' (Beam's SDK container boot "
                            "program, on every worker, with afm installed beside it)")
    elif env == "DOCKER" and not portable.environment_config:
        check.errors.append(f"--environment_type=DOCKER needs --environment_config=IMAGE: the "
                            f"stock Beam SDK image lacks afm; use {IMAGE_HINT}")


def _check_job_endpoint(options: Any, check: OptionCheck) -> None:
    from apache_beam.options.pipeline_options import PortableOptions

    if not options.view_as(PortableOptions).job_endpoint:
        check.errors.append("PortableRunner needs --job_endpoint=HOST:PORT of a running Beam "
                            "job service (a Flink or Spark job server, or python -m "
                            "apache_beam.runners.portability.local_job_service_main)")


def _check_jar(kind: str, jar: str | None, check: OptionCheck, *, needs_java: bool) -> None:
    """The job-server jar Beam would start: it must be given (else Beam downloads it from
    Maven at submission) and, as a local path, exist; starting it needs ``java``."""
    name = kind.lower()
    if not jar:
        check.errors.append(
            f"{kind}Runner needs the Beam {kind} job-server jar: --{name}_job_server_jar="
            f"PATH (beam-runners-{name}-*-job-server-2.77.0.jar, from Maven Central), or "
            f"--job_endpoint=HOST:PORT of a {kind} job server that is already running")
        return
    if not fs.is_remote(jar) and not os.path.isfile(jar):
        check.errors.append(f"--{name}_job_server_jar={jar}: no such file")
    if needs_java and shutil.which("java") is None:
        check.errors.append(f"--{name}_job_server_jar: starting the job server needs java on "
                            "PATH (or give --job_endpoint of a running one)")


def _check_flink(options: Any, check: OptionCheck) -> None:
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, PortableOptions

    if options.view_as(PortableOptions).job_endpoint:
        return
    flink = options.view_as(FlinkRunnerOptions)
    if flink.flink_master in (None, "", "[auto]", "[local]"):
        check.errors.append(
            "FlinkRunner needs --flink_master=HOST:PORT (the JobManager REST address) or "
            "--job_endpoint of a running Beam Flink job server; '[auto]'/'[local]' would "
            "start an embedded Flink, which this command does not do")
    _check_jar("Flink", flink.flink_job_server_jar, check,
               needs_java=not flink.flink_submit_uber_jar)
    if flink.parallelism is not None and flink.parallelism == 0:
        check.errors.append("--parallelism must be positive (or -1 for Flink's default)")


def _check_spark(options: Any, check: OptionCheck) -> None:
    from apache_beam.options.pipeline_options import PortableOptions, SparkRunnerOptions

    if options.view_as(PortableOptions).job_endpoint:
        return
    spark = options.view_as(SparkRunnerOptions)
    if spark.spark_submit_uber_jar:
        if not spark.spark_rest_url:
            check.errors.append("--spark_submit_uber_jar needs --spark_rest_url="
                                "http://MASTER:6066")
    elif not spark.spark_master_url or spark.spark_master_url.startswith("local"):
        check.errors.append(
            "SparkRunner needs --spark_master_url=spark://HOST:7077 (or --job_endpoint of a "
            "running Beam Spark job server); 'local[N]' would start Spark inside the job server")
    _check_jar("Spark", spark.spark_job_server_jar, check,
               needs_java=not spark.spark_submit_uber_jar)


def run_to_completion(pipeline: Any, *, runner: str | None = None, options: Any = None) -> Any:
    """Run ``pipeline``, wait for it, and fail unless it finished (``DONE``). On a cluster
    runner (``runner`` given), the job's id and where to watch it are printed as soon as
    it is submitted."""
    result = pipeline.run()
    if runner is not None and runner not in LOCAL_RUNNERS:
        console.print(f"[bold]{watch_hint(runner, result, options)}", highlight=False)
    state = result.wait_until_finish()
    if str(state) not in ("DONE", "PipelineState.DONE"):
        raise RuntimeError(f"pipeline ended in state {state}")
    return result


def watch_hint(runner: str, result: Any, options: Any) -> str:
    """The submitted job's id and where its progress, logs and metrics are shown."""
    job = _job_id(result)
    if runner == "DataflowRunner":
        from apache_beam.options.pipeline_options import GoogleCloudOptions

        gcp = options.view_as(GoogleCloudOptions) if options is not None else None
        region, project = (gcp.region, gcp.project) if gcp is not None else ("REGION", "PROJECT")
        return (f"submitted Dataflow job {job}; watch it at https://console.cloud.google.com/"
                f"dataflow/jobs/{region}/{job}?project={project} (or: gcloud dataflow jobs show {job} "
                f"--region {region}); worker logs are in Cloud Logging")
    where = ""
    if options is not None:
        from apache_beam.options.pipeline_options import FlinkRunnerOptions, PortableOptions

        flink = options.view_as(FlinkRunnerOptions).flink_master
        endpoint = options.view_as(PortableOptions).job_endpoint
        if runner == "FlinkRunner" and flink and not flink.startswith("["):
            where = f"; watch it in Flink's web UI at http://{flink} (job server logs hold the workers')"
        elif runner == "SparkRunner":
            where = "; watch it in the Spark master's web UI (port 8080 of the master)"
        elif endpoint:
            where = f"; its job service is {endpoint} (the Flink / Spark UI behind it shows progress)"
    return f"submitted {runner} job {job}{where}"


def _job_id(result: Any) -> str:
    for attr in ("job_id", "_job_id"):
        value = getattr(result, attr, None)
        if callable(value):
            try:
                value = value()
            except Exception:  # noqa: BLE001 - an id is informational
                value = None
        if value:
            return str(value)
    job = getattr(result, "_job", None)
    return str(getattr(job, "id", None) or "(id not reported by this runner)")


def local_workers(options: Any) -> int:
    """How many worker processes the local runner will use."""
    from apache_beam.options.pipeline_options import DirectOptions

    n = options.view_as(DirectOptions).direct_num_workers
    return n if n > 0 else (os.cpu_count() or 1)
