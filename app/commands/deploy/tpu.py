"""``afm tpu-train``: create or reuse a TPU VM slice (or a multislice), copy the code,
install JAX's TPU extra and run ``afm train`` on every worker.

Everything goes through ``gcloud compute tpus`` (a single slice is a TPU VM node; N
slices are one queued resource with ``--node-count N``, which sets the MEGASCALE_*
variables that JAX's multislice runtime reads). ``--dry-run`` prints the exact commands
instead of running them. See ``deploy/tpu/README.md``.

Only the stdlib and click are imported: the launcher runs on a laptop without JAX.
"""

from __future__ import annotations

import shlex
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import click

REPO_ROOT = Path(__file__).resolve().parents[3]
SETUP_SCRIPT = REPO_ROOT / "deploy" / "tpu" / "worker_setup.sh"
# Paths never shipped to the workers (build outputs, local runs, the venv).
EXCLUDE = {".venv", "work", "build", ".git", "__pycache__", ".pytest_cache", ".ruff_cache", "afm.egg-info"}


@dataclass
class TpuPlan:
    """What to launch where; ``commands()`` turns it into gcloud invocations."""

    name: str
    zone: str
    accelerator: str
    version: str
    config: str
    workdir: str
    project: str | None = None
    num_slices: int = 1
    spot: bool = False
    jax_version: str = "0.10.2"
    train_args: list[str] = field(default_factory=list)
    tarball: str = "afm-src.tar.gz"

    def _common(self) -> list[str]:
        out = [f"--zone={self.zone}"]
        if self.project:
            out.append(f"--project={self.project}")
        return out

    def nodes(self) -> list[str]:
        if self.num_slices == 1:
            return [self.name]
        return [f"{self.name}-{i}" for i in range(self.num_slices)]

    def describe_command(self) -> list[str]:
        if self.num_slices == 1:
            return ["gcloud", "compute", "tpus", "tpu-vm", "describe", self.name, *self._common()]
        return ["gcloud", "compute", "tpus", "queued-resources", "describe", self.name, *self._common()]

    def create_command(self) -> list[str]:
        if self.num_slices == 1:
            cmd = [
                "gcloud", "compute", "tpus", "tpu-vm", "create", self.name, *self._common(),
                f"--accelerator-type={self.accelerator}", f"--version={self.version}",
            ]
        else:
            cmd = [
                "gcloud", "compute", "tpus", "queued-resources", "create", self.name, *self._common(),
                f"--accelerator-type={self.accelerator}", f"--runtime-version={self.version}",
                f"--node-count={self.num_slices}", f"--node-prefix={self.name}",
            ]
        if self.spot:
            cmd.append("--spot")
        return cmd

    def _ssh(self, node: str, command: str) -> list[str]:
        return [
            "gcloud", "compute", "tpus", "tpu-vm", "ssh", node, *self._common(),
            "--worker=all", f"--command={command}",
        ]

    def copy_commands(self, local_tarball: str) -> list[list[str]]:
        cmds = []
        for node in self.nodes():
            for src in (local_tarball, str(SETUP_SCRIPT)):
                cmds.append([
                    "gcloud", "compute", "tpus", "tpu-vm", "scp", src, f"{node}:~/",
                    *self._common(), "--worker=all",
                ])
        return cmds

    def setup_commands(self) -> list[list[str]]:
        cmd = f"JAX_VERSION={shlex.quote(self.jax_version)} bash ~/worker_setup.sh ~/{self.tarball}"
        return [self._ssh(node, cmd) for node in self.nodes()]

    def train_command(self) -> str:
        """The command every worker runs (all hosts of all slices, same arguments)."""
        args = [
            "~/afm-venv/bin/afm", "train", "--config", shlex.quote(self.config),
            "--workdir", shlex.quote(self.workdir), "--distributed",
        ]
        if self.num_slices > 1:
            # Only data parallelism crosses slices (DCN); FSDP/tensor stay inside a slice.
            args += ["--set", f"mesh.data={self.num_slices}", "--set", "mesh.fsdp=-1"]
        args += [shlex.quote(a) for a in self.train_args]
        return "cd ~/afm && nohup " + " ".join(args) + " > ~/afm-train.log 2>&1 &"

    def run_commands(self) -> list[list[str]]:
        return [self._ssh(node, self.train_command()) for node in self.nodes()]


