"""The trainer end to end on CPU (8 fake devices): resume, meshes, stages, guards, CLI."""

from __future__ import annotations

import jax
import pytest
from afm.training.metrics import read_metrics
from afm.training.trainer import TrainingDiverged, train

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs XLA_FLAGS=--xla_force_host_platform_device_count=8")


def test_n_steps_equals_half_plus_resume(tmp_path, token_shards):
    full = train("tiny-core", tmp_path / "full", steps=4, data=token_shards, quiet=True)
    half = train("tiny-core", tmp_path / "split", steps=2, data=token_shards, quiet=True)
    assert half["steps"] == 2 and half["checkpoint"].endswith("/2")
    resumed = train("tiny-core", tmp_path / "split", steps=4, data=token_shards, quiet=True)
    assert resumed["start_step"] == 2 and resumed["steps"] == 4
    assert resumed["params_sha256"] == full["params_sha256"]
    assert resumed["final_loss"] == full["final_loss"]


def _losses(workdir, token_shards, mesh):
    d, f, t, s = (*mesh, 1)[:4]
    train(
        "tiny-core", workdir, steps=3, data=token_shards, quiet=True,
        overrides=[f"mesh.data={d}", f"mesh.fsdp={f}", f"mesh.tensor={t}", f"mesh.sequence={s}", "log_every=1"],
    )
    return [r["loss"] for r in read_metrics(workdir)]


@pytest.mark.parametrize(
    "mesh",
    [
        (2, 2, 2),
        pytest.param((2, 4, 1), marks=pytest.mark.slow),
        pytest.param((1, 1, 8), marks=pytest.mark.slow),
        pytest.param((2, 2, 1, 2), marks=pytest.mark.slow),  # + sequence parallelism
    ],
)
def test_same_loss_on_every_mesh(tmp_path, token_shards, mesh):
    """data x fsdp x tensor meshes give the 8x1x1 (pure data parallel) losses."""
    ref = _losses(tmp_path / "ref", token_shards, (8, 1, 1))
    got = _losses(tmp_path / "run", token_shards, mesh)
    assert len(got) == 3
    for a, b in zip(got, ref):
        assert abs(a - b) <= 2e-2 * abs(b), (mesh, got, ref)  # bf16 compute tolerance


@pytest.mark.slow
def test_three_tiny_stages_chain_and_loss_falls(tmp_path, token_shards):
    core = train("tiny-core", tmp_path / "core", steps=30, data=token_shards, quiet=True)
    assert core["final_loss"] < core["first_loss"] - 0.5
    cont = train("tiny-continued", tmp_path / "cont", steps=4, data=token_shards, init_from=tmp_path / "core", quiet=True)
    # starts from core's parameters: its first loss is far below a fresh model's
    assert cont["first_loss"] < core["first_loss"] - 0.5
    ctx = train("tiny-context", tmp_path / "ctx", steps=2, data=token_shards, init_from=tmp_path / "cont", quiet=True)
    assert ctx["steps"] == 2 and ctx["final_loss"] < core["first_loss"]


@pytest.mark.slow
def test_nan_guard_names_last_good_checkpoint(tmp_path, token_shards):
    with pytest.raises(TrainingDiverged, match=r"last good checkpoint: .*checkpoints/2"):
        train("tiny-core", tmp_path / "nan", steps=2, data=token_shards, quiet=True)
        train("tiny-core", tmp_path / "nan", steps=6, data=token_shards, quiet=True,
              overrides=["optimizer.learning_rate=1.0e+38", "log_every=1"])


def test_cli_prints_params_sha(tmp_path, token_shards):
    from afm.training.cli_train import train_command
    from click.testing import CliRunner

    args = ["--config", "tiny-core", "--workdir", str(tmp_path / "cli"), "--steps", "1", "--set", "checkpoint.async_save=false"]
    for shard in token_shards:
        args += ["--data", shard]
    result = CliRunner().invoke(train_command, args)
    assert result.exit_code == 0, result.output
    assert "params_sha256: " in result.output
    assert (tmp_path / "cli" / "checkpoints" / "1").is_dir()
    assert list((tmp_path / "cli" / "tb").iterdir())  # TensorBoard events
