"""Every path a pipeline's workers will open, checked before the job is submitted.

A DoFn runs on a worker, not on the machine that launched the job. On a cluster, a path
that exists on the launcher (a file in its ``/tmp``, a model inside its checkout) either
does not exist on the worker or, worse, is a different file there. Each command lists
what its workers open: inputs, the output directory, indexes (decontamination, dedup),
models and tokenizers. :func:`check_worker_paths` then applies these rules:

* a URL (``gs://``, ``s3://``, ``hdfs://``...) is read through :mod:`afm.fs` (Beam's filesystems) on
  every worker; it is checked to exist when this machine has the filesystem's extra;
* ``builtin`` (a model shipped inside the afm package) is resolved on each worker, in
  that worker's own installation;
* a local path is fine when the workers share this machine (local runner, ``LOOPBACK``);
* otherwise a local path under the launcher's temporary directory is an error (no worker
  sees it), any local path is an error on Dataflow (its workers see no shared disk), and
  on Flink/Spark/portable runners a warning: it must exist on every worker (a shared
  filesystem mounted at the same place).

Inputs and things read (indexes, models) must exist; an output may not yet.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Literal

from afm import fs
from afm.pipelines.beam.runners import OptionCheck, workers_share_this_machine

Access = Literal["read", "write"]


@dataclass(frozen=True)
class WorkerPath:
    """A path some DoFn opens: what it is (for messages), the path, read or written."""

    role: str
    path: str
    access: Access = "read"


def launcher_temp_dirs() -> list[str]:
    """This machine's temporary directories, as seen by the launching process."""
    dirs = {os.path.realpath(tempfile.gettempdir())}
    for var in ("TMPDIR", "TEMP", "TMP"):
        if os.environ.get(var):
            dirs.add(os.path.realpath(os.environ[var]))
    return sorted(dirs)


def under_launcher_temp(path: str) -> bool:
    real = os.path.realpath(path)
    return any(real == d or real.startswith(d.rstrip("/") + "/") for d in launcher_temp_dirs())


def _remote_exists(path: str) -> bool | None:
    """Whether a URL exists; None when this machine cannot tell (no filesystem extra)."""
    try:
        return fs.exists(path)
    except Exception:  # noqa: BLE001 - e.g. gs:// without Beam's GCP extra
        return None


def check_worker_paths(paths: list[WorkerPath], runner: str, options: Any) -> OptionCheck:
    """Every problem with ``paths`` for ``runner`` (see the module docstring)."""
    check = OptionCheck()
    shared_machine = workers_share_this_machine(runner, options)
    for wp in paths:
        path = wp.path
        if not path or path == fs.BUILTIN:
            continue
        what = f"{wp.role} {path}"
        if fs.is_remote(path):
            if wp.access == "read":
                found = _remote_exists(path)
                if found is False:
                    check.errors.append(f"{what}: not found")
                elif found is None:
                    check.warnings.append(f"{what}: cannot be checked from this machine (no "
                                          "Beam filesystem for its scheme here)")
            continue
        if wp.access == "read" and not os.path.exists(path):
            check.errors.append(f"{what}: not found")
            continue
        if shared_machine:
            continue
        if under_launcher_temp(path):
            check.errors.append(
                f"{what} is in this machine's temporary directory "
                f"({', '.join(launcher_temp_dirs())}), which {runner} workers cannot see; "
                "put it on storage the workers read (gs://, s3://, a shared filesystem)")
        elif runner == "DataflowRunner":
            check.errors.append(f"{what}: Dataflow workers cannot read this machine's disk; "
                                "use a gs:// path")
        else:
            check.warnings.append(f"{what} must exist at the same path on every {runner} "
                                  "worker (a shared filesystem); gs:// / s3:// paths avoid that")
    return check
