"""Post-training at the on-device size: memory plans from abstract shapes, a frozen
reference stored in the compute dtype, and the decode roofline's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.paths import CHAT_TOKENIZER


def test_bench_train_prints_each_tasks_memory_plan(tmp_path: Path) -> None:
    """``afm bench train --task ...`` compiles each task's step from abstract shapes and
    writes the plans; MDLOO's frozen reference is half the f32 parameters (bf16)."""
    from afm.app.cli import main

    result = CliRunner().invoke(main, ["bench", "train", "--config", "tiny", "--seq-len", "64",
                                       "--task", "sft,mdloo", "--workdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    plans = {p["task"]: p for p in json.loads((tmp_path / "memory_plans.json").read_text())}
    assert set(plans) == {"sft", "mdloo"}
    for p in plans.values():
        assert 0 < p["total_gb"] < 1 and p["seq_len"] == 64 and p["scan_layers"]
    f32_params = plans["sft"]["params"] * 4 / 2**30
    for task in ("mdloo",):
        assert plans[task]["frozen_gb"] == pytest.approx(f32_params / 2, rel=0.01)
    assert plans["sft"]["frozen_gb"] == 0
    assert "memory plan per device: tiny @ 64" in result.output
    # MDLOO's rollout sampler and scoring pass run beside the step with the state resident:
    # each is planned, on top of that state, and the run's peak is the largest
    assert plans["sft"]["programs"] == {} and plans["sft"]["peak_gb"] == plans["sft"]["total_gb"]
    programs = plans["mdloo"]["programs"]
    assert set(programs) == {"rollout", "scoring"}
    for q in programs.values():
        assert q["temporaries_gb"] > 0 and q["total_gb"] > q["state_gb"] > 0
    assert plans["mdloo"]["peak_gb"] == max(plans["mdloo"]["total_gb"], *(q["total_gb"] for q in programs.values()))
    assert "rollout" in result.output and "scoring" in result.output


def test_bench_train_refuses_a_task_without_a_plan(tmp_path: Path) -> None:
    from afm.app.bench.training.memory_plan import task_shape
    from afm.errors import UserError

    assert task_shape("rm")[0] == "reward_model"
    with pytest.raises(UserError, match="no memory plan for task 'pretrian'"):
        task_shape("pretrian")


@pytest.mark.parametrize("scan_layers", [False, True])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_frozen_reference_equals_the_policy_at_step_zero(dtype: str, scan_layers: bool) -> None:
    """The reference copy computes exactly what the policy computes before any update, in
    every compute dtype, with trained (non-unit, not bf16-representable) norm scales: the
    reply log-ratios are exactly 0 and the DPO loss exactly log 2. Norm scales are applied
    in float32, so the copy keeps them in float32; scanned layers are stored stacked once."""
    import jax
    import jax.numpy as jnp

    from afm.model.parts import ModelParts
    from afm.synth.arith_task import make_problems
    from afm.training.core.config import get_train_config, model_config
    from afm.training.core.config import with_task_options as with_options
    from afm.training.core.task import STACKED, LossContext
    from afm.training.tasks import get_task

    tok = str(CHAT_TOKENIZER)
    rows = [{"prompt": p.messages(), "chosen": p.solution(), "rejected": f"Answer: {p.answer + 1}",
             "level": "better"} for p in make_problems(4, seed=5)]
    data = Path(__import__("tempfile").mkdtemp()) / "p.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cfg = get_train_config("tiny-rm", ["task=dpo", "model_overrides.vocab_size=640", "data.global_batch_size=4",
                                       f"model_overrides.dtype={dtype}", f"model_overrides.scan_layers={str(scan_layers).lower()}"])
    cfg = with_options(cfg, tokenizer=tok, beta=0.1)
    cfg.data.paths = [str(data)]
    task = get_task("dpo", cfg)
    batch = {k: jnp.asarray(v) for k, v in next(task.make_input(vocab_size=640, process_index=0,
                                                                process_count=1)).items()}
    mcfg = model_config(cfg)
    parts = ModelParts.build(mcfg, 0)
    rng = np.random.default_rng(3)
    params = {k: (v * jnp.asarray(1 + 0.37 * rng.standard_normal(v.shape), jnp.float32) if v.ndim == 1 else v)
              for k, v in parts.init().items()}  # "trained" norm scales
    extras = task.extra_params(mcfg)
    assert any(k.startswith("ref/" + STACKED) for k in extras) == scan_layers
    params |= {k: s.init(jax.random.key(0), params) for k, s in extras.items()}
    for k, v in params.items():
        if k.startswith("ref/") and v.ndim == 1:
            assert v.dtype == jnp.float32  # norm scales as the forward applies them
    ctx = LossContext(parts.build_model, mcfg, jax.random.key(0), train=False)
    out = jax.jit(lambda p: task.loss(p, batch, ctx))(params)
    assert float(out.metrics["chosen_logratio"][0]) == 0.0
    assert float(out.metrics["rejected_logratio"][0]) == 0.0
    assert float(out.loss[0] / out.loss[1]) == float(np.float32(np.log(2.0)))


def test_scanned_reference_is_not_stacked_again_in_the_step() -> None:
    """The stacked reference is read as stored: the step's program stacks the policy's
    layers (its weights change every step) but never the reference's."""
    import jax
    import jax.numpy as jnp

    from afm.model.config import get_config
    from afm.model.parts import ModelParts
    from afm.training.core.task import frozen_model, frozen_model_copy

    mcfg = get_config("tiny").replace(scan_layers=True, n_layers=3)
    parts = ModelParts.build(mcfg, 0)
    params = parts.init()
    params |= {k: s.init(jax.random.key(0), params) for k, s in frozen_model_copy(mcfg, "ref/").items()}
    tokens = jnp.zeros((1, 8), jnp.int32)

    def ref_only(p):
        return frozen_model(parts.build_model, p, "ref/").features(tokens)[0]

    jaxpr = str(jax.make_jaxpr(ref_only)(params))
    stack = "stack[axis=0]"  # the layers stacked along a new leading axis
    assert stack not in jaxpr
    policy = str(jax.make_jaxpr(lambda p: parts.build_model(p).features(tokens)[0])(params))
    assert stack in policy


def test_roofline_bytes_and_peak_bandwidth() -> None:
    from flax import nnx

    from afm.app.bench.training.rollout import bytes_read, peak_bandwidth
    from afm.model.config import get_config
    from afm.model.transformer import Transformer

    assert peak_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert peak_bandwidth("NVIDIA H200") == 4.8e12
    assert peak_bandwidth("cpu") is None
    cfg = get_config("tiny")
    model = Transformer(cfg, rngs=nnx.Rngs(params=0))
    weights = sum(x.size * 4 for x in __import__("jax").tree.leaves(nnx.state(model, nnx.Param)))
    kv = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 2  # bf16 keys and values per token
    # one step over 3 rows of 10-token prompts reads the weights once and 10 + 1 tokens of cache per row
    assert bytes_read(model, 3, 10, 1) == weights + 3 * 11 * kv
