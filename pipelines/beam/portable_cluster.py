"""Beam's own job service and an external SDK worker pool, run as a cluster would run them.

For tests and benchmarks run from a checkout (the package is built from it):

* afm is installed non-editable into its own site directory (``pip install --target``),
  so workers import the package as built, with its package data, never the checkout;
* each service runs inside a private mount namespace (``unshare -m``) in which the
  launcher's temporary directory and the source tree (with the launcher's virtualenv)
  are hidden under empty tmpfs mounts; the virtualenv's packages stay reachable through
  a bind mount elsewhere, so the worker pool's bare ``python`` (it starts SDK workers as
  ``python -c ...``) is a Python with Beam, and ``PYTHONPATH`` holds the afm site;
* both services listen on free loopback ports and are stopped by process group.

Where ``unshare`` is not permitted (an unprivileged container), the services run
unmasked and :attr:`PortableCluster.masked` says so; callers print it.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from afm.areas import AREAS

REPO = Path(__file__).resolve().parents[2]  # the checkout (pipelines/beam/ is afm.pipelines.beam)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"service exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s:\n"
                       f"{log.read_text()[-3000:]}")


def package_parts() -> list[str]:
    """What a build of the checkout needs: the project files and every area's folder (from
    the one area list, ``afm/areas.py``, as ``setup.py`` reads it)."""

    return ["pyproject.toml", "setup.py", "README.md", "constraints.txt", *sorted(a.folder for a in AREAS)]


def install_site(target: Path, scratch: Path) -> None:
    """afm built and installed (not editable) into ``target``, without dependencies (the
    virtualenv provides them) and without the network. Built from a copy of the sources,
    so the build writes nothing into the checkout."""
    import shutil

    env = {**os.environ, "TMPDIR": str(scratch), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    source = scratch / "afm-source"
    source.mkdir(parents=True, exist_ok=True)
    for part in package_parts():
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, source / part,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, source / part)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(source)],
        capture_output=True, text=True, env=env, cwd=str(scratch))
    if proc.returncode != 0:
        raise RuntimeError(f"pip install --target failed:\n{proc.stderr[-3000:]}")


def unshare_permitted() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


@dataclass
class PortableCluster:
    """A local Beam job service + worker pool (see the module docstring)."""

    base: Path
    launcher_tmp: Path
    site: Path
    mask: bool = True  # hide the launcher's files (False: a benchmark whose data is there)
    masked: bool = False
    job_port: int = 0
    pool_port: int = 0
    procs: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    @property
    def pipeline_args(self) -> list[str]:
        return ["--runner", "PortableRunner", f"--job_endpoint=localhost:{self.job_port}",
                "--environment_type=EXTERNAL", f"--environment_config=localhost:{self.pool_port}"]

    def start(self) -> PortableCluster:
        self.masked = self.mask and unshare_permitted()
        self.job_port, self.pool_port = free_port(), free_port()
        self._start("worker-pool", ["-m", "apache_beam.runners.worker.worker_pool_main",
                                    f"--service_port={self.pool_port}"], self.pool_port)
        self._start("job-service", ["-m", "apache_beam.runners.portability.local_job_service_main",
                                    f"--port={self.job_port}"], self.job_port)
        return self

    def _start(self, name: str, args: list[str], port: int) -> None:
        venv = Path(sys.prefix)
        venv_view = self.base / f"{name}-venv"
        work = self.base / f"{name}-work"
        tmp = self.base / f"{name}-tmp"
        for d in (venv_view, work, tmp):
            d.mkdir(parents=True, exist_ok=True)
        log = self.base / f"{name}.log"
        env_vars = {"PYTHONPATH": str(self.site), "TMPDIR": str(tmp),
                    "PYTHONDONTWRITEBYTECODE": "1"}
        if self.masked:
            hide = [REPO, self.launcher_tmp]
            script = "set -e\n" + f"mount --bind {shlex.quote(str(venv))} {shlex.quote(str(venv_view))}\n"
            script += "".join(f"mount -t tmpfs -o size=1m afm-hidden {shlex.quote(str(h))}\n"
                              for h in hide)
            # Proof the mask holds before the service starts: the checkout is gone.
            script += (f"if [ -e {shlex.quote(str(REPO / 'pyproject.toml'))} ]; then "
                       "echo 'afm source tree still visible: mask failed' >&2; exit 3; fi\n")
            bin_dir = venv_view / "bin"
        else:
            script = ""
            bin_dir = venv / "bin"
        env_vars["PATH"] = f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env_vars.items())
        script += f"cd {shlex.quote(str(work))}\nexec env {exports} python " + " ".join(
            shlex.quote(a) for a in args) + "\n"
        cmd = (["unshare", "-m", "sh", "-c", script] if self.masked else ["sh", "-c", script])
        with open(log, "wb") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.procs.append(proc)
        self.logs.append(log)
        wait_for_port(port, proc, log)

    def stop(self) -> None:
        """Stop every service and what it started (its process group), by pid."""
        for proc in self.procs:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.procs.clear()

    def log_text(self) -> str:
        return "\n".join(f"==== {p.name}\n{p.read_text(errors='replace')}" for p in self.logs)
