"""SFT end to end on the trainer: prepared chat data -> the sft task -> held-out
assistant-token loss falls, the best step is kept and loadable, the run resumes; the loss
counts assistant tokens only; dropout is on in training only."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.synth.demo_data import write_demo_set
from afm.synth.prepare import PrepareConfig, prepare_sft
from afm.training.core.config import get_train_config
from afm.training.core.task import LossContext
from afm.training.data.loader import conversation_config, make_loader
from afm.training.runs.train import prepare
from afm.training.runs.train import train as run_stage
from afm.training.tasks.sft import SftTask
from tests.paths import CHAT_TOKENIZER

TOK = str(CHAT_TOKENIZER)
OVERRIDES = ["model_overrides.vocab_size=640", "eval.every_steps=10", "checkpoint.every_steps=10"]


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    root = tmp_path_factory.mktemp("sft")
    files = write_demo_set(root / "raw", per_set=40, held_out_per_set=8, planted=False)
    out: dict[str, list[str]] = {"train": [], "heldout": []}
    for split in out:
        for name, f in files[split].items():
            prepare_sft([f], str(root / split / name), PrepareConfig(name, TOK), progress=False)
            out[split].append(str(root / split / name))
    return out["train"], out["heldout"]


def test_sft_lowers_heldout_loss_keeps_best_and_resumes(sft_data, tmp_path: Path) -> None:
    train, held = sft_data
    work = tmp_path / "run"
    first = run_stage("tiny-sft", work, data=train, heldout=held, steps=20, overrides=OVERRIDES, quiet=True)
    best = json.loads((work / "best.json").read_text())
    losses = [h["value"] for h in best["history"]]
    assert len(losses) == 2 and losses[1] < losses[0]
    assert best["step"] == 20 and first["best_step"] == 20
    from afm.model.checkpoints.checkpoint import load_model

    model, cfg = load_model(work / "best")
    assert cfg.vocab_size == 640 and cfg.dropout == 0.1
    again = run_stage("tiny-sft", work, data=train, heldout=held, steps=30, overrides=OVERRIDES, quiet=True)
    assert again["start_step"] == 20 and again["steps"] == 30
    history = json.loads((work / "best.json").read_text())["history"]
    assert [h["step"] for h in history] == [10, 20, 30]
    assert again["eval/heldout/loss"] < losses[0]


def test_an_sft_stage_is_prepared_the_same_whichever_command_starts_it(sft_data, tmp_path: Path) -> None:
    """`afm train --config tiny-sft` and `afm sft --config tiny-sft` go through one front
    door: held-out batches cover every held-out conversation and select the best checkpoint;
    without held-out data selection is off (there is nothing to select by)."""
    train_paths, held = sft_data
    with_heldout = prepare("tiny-sft", tmp_path, data=train_paths, heldout=held, overrides=OVERRIDES)
    assert with_heldout.eval.select_metric == "eval/heldout/loss" and with_heldout.eval.heldout_batches >= 1
    via_sft_command = prepare("tiny-sft", tmp_path, data=train_paths, heldout=held, overrides=OVERRIDES,
                              task="sft", require_task="sft")
    assert via_sft_command == with_heldout
    assert prepare("tiny-sft", tmp_path, data=train_paths, overrides=OVERRIDES).eval.select_metric == ""
    with pytest.raises(Exception, match="runs the sft task"):
        prepare("tiny-core", tmp_path, require_task="sft")


def test_loss_counts_assistant_tokens_only_and_dropout_trains_only(sft_data) -> None:
    train, _ = sft_data
    cfg = get_train_config("tiny-sft", ["model_overrides.vocab_size=640", "data.global_batch_size=2"])
    cfg.data.paths = train
    task = SftTask(cfg)
    batch = next(make_loader(conversation_config(cfg.data), vocab_size=640))
    from afm.model.parts import ModelParts
    from afm.training.core.config import model_config

    mcfg = task.configure_model(model_config(cfg))
    assert mcfg.dropout == 0.1
    parts = ModelParts.build(mcfg.replace(dtype="float32"), 0)
    params = parts.init()
    ctx = LossContext(parts.build_model, mcfg, jax.random.key(0), train=False)
    base = task.loss(params, {k: jnp.asarray(v) for k, v in batch.items()}, ctx)
    assert float(base.loss[1]) == batch["loss_mask"].sum() > 0
    # Changing what non-assistant targets are changes nothing.
    changed = dict(batch)
    targets = batch["targets"].copy()
    targets[batch["loss_mask"] == 0] = 7
    changed["targets"] = targets
    other = task.loss(params, {k: jnp.asarray(v) for k, v in changed.items()}, ctx)
    np.testing.assert_allclose(float(other.loss[0]), float(base.loss[0]), rtol=1e-6)
    train_ctx = LossContext(parts.build_model, mcfg, jax.random.key(0), train=True)
    dropped = task.loss(params, {k: jnp.asarray(v) for k, v in batch.items()}, train_ctx)
    assert float(dropped.loss[0]) != float(base.loss[0])


def test_afm_train_runs_an_sft_stage_by_name(sft_data, tmp_path: Path) -> None:
    """The one registry: `afm train --config tiny-sft` is the SFT task (packed
    conversations, assistant-only loss), not an unknown stage."""
    from click.testing import CliRunner

    from afm.app.cli import main

    train, _ = sft_data
    args = ["train", "--config", "tiny-sft", "--workdir", str(tmp_path / "run"), "--steps", "2",
            "--set", "model_overrides.vocab_size=640"]
    for path in train:
        args += ["--data", path]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    assert "params_sha256: " in out.output
    meta = json.loads((tmp_path / "run" / "checkpoints" / "2" / "meta" / "metadata").read_text())
    assert meta["task"] == "sft" and meta["stage"] == "tiny-sft"
