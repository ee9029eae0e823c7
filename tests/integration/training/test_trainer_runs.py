"""The trainer end to end on CPU (8 fake devices): resume, meshes and sequence parallelism,
evaluation hooks, profiling, skip-steps, guards, CLI."""

from __future__ import annotations

import json
import sys
import types

import jax
import numpy as np
import pytest

from afm.training.core.hooks import ModelView
from afm.training.core.metrics import read_metrics
from afm.training.core.trainer import TrainingDiverged
from afm.training.runs.train import train

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs XLA_FLAGS=--xla_force_host_platform_device_count=8")


def test_n_steps_equals_half_plus_resume(tmp_path, token_shards):
    full = train("tiny-core", tmp_path / "full", steps=4, data=token_shards, quiet=True)
    half = train("tiny-core", tmp_path / "split", steps=2, data=token_shards, quiet=True)
    assert half["steps"] == 2 and half["checkpoint"].endswith("/2")
    resumed = train("tiny-core", tmp_path / "split", steps=4, data=token_shards, quiet=True)
    assert resumed["start_step"] == 2 and resumed["steps"] == 4
    assert resumed["params_sha256"] == full["params_sha256"]
    assert resumed["final_loss"] == full["final_loss"]
    checksums = [r["batch_checksum"] for r in read_metrics(tmp_path / "full")]
    assert len(set(checksums)) == len(checksums)  # a new batch every step


def _losses(workdir, token_shards, mesh, extra=()):
    d, f, t, s = (*mesh, 1)[:4]
    train(
        "tiny-core", workdir, steps=3, data=token_shards, quiet=True,
        overrides=[f"mesh.data={d}", f"mesh.fsdp={f}", f"mesh.tensor={t}", f"mesh.sequence={s}", "log_every=1", *extra],
    )
    return [r["loss"] for r in read_metrics(workdir)]


@pytest.fixture(scope="module")
def reference_losses(tmp_path_factory, token_shards):
    return _losses(tmp_path_factory.mktemp("ref"), token_shards, (8, 1, 1))


@pytest.mark.parametrize(
    "mesh",
    [
        (2, 2, 2),
        (2, 1, 2, 2),  # sequence parallel: heads over tensor x sequence, KV heads repeated
        pytest.param((2, 4, 1), marks=pytest.mark.slow),
        pytest.param((1, 1, 8), marks=pytest.mark.slow),
        pytest.param((2, 2, 1, 2), marks=pytest.mark.slow),
        pytest.param((1, 1, 1, 8), marks=pytest.mark.slow),  # 4 heads on 8 shards: fallback layout
    ],
)
def test_same_loss_on_every_mesh(tmp_path, token_shards, reference_losses, mesh):
    """data x fsdp x tensor x sequence meshes give the 8x1x1 (pure data parallel) losses."""
    got = _losses(tmp_path / "run", token_shards, mesh)
    assert len(got) == 3
    for a, b in zip(got, reference_losses):
        assert abs(a - b) <= 2e-2 * abs(b), (mesh, got, reference_losses)  # bf16 compute tolerance


def test_eval_hooks_and_profile(tmp_path, token_shards, monkeypatch):
    """Held-out loss every 2 steps, a user hook from an import path, a profiler trace."""
    seen: list[tuple[int, tuple[int, ...]]] = []

    def factory(context):
        class Probe:
            name = "probe"

            def __call__(self, step: int, view: ModelView) -> dict[str, float]:
                logits = view.model(np.asarray([[1, 5, 7, 9]], np.int32))  # the public forward
                seen.append((step, tuple(logits.shape)))
                return {"mean_logit": float(logits.mean()), "params": len(view.params)}

        return Probe()

    module = types.ModuleType("afm_probe_hooks")
    module.factory = factory
    monkeypatch.setitem(sys.modules, "afm_probe_hooks", module)
    result = train(
        "tiny-core", tmp_path / "run", steps=4, data=token_shards, quiet=True, profile_steps="2:3",
        overrides=["eval.every_steps=2", f"eval.heldout={json.dumps(token_shards)}", "eval.heldout_batches=2",
                   "eval.hooks=[afm_probe_hooks:factory]"],
    )
    rows = {r["step"]: r for r in read_metrics(tmp_path / "run")}
    assert [s for s, r in rows.items() if "eval/heldout/loss" in r] == [2, 4]
    assert rows[4]["eval/heldout/loss"] < rows[2]["eval/heldout/loss"] + 0.5
    assert 0 <= rows[4]["eval/heldout/accuracy"] <= 1
    assert seen == [(2, (1, 4, 512)), (4, (1, 4, 512))]
    assert result["eval/probe/params"] == rows[4]["eval/probe/params"] > 10
    traces = list((tmp_path / "run" / "profile").rglob("*.xplane.pb"))
    assert traces, "no profiler trace written"


