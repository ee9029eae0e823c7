"""CLI surfaces: --help examples, and the TPU launcher's --dry-run gcloud plan."""

from __future__ import annotations

import tarfile

from click.testing import CliRunner

from afm.app.commands.deploy.tpu import TpuPlan, make_tarball, tpu_train_command
from afm.app.commands.training.train import (
    bench_train_command,
    train_command,
    train_compare_command,
)


def test_help_has_examples():
    for cmd in (train_command, bench_train_command, train_compare_command, tpu_train_command):
        out = CliRunner().invoke(cmd, ["--help"])
        assert out.exit_code == 0 and "Examples:" in out.output


def test_dry_run_single_slice_prints_every_step():
    out = CliRunner().invoke(
        tpu_train_command,
        ["--name", "afm-x", "--zone", "us-east5-a", "--accelerator", "v5p-64", "--config", "core",
         "--workdir", "/mnt/gcs/runs/core", "--dry-run", "--", "--steps", "10"],
    )
    assert out.exit_code == 0, out.output
    text = out.output
    assert "gcloud compute tpus tpu-vm create afm-x --zone=us-east5-a --accelerator-type=v5p-64" in text
    assert "tpu-vm scp" in text and "--worker=all" in text
    assert "worker_setup.sh" in text and "JAX_VERSION=0.10.2" in text
    assert "afm train --config core --workdir /mnt/gcs/runs/core --distributed --steps 10" in text


def test_multislice_uses_queued_resource_and_dcn_data_axis():
    plan = TpuPlan(name="afm", zone="z", accelerator="v5p-1024", version="v", config="core",
                   workdir="/w", num_slices=8)
    assert plan.nodes() == [f"afm-{i}" for i in range(8)]
    create = " ".join(plan.create_command())
    assert "queued-resources create afm" in create and "--node-count=8" in create
    assert "--set mesh.data=8 --set mesh.fsdp=-1" in plan.train_command()
    assert len(plan.run_commands()) == 8


def test_tarball_skips_venv_and_work(tmp_path):
    root = tmp_path / "repo"
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / "training").mkdir()
    (root / "training" / "a.py").write_text("x = 1\n")
    (root / "work").mkdir()
    (root / "work" / "big.bin").write_text("0")
    tar = make_tarball(tmp_path / "src.tar.gz", root)
    names = tarfile.open(tar).getnames()
    assert "training/a.py" in names and not any(n.startswith((".venv", "work")) for n in names)
