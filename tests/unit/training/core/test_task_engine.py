"""The engine with tasks: gradient accumulation == one large batch, a task that trains only
its own parameters (the LoRA / reward-head shape of the interface), registry errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.model.distributed.sharding import MeshConfig, make_mesh
from afm.training.core.config import get_train_config
from afm.training.core.engine import Engine
from afm.training.core.task import ParamSpec, Task
from afm.training.data.loader import make_loader
from afm.training.tasks import get_task
from afm.training.tasks.pretrain import PretrainTask


def _cfg(token_shards, *extra):
    return get_train_config(
        "tiny-core",
        [f"data.paths={list(token_shards)}", "data.seq_len=32", "data.global_batch_size=8", "data.prefetch=0",
         "model_overrides.dtype=float32", *extra],
    )


def _one_device():
    return make_mesh(MeshConfig(data=1), jax.devices()[:1])


def _run(engine: Engine, batches, state=None):
    state = state or engine.init_state()
    metrics = []
    for i, b in enumerate(batches):
        state, m = engine.train_step(state, engine.global_batch(b), i)
        metrics.append({k: float(v) for k, v in m.items()})
    return state, metrics


def test_gradient_accumulation_equals_one_large_batch(token_shards):
    """4 microbatches of 2 rows == 1 batch of 8 rows: same loss and parameters after 3
    steps (float32 compute here, so only the summation order differs)."""
    cfg = _cfg(token_shards)
    loader = make_loader(cfg.data, vocab_size=512)
    batches = [next(loader) for _ in range(3)]
    acc_cfg = _cfg(token_shards, "microbatches=4")
    one, m1 = _run(Engine.build(cfg, _one_device(), get_task(cfg.task, cfg)), batches)
    acc, m4 = _run(Engine.build(acc_cfg, _one_device(), get_task(acc_cfg.task, acc_cfg)), batches)
    for a, b in zip(m1, m4):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["batch_checksum"] == b["batch_checksum"]
    for k in one.params:
        np.testing.assert_allclose(one.params[k], acc.params[k], rtol=2e-4, atol=2e-5, err_msg=k)


class AdapterTask(PretrainTask):
    """Test task: a LoRA-shaped adapter on the final norm; the base model is frozen."""

    name = "adapter-test"

    def extra_params(self, model_config):
        d = model_config.dim
        return {
            "adapter/a": ParamSpec((d, 2), ("embed", None), lambda rng, _: 0.01 * jax.random.normal(rng, (d, 2))),
            "adapter/b": ParamSpec((2,), (None,), lambda rng, _: jnp.zeros((2,))),
        }

    def is_trainable(self, path):
        return path.startswith("adapter/")

    def loss(self, params, batch, ctx):
        delta = params["adapter/a"] @ params["adapter/b"]  # [d], zero at init like LoRA
        effective = {**params, "final_norm/scale": params["final_norm/scale"] + delta}
        return super().loss(effective, batch, ctx)


def test_task_trains_only_its_own_parameters(token_shards):
    cfg = _cfg(token_shards)
    engine = Engine.build(cfg, _one_device(), task=AdapterTask(cfg))
    assert engine.trainable == ["adapter/a", "adapter/b"] and "embed" in engine.frozen
    state = engine.init_state()
    before = jax.tree.map(np.asarray, state.frozen)
    opt_keys = {getattr(k, "key", None) for path, _ in jax.tree_util.tree_leaves_with_path(state.opt_state) for k in path}
    assert "embed" not in opt_keys and "adapter/a" in opt_keys  # no optimizer state for frozen
    loader = make_loader(cfg.data, vocab_size=512)
    state, metrics = _run(engine, [next(loader) for _ in range(3)], state)
    for k, v in before.items():
        np.testing.assert_array_equal(state.frozen[k], v, err_msg=k)
    assert float(jnp.abs(state.params["adapter/b"]).max()) > 0
    view = engine.model(state)  # the eval view: the base model with current params
    assert view.cfg.dim == engine.model_config.dim


def test_registry_and_protocol_errors(token_shards):
    cfg = _cfg(token_shards)
    assert isinstance(get_task("pretrain", cfg), Task)
    assert isinstance(get_task("afm.training.tasks.pretrain:PretrainTask", cfg), PretrainTask)
    with pytest.raises(ValueError, match="unknown task"):
        get_task("no-such-task", cfg)
    with pytest.raises(ValueError, match="cannot import"):
        get_task("afm.training.nope:Task", cfg)
    with pytest.raises(TypeError, match="Task protocol"):
        get_task("builtins:str", cfg)
