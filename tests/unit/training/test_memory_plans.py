"""Post-training at the on-device size: memory plans from abstract shapes, a frozen
reference stored in the compute dtype, and the decode roofline's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner


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


def test_bench_train_refuses_a_task_without_a_plan(tmp_path: Path) -> None:
    from afm.app.bench.training.memory_plan import task_shape

    from afm.errors import UserError

    assert task_shape("rm")[0] == "reward_model"
    with pytest.raises(UserError, match="no memory plan for task 'pretrian'"):
        task_shape("pretrian")


def test_frozen_reference_is_the_start_model_in_compute_dtype() -> None:
    """Exact: the forward pass casts every weight to the compute dtype before use."""
    import jax
    import jax.numpy as jnp
    from afm.model.config import get_config
    from afm.training.core.engine import ModelParts
    from afm.training.core.task import frozen_model_copy

    for dtype in ("bfloat16", "float32"):
        mcfg = get_config("tiny").replace(dtype=dtype)
        model = ModelParts.build(mcfg, 0).init()
        specs = frozen_model_copy(mcfg, "ref/")
        assert set(specs) == {"ref/" + k for k in model}
        for key, spec in specs.items():
            value = spec.init(jax.random.key(0), model)
            assert not spec.trainable and value.dtype == jnp.dtype(dtype)
            np.testing.assert_array_equal(value, model[key[4:]].astype(dtype))


def test_roofline_bytes_and_peak_bandwidth() -> None:
    from afm.app.bench.training.rollout import bytes_read, peak_bandwidth
    from afm.model.config import get_config
    from afm.model.transformer import Transformer
    from flax import nnx

    assert peak_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert peak_bandwidth("NVIDIA H200") == 4.8e12
    assert peak_bandwidth("cpu") is None
    cfg = get_config("tiny")
    model = Transformer(cfg, rngs=nnx.Rngs(params=0))
    weights = sum(x.size * 4 for x in __import__("jax").tree.leaves(nnx.state(model, nnx.Param)))
    kv = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 2  # bf16 keys and values per token
    # one step over 3 rows of 10-token prompts reads the weights once and 10 + 1 tokens of cache per row
    assert bytes_read(model, 3, 10, 1) == weights + 3 * 11 * kv