def make_tarball(dest: Path, root: Path = REPO_ROOT) -> Path:
    """The checkout as a .tar.gz (without .venv, work/, .git and caches)."""

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        return None if any(p in EXCLUDE for p in parts) else info

    with tarfile.open(dest, "w:gz") as tar:
        for child in sorted(root.iterdir()):
            if child.name in EXCLUDE:
                continue
            tar.add(child, arcname=child.name, filter=keep)
    return dest


def _show(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


@click.command(
    "tpu-train",
    epilog="""\b
Examples:
  afm tpu-train --name afm-core --zone us-east5-a --accelerator v5p-1024 \\
      --config core --workdir /mnt/gcs/runs/core --dry-run
  afm tpu-train --name afm-core --zone us-east5-a --accelerator v5p-1024 --num-slices 8 \\
      --config core --workdir /mnt/gcs/runs/core -- --data '/mnt/gcs/tokens/*.parquet'
\b
Re-running reuses the slice (describe succeeds) and resumes training from the latest
checkpoint in --workdir. Extra arguments after `--` go to `afm train` unchanged.
""",
)
@click.option("--name", required=True, help="TPU VM (or queued resource) name.")
@click.option("--zone", required=True)
@click.option("--project", default=None)
@click.option("--accelerator", default="v5p-128", show_default=True, help="Accelerator type per slice.")
@click.option("--version", default="v2-alpha-tpuv5", show_default=True, help="TPU VM runtime version.")
@click.option("--num-slices", type=int, default=1, show_default=True, help="> 1: multislice, data parallel over DCN.")
@click.option("--spot", is_flag=True, help="Spot capacity (preemptible: training resumes on restart).")
@click.option("--config", "config", required=True, help="afm train --config (stage name or YAML in the repo).")
@click.option("--workdir", required=True, help="Run directory shared by all hosts, e.g. a gcsfuse mount /mnt/gcs/runs/core.")
@click.option("--jax-version", default="0.10.2", show_default=True)
@click.option("--dry-run", is_flag=True, help="Print the gcloud commands instead of running them.")
@click.argument("train_args", nargs=-1, type=click.UNPROCESSED)
def tpu_train_command(name, zone, project, accelerator, version, num_slices, spot, config, workdir, jax_version, dry_run, train_args) -> None:
    """Launch `afm train` on every worker of a TPU VM slice (created if missing)."""
    from afm.console import console, print_summary

    if num_slices < 1:
        raise click.UsageError("--num-slices must be >= 1")
    plan = TpuPlan(
        name=name, zone=zone, project=project, accelerator=accelerator, version=version,
        config=config, workdir=workdir, num_slices=num_slices, spot=spot,
        jax_version=jax_version, train_args=list(train_args),
    )
    local_tar = str(Path(tempfile.gettempdir()) / plan.tarball)
    steps: list[tuple[str, list[str]]] = [("create (if missing)", plan.create_command())]
    steps += [("copy", c) for c in plan.copy_commands(local_tar)]
    steps += [("install", c) for c in plan.setup_commands()]
    steps += [("train", c) for c in plan.run_commands()]
    if dry_run:
        click.echo(f"# reuse check: {_show(plan.describe_command())}")
        click.echo(f"# pack the checkout: tar czf {local_tar} (without {', '.join(sorted(EXCLUDE))})")
        for what, cmd in steps:
            click.echo(f"# {what}\n{_show(cmd)}")
        return
    exists = subprocess.run(plan.describe_command(), capture_output=True).returncode == 0
    make_tarball(Path(local_tar))
    done = []
    for what, cmd in steps:
        if what.startswith("create") and exists:
            console.print(f"reusing {plan.name}")
            continue
        console.print(f"[bold]{what}[/]: {_show(cmd)}")
        result = subprocess.run(cmd)
        if result.returncode != 0:
            raise click.ClickException(f"{what} failed (exit {result.returncode}): {_show(cmd)}")
        done.append(what)
    print_summary(
        "tpu-train",
        {"slices": num_slices, "nodes": ", ".join(plan.nodes()), "workdir": workdir,
         "steps run": len(done), "log on each worker": "~/afm-train.log"},
    )


COMMANDS = [tpu_train_command]
