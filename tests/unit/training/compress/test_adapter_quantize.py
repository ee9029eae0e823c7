"""`afm quantize` and accuracy-recovery adapters on the one trainer, at tiny scale:
sensitivity-driven 2-bit allocation under a bits-per-weight target, a palettized
checkpoint that loads and runs, an adapter trained on the frozen quantized base (the base
bit-identical afterwards, only adapter parameters trained, loss falling), and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from afm.model.config import Palettization, get_config
from afm.model.on_device import palettize

TINY = get_config("tiny", dtype="float32")


@pytest.fixture(scope="module")
def base_ckpt(token_shards, tmp_path_factory):
    """A tiny model trained a little (a random one is indifferent to quantization noise)."""
    from afm.training.runs.train import train

    result = train("tiny-core", tmp_path_factory.mktemp("base"), steps=20, data=list(token_shards), quiet=True,
                   overrides=["data.seq_len=32", "data.global_batch_size=8", "data.prefetch=0",
                              "model_overrides.dtype=float32", "checkpoint.every_steps=100"])
    return result["model_checkpoint"]


@pytest.fixture(scope="module")
def quantized(base_ckpt, token_shards, tmp_path_factory):
    from afm.training.compress.quantize import QuantizeOptions, quantize_checkpoint

    out = tmp_path_factory.mktemp("q") / "q"
    options = QuantizeOptions(target_bpw=3.4, scope="projections", calibration_rows=8, seq_len=32, batch_rows=8)
    summary = quantize_checkpoint(base_ckpt, out, list(token_shards), options)
    return out, summary


def test_allocation_reaches_the_target_in_sensitivity_order() -> None:
    from afm.training.compress.quantize import allocate_low_bits

    paths = palettize.projection_paths(TINY.n_layers)
    base = Palettization(bits=tuple((p, 4) for p in paths))
    # w_up of layer 1 is the least sensitive per bit saved, then w_gate of layer 1, ...
    sens = {p: 1.0 + i for i, p in enumerate(paths)}
    sens["layers/1/mlp/w_up"], sens["layers/1/mlp/w_gate"] = 0.0, 0.01
    spec, moved = allocate_low_bits(TINY, base, sens, low_bits=2, target_bpw=3.8, scope="projections")
    assert moved[:2] == ["layers/1/mlp/w_up", "layers/1/mlp/w_gate"]
    proj = palettize.summarize_bits(palettize.bits_report(TINY.replace(palettization=spec)))["projection_bpw"]
    assert proj <= 3.8
    # one fewer move would miss the target: the greedy stops as soon as it is reached
    fewer = dict(spec.bits)
    fewer[moved[-1]] = 4
    undo = palettize.summarize_bits(palettize.bits_report(
        TINY.replace(palettization=Palettization(bits=tuple(sorted(fewer.items()))))))["projection_bpw"]
    assert undo > 3.8
    with pytest.raises(ValueError, match="below what this model can reach"):
        allocate_low_bits(TINY, base, sens, low_bits=2, target_bpw=2.0, scope="all")


def test_quantize_checkpoint_writes_a_palettized_model(quantized, base_ckpt) -> None:
    from afm.model.checkpoints.checkpoint import load_model

    out, summary = quantized
    assert summary["projection_bpw"] <= 3.4 and summary["two_bit_tensors"]
    written = json.loads((out / "quantization.json").read_text())
    assert written["bpw"] == pytest.approx(summary["bpw"])
    assert len(written["sensitivity"]) == 7 * TINY.n_layers
    # What calibration measured for the chosen mix is what the written checkpoint computes
    # (the checkpoint holds exactly the palettes that were scored).
    from afm.training.compress.quantize import RowsLoss, token_rows

    rows = token_rows(list(summary["calibration"]["inputs"]), summary["calibration"]["rows"],
                      summary["calibration"]["seq_len"])
    model, cfg = load_model(out, dtype="float32")
    assert RowsLoss(model, rows, 8)() == pytest.approx(summary["loss"]["chosen"], abs=2e-4)
    assert summary["loss"]["chosen"] != pytest.approx(summary["loss"]["dense"], abs=1e-4)
    assert cfg.palettization is not None and dict(cfg.palettization.bits)[summary["two_bit_tensors"][0]] == 2
    assert isinstance(model.embed, palettize.Int8Embedding)
    # the stored indices really are packed: 2-bit tensors hold a quarter byte per weight
    w = summary["two_bit_tensors"][0]
    i, sub, attr = w.split("/")[1:]
    pw = getattr(getattr(model.layers[int(i)], sub), attr)
    assert pw.indices[...].size * 4 == int(np.prod(pw.shape))
    with pytest.raises(ValueError, match="already palettized"):
        from afm.training.compress.quantize import QuantizeOptions, quantize_checkpoint

        quantize_checkpoint(out, out.parent / "again", [], QuantizeOptions())


def test_recovery_adapter_trains_on_the_frozen_quantized_base(quantized, token_shards, tmp_path) -> None:
    """The adapter task on the one engine: only lora/* parameters train, the palettized
    base (uint8 indices, tables, int8 embedding) comes out bit-identical, the loss falls,
    and its loss falls on a batch it is fitted to."""
    import jax

    from afm.model.distributed.sharding import MeshConfig, make_mesh
    from afm.training.core.config import get_train_config
    from afm.training.core.engine import Engine
    from afm.training.data.loader import make_loader
    from afm.training.tasks import get_task

    qdir, _ = quantized
    cfg = get_train_config("tiny-recovery", [
        f"data.paths={list(token_shards)}", "data.seq_len=32", "data.global_batch_size=8", "data.prefetch=0",
        f"init_from={qdir}", "task_options.rank=4", "task_options.alpha=8", "optimizer.learning_rate=1e-2",
    ])
    task = get_task(cfg.task, cfg)
    engine = Engine.build(cfg, make_mesh(MeshConfig(data=1), jax.devices()[:1]), task=task)
    assert engine.trainable and all(k.startswith("lora/") for k in engine.trainable)
    assert any(k.endswith("indices") for k in engine.frozen)

    from afm.training.core.checkpoint import restore_params_only

    like = {k: engine.abstract_state.frozen[k] for k in engine.layout.keys}
    base_params, _ = restore_params_only(qdir, like, engine.layout)
    state = engine.init_state(base_params)
    before = {k: np.asarray(v) for k, v in state.frozen.items()}
    loader = make_loader(cfg.data, vocab_size=TINY.vocab_size)
    batch = next(loader)
    losses = []
    for i in range(8):  # one batch repeated: the adapter must fit it
        state, m = engine.train_step(state, engine.global_batch(batch), i)
        losses.append(float(m["loss"]))
    assert losses[-1] < losses[0] - 0.05
    for k, v in state.frozen.items():
        assert v.dtype == before[k].dtype, k
        np.testing.assert_array_equal(np.asarray(v), before[k], err_msg=k)
    assert before["layers/0/attn/wq/indices"].dtype == np.uint8

    # The task hands off an adapter directory (what the trainer writes at the end); the
    # light CLI commands read it without loading the model.
    from click.testing import CliRunner

    from afm.app.cli import main

    adapter = task.export(tmp_path, engine.all_params(state), engine.parts.config, {"steps": 8})
    runner = CliRunner()
    res = runner.invoke(main, ["adapter", "info", str(adapter)])
    assert res.exit_code == 0 and "4 / 8.0" in res.output, res.output
    res = runner.invoke(main, ["adapter", "export", "--adapter", str(adapter), "--out", str(tmp_path / "peft")])
    assert res.exit_code == 0, res.output
    peft_cfg = json.loads((tmp_path / "peft" / "adapter_config.json").read_text())
    assert peft_cfg["r"] == 4 and len(peft_cfg["target_modules"]) == 7
    # A feature adapter starts from the recovery adapter (its stored 16-bit values).
    from afm.model.checkpoints.adapter_io import load_adapter

    feature = get_task("adapter", get_train_config("tiny-recovery", [
        f"init_from={qdir}", "task_options.rank=4", f"task_options.init_adapter={adapter}"]))
    specs = feature.extra_params(engine.parts.config)
    stored, _ = load_adapter(adapter)
    a0 = np.asarray(specs["lora/layers/1/mlp/w_down/a"].init(jax.random.key(0), None))
    np.testing.assert_array_equal(a0, stored.weights["layers/1/mlp/w_down"][0])
    with pytest.raises(ValueError, match="rank"):
        get_task("adapter", get_train_config("tiny-recovery", [
            f"init_from={qdir}", "task_options.rank=8", f"task_options.init_adapter={adapter}"])
                 ).extra_params(engine.parts.config)

    res = runner.invoke(main, ["adapter", "info", str(tmp_path / "peft")])
    assert res.exit_code != 0 and "not an afm adapter" in res.output and "Traceback" not in res.output



@pytest.mark.slow  # ~1-3 minutes: quantize, train, merge, export and table through the CLI
def test_cli_quantize_and_adapter_commands(quantized, base_ckpt, token_shards, tmp_path) -> None:
    from click.testing import CliRunner

    from afm.app.cli import main

    runner = CliRunner()
    res = runner.invoke(main, ["quantize", "--checkpoint", str(base_ckpt), "--target-bpw", "3.9", "--scope",
                               "projections", "--calibration", token_shards[0], "--out", str(tmp_path / "q"),
                               "--rows", "4", "--seq-len", "32"])
    assert res.exit_code == 0, res.output
    assert "bits per weight" in res.output and "w_up" in res.output
    # a bad target is a clean error, not a traceback
    res = runner.invoke(main, ["quantize", "--checkpoint", str(base_ckpt), "--target-bpw", "1.0",
                               "--calibration", token_shards[0], "--out", str(tmp_path / "q2"),
                               "--rows", "4", "--seq-len", "32"])
    assert res.exit_code != 0 and "below what this model can reach" in res.output
    assert "Traceback" not in res.output

    res = runner.invoke(main, ["adapter", "train", "--base", str(quantized[0]), "--data", token_shards[0],
                               "--workdir", str(tmp_path / "ad"), "--rank", "2", "--steps", "2",
                               "--set", "data.seq_len=32", "--set", "data.global_batch_size=8"])
    assert res.exit_code == 0, res.output
    adapter = tmp_path / "ad" / "adapter"
    # the adapter directory is a model path: the palettized base with the adapter on it
    from afm.model.checkpoints.checkpoint import load_model
    from afm.model.on_device import lora

    model, mcfg = load_model(adapter)
    assert mcfg.palettization is not None and len(lora.adapted_paths(model)) == 7 * TINY.n_layers
    res = runner.invoke(main, ["adapter", "info", str(adapter)])
    assert res.exit_code == 0 and "2 / 4.0" in res.output, res.output
    res = runner.invoke(main, ["adapter", "merge", "--adapter", str(adapter), "--out", str(tmp_path / "merged")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["adapter", "export", "--adapter", str(adapter), "--out", str(tmp_path / "peft")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "peft" / "adapter_config.json").read_text())["r"] == 2
    # the Table-10 comparison: reference, quantized base, its adapter (gap recovered)
    res = runner.invoke(main, ["adapter", "table", "--tasks", "", "--heldout", token_shards[1], "--rows", "4",
                               "--seq-len", "32", "--out", str(tmp_path / "t10"), "--model", f"ref={base_ckpt}",
                               "--model", f"q={quantized[0]}", "--model", f"q+r2={adapter}"])
    assert res.exit_code == 0, res.output
    table = json.loads((tmp_path / "t10.json").read_text())
    ref, q, rec = table["entries"]
    assert ref["bpw"] == 16.0 and q["projection_bpw"] <= 3.4 and rec["adapter_rank"] == 2
    gap = q["heldout_loss"] - ref["heldout_loss"]
    if gap > 0:
        assert rec["recovered"] == pytest.approx((q["heldout_loss"] - rec["heldout_loss"]) / gap)
    assert (tmp_path / "t10.png").stat().st_size > 0 and "| q+r2 |" in (tmp_path / "t10.md").read_text()
    res = runner.invoke(main, ["adapter", "info", str(tmp_path)])
    assert res.exit_code != 0 and "not an afm adapter" in res.output


def test_one_lora_scale_rule_whichever_way_the_rank_is_given() -> None:
    """``--rank 8`` and ``--set task_options.rank=8`` give the same adapter: alpha is
    2 x rank unless set, so the scale alpha/rank is 2 both ways (it was 2 and 4)."""
    from afm.app.commands.training.adapter import adapter_overrides
    from afm.training.core.config import get_train_config
    from afm.training.core.task import parse_task_options
    from afm.training.tasks.adapter import AdapterOptions, lora_config_from_options

    by_cli = get_train_config("recovery", adapter_overrides(8, None, None, None, None, ()))  # --rank 8
    by_set = get_train_config("recovery", ["task_options.rank=8"])
    for cfg in (by_cli, by_set):
        lora_cfg = lora_config_from_options(parse_task_options(AdapterOptions, cfg.task_options))
        assert (lora_cfg.rank, lora_cfg.alpha, lora_cfg.scale) == (8, 16.0, 2.0)
    explicit = lora_config_from_options(parse_task_options(AdapterOptions, {**dict(by_set.task_options), "alpha": 8}))
    assert explicit.scale == 1.0