def test_cli_prints_params_sha(tmp_path, token_shards):
    from click.testing import CliRunner

    from afm.app.cli import main
    from afm.app.commands.training.train import train_command

    args = ["--config", "tiny-core", "--workdir", str(tmp_path / "cli"), "--steps", "1", "--set", "checkpoint.async_save=false"]
    for shard in token_shards:
        args += ["--data", shard]
    result = CliRunner().invoke(train_command, args)
    assert result.exit_code == 0, result.output
    assert "params_sha256: " in result.output
    assert (tmp_path / "cli" / "checkpoints" / "1").is_dir()
    assert list((tmp_path / "cli" / "tb").iterdir())  # TensorBoard events
    # through afm's entry (it turns a user error into one line): a missing shard is named before JAX loads
    bad = CliRunner().invoke(main, ["train", "--config", "tiny-core", "--workdir", str(tmp_path / "x"),
                                   "--data", str(tmp_path / "none.parquet")])
    assert bad.exit_code != 0 and "input not found" in bad.output and "none.parquet" in bad.output
    assert "Traceback" not in bad.output


@pytest.mark.slow
def test_three_tiny_stages_chain_and_loss_falls(tmp_path, token_shards):
    core = train("tiny-core", tmp_path / "core", steps=30, data=token_shards, quiet=True)
    assert core["final_loss"] < core["first_loss"] - 0.5
    cont = train("tiny-continued", tmp_path / "cont", steps=4, data=token_shards, init_from=tmp_path / "core", quiet=True)
    # starts from core's parameters: its first loss is far below a fresh model's
    assert cont["first_loss"] < core["first_loss"] - 0.5
    ctx = train("tiny-context", tmp_path / "ctx", steps=2, data=token_shards, init_from=tmp_path / "cont", quiet=True)
    assert ctx["steps"] == 2 and ctx["final_loss"] < core["first_loss"]


def test_nan_guard_names_last_good_checkpoint(tmp_path, token_shards):
    with pytest.raises(TrainingDiverged, match=r"last good checkpoint: .*checkpoints/2"):
        train("tiny-core", tmp_path / "nan", steps=2, data=token_shards, quiet=True)
        train("tiny-core", tmp_path / "nan", steps=6, data=token_shards, quiet=True,
              overrides=["optimizer.learning_rate=1.0e+38", "log_every=1"])


def test_skipped_steps_leave_params_and_stop_after_too_many(tmp_path, token_shards):
    """Every gradient above drop_norm: no step changes the parameters, and the run stops
    once more than max_consecutive steps in a row were skipped."""
    over = ["optimizer.skip.drop_norm=1.0e-9", "optimizer.skip.max_consecutive=2", "log_every=1"]
    start = train("tiny-core", tmp_path / "s", steps=1, data=token_shards, quiet=True, overrides=over)
    with pytest.raises(TrainingDiverged, match="in a row skipped"):
        train("tiny-core", tmp_path / "s", steps=10, data=token_shards, quiet=True, overrides=over)
    rows = read_metrics(tmp_path / "s")
    assert [r["skipped_steps"] for r in rows] == [1, 2, 3]
    assert len({r["param_norm"] for r in rows}) == 1
    assert start["skipped_steps"] == 1


@pytest.mark.slow
def test_splash_attention_trains_like_xla(tmp_path, token_shards):
    """The TPU kernel (Pallas interpret mode) inside the real train step, on the mesh."""
    xla = _losses(tmp_path / "xla", token_shards, (2, 2, 2))
    splash = _losses(tmp_path / "splash", token_shards, (2, 2, 2), ["model_overrides.attention_impl=splash"])
    np.testing.assert_allclose(splash, xla, rtol=2e-2)
