"""Beam's own logs in a file beside the output, not on the user's terminal.

A local curate run used to print some sixty lines of Beam worker start-up and channel
logs, burying the run's own output. Two streams carry them: the launching process's
``apache_beam`` loggers (the runner, and worker records forwarded over the Fn API
logging service), and the stdout/stderr of the SDK worker processes the multi-process
local runner starts. :func:`beam_logs` sends the first to ``log_file`` for the length of
a run; :func:`logged_local_runner` starts the workers with their output appended to the
same file. Either can be left on the terminal (``--worker-logs terminal``).

The file is ``OUTPUT/_logs/<run id>.log`` for a local output (``_``-prefixed names are
skipped by afm's readers, as by Spark's and Hadoop's; the output policy keeps ``_logs``
across runs, so the log of a failed run is still there), and a file under the system
temp directory when the output is remote.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from afm import fs

LOGS_DIR = "_logs"
# Loggers whose records are the run's, not the user's: Beam's, and those of the libraries
# the stages call, which warn once per odd page ("discarding data: URL") and, on the
# single-process runner, would print on the terminal.
ROUTED_LOGGERS = ("apache_beam", "trafilatura", "htmldate", "courlan", "justext", "readability",
                  "charset_normalizer")
WORKER_LOGS = ("file", "terminal")
_default = {"worker_logs": "file"}


def set_worker_logs(mode: str) -> None:
    """This process's choice for Beam's logs (the commands' ``--worker-logs``)."""
    if mode not in WORKER_LOGS:
        raise ValueError(f"worker logs: expected one of {WORKER_LOGS}, got {mode!r}")
    _default["worker_logs"] = mode


def worker_logs() -> str:
    return _default["worker_logs"]


def log_file(output: str, run_id: str) -> str:
    """Where a run's Beam logs go (see the module docstring)."""
    if fs.is_remote(output):
        return os.path.join(tempfile.gettempdir(), "afm-logs", f"{run_id}.log")
    return os.path.join(output, LOGS_DIR, f"{run_id}.log")


@contextmanager
def beam_logs(path: str | None) -> Iterator[str | None]:
    """Route the :data:`ROUTED_LOGGERS` of this process to ``path`` (INFO and above for
    Beam's, WARNING for the libraries') while the block runs; ``None`` leaves them as
    they are."""
    if path is None:
        yield None
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    saved = []
    for name in ROUTED_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO if name == "apache_beam" else logging.WARNING)
        logger.propagate = False
    try:
        yield path
    finally:
        for logger, level, propagate in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate
        handler.close()


def logged_local_runner(path: str | None) -> Any:
    """Beam's FnApiRunner whose worker processes (multi-process mode) append their output
    to ``path`` instead of the terminal (``None``: Beam's own runner)."""
    from apache_beam.options.pipeline_options import DirectOptions
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from apache_beam.transforms import environments

    if path is None:
        return FnApiRunner()

    class LoggedFnApiRunner(FnApiRunner):
        """FnApiRunner.run_pipeline picks the worker command for ``multi_processing``
        itself; the same command is given here, with its output redirected (Beam runs
        it through a shell)."""

        def run_pipeline(self, pipeline: Any, options: Any) -> Any:
            direct = options.view_as(DirectOptions)
            if direct.direct_running_mode != "multi_processing":
                return super().run_pipeline(pipeline, options)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            command = (f"{shlex.quote(sys.executable)} -m apache_beam.runners.worker.sdk_worker_main "
                       f">> {shlex.quote(path)} 2>&1")
            self._default_environment = environments.SubprocessSDKEnvironment.from_command_string(
                command_string=command)
            direct.direct_running_mode = None  # the environment above stands
            try:
                return super().run_pipeline(pipeline, options)
            finally:
                direct.direct_running_mode = "multi_processing"

    return LoggedFnApiRunner()


__all__ = ["LOGS_DIR", "WORKER_LOGS", "beam_logs", "log_file", "logged_local_runner", "set_worker_logs",
           "worker_logs", "ROUTED_LOGGERS"]
