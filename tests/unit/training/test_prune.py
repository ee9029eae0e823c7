"""The pruning task and the pruned model: masks with exactly D units, gradients before the
end, pruning zero units changes nothing, the materialised model's loss equals the hard-mask
loss, clear errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from afm.model.sharding import MeshConfig, make_mesh
from afm.training.compress.pruning import pruned_params
from afm.training.core.config import get_train_config, model_config
from afm.training.core.engine import Engine, ModelParts
from afm.training.core.task import LossContext
from afm.training.data.loader import make_loader
from afm.training.tasks.prune import PruneTask, score_key

from afm.config import ConfigError

D = 192


def _cfg(token_shards, *extra):
    return get_train_config(
        "tiny-prune",
        [f"data.paths={list(token_shards)}", "data.seq_len=32", "data.global_batch_size=4", "data.prefetch=0",
         "model_overrides.dtype=float32", "total_steps=10", *extra],
    )


def _engine(cfg):
    return Engine.build(cfg, make_mesh(MeshConfig(data=1), jax.devices()[:1]))


def _random_model(engine, seed=3):
    """Random model parameters without compiling the model's init (slow on CPU)."""
    rng = np.random.default_rng(seed)
    return {k: jnp.asarray(rng.normal(0.0, 0.2, engine.shapes[k]).astype(np.float32)) for k in engine.layout.keys}


def _batch(cfg, engine):
    return engine.global_batch(next(make_loader(cfg.data, vocab_size=512)))


def test_masks_keep_exactly_d_and_learn_before_the_end(token_shards):
    cfg = _cfg(token_shards)
    engine = _engine(cfg)
    task: PruneTask = engine.task
    assert engine.trainable == sorted(score_key(i) for i in range(2))  # teacher weights frozen
    state = engine.init_state(_random_model(engine))
    params = engine.all_params(state)
    batch = _batch(cfg, engine)

    def loss_at(scores, step):
        ctx = LossContext(engine.parts.build_model, engine.model_config, jax.random.key(0), True, jnp.asarray(step))
        out = task.loss({**params, **scores}, batch, ctx)
        return out.loss[0] / out.loss[1]

    scores = {k: params[k] for k in engine.trainable}
    grad = jax.jit(jax.grad(loss_at))
    for step in (0, 5):  # every unit gets a gradient while the mask is soft
        grads = grad(scores, step)
        for k, g in grads.items():
            assert np.count_nonzero(np.asarray(g)) > 0.9 * g.size, (k, step)
    for step in (0, 9):
        for m in task.masks(params, jnp.asarray(step)):
            assert float(jnp.sum(m)) == pytest.approx(D, rel=1e-5)
    # at the end: the hard mask keeps exactly D, and at the last temperature the soft mask
    # of separated scores is that hard mask
    spread = {k: jnp.asarray(np.random.default_rng(7).normal(size=v.shape), jnp.float32) for k, v in scores.items()}
    params = {**params, **spread}
    for soft, hard in zip(task.masks(params, jnp.asarray(9)), task.masks(params, None), strict=True):
        assert int(jnp.sum(hard)) == D and set(np.unique(np.asarray(hard))) == {0.0, 1.0}
        assert float(jnp.mean(jnp.abs(soft - hard))) < 0.01  # only units at the boundary stay soft
        assert float(jnp.sum(soft)) == pytest.approx(D, rel=1e-5)


def test_pruning_units_that_are_already_zero_keeps_the_outputs(token_shards):
    """Units >= D of a model with zero FFN weights there: removing them changes nothing (up to
    float32 summation order: the matmuls reduce over 576 vs 192 terms)."""
    teacher_parts = ModelParts.build(model_config(_cfg(token_shards)), seed=3)
    rng = np.random.default_rng(3)
    params = {k: rng.normal(0.0, 0.2, s).astype(np.float32) for k, s in teacher_parts.shapes.items()}
    for i in range(2):
        mlp = f"layers/{i}/mlp"
        params[f"{mlp}/w_gate"][:, D:] = 0.0
        params[f"{mlp}/w_up"][:, D:] = 0.0
        params[f"{mlp}/w_down"][D:, :] = 0.0
        params[score_key(i)] = np.concatenate([np.ones(D), np.zeros(576 - D)]).astype(np.float32)
    small, kept = pruned_params(params, 2, D)
    assert all((k == np.arange(D)).all() for k in kept)
    small_parts = ModelParts.build(teacher_parts.config.replace(ffn_dim=D), seed=0)
    tokens = jnp.asarray(np.random.default_rng(0).integers(3, 512, (2, 24)))
    full = jax.jit(lambda p: teacher_parts.build_model(p)(tokens))({k: jnp.asarray(v) for k, v in params.items()})
    pruned = jax.jit(lambda p: small_parts.build_model(p)(tokens))({k: jnp.asarray(v) for k, v in small.items()})
    np.testing.assert_allclose(np.asarray(pruned), np.asarray(full), rtol=1e-5, atol=1e-6)


def test_materialised_model_has_the_hard_mask_loss(token_shards):
    """What `afm prune apply` writes scores exactly what the masked model scores at the hard
    mask (float32 compute)."""
    cfg = _cfg(token_shards)
    engine = _engine(cfg)
    batch = _batch(cfg, engine)
    rng = np.random.default_rng(5)  # learned-looking scores: a scattered choice of units
    params = {**_random_model(engine), **{score_key(i): jnp.asarray(rng.normal(size=576), jnp.float32) for i in range(2)}}
    hard = engine.eval_sums(params, batch)  # eval: the hard mask
    params = {k: np.asarray(v) for k, v in params.items()}
    small, _ = pruned_params(params, 2, D)
    student_cfg = get_train_config(
        "tiny-core", [f"data.paths={list(token_shards)}", "data.seq_len=32", "data.global_batch_size=4",
                      "data.prefetch=0", "model_overrides.dtype=float32"])
    student = _engine(student_cfg)
    assert student.model_config.ffn_dim == D
    got = student.eval_sums({k: jnp.asarray(v) for k, v in small.items()}, batch)
    np.testing.assert_allclose(float(got.loss[0] / got.loss[1]), float(hard.loss[0] / hard.loss[1]), rtol=1e-6)


def test_bad_pruning_options_fail_clearly(token_shards):
    with pytest.raises(ConfigError, match="smaller than the teacher"):
        _engine(_cfg(token_shards, "task_options.target_ffn_dim=576"))
    with pytest.raises(ConfigError, match="target_ffn_dim must be set"):
        _engine(_cfg(token_shards, "task_options.target_ffn_dim=0"))
    with pytest.raises(ConfigError, match="temperature"):
        _engine(_cfg(token_shards, "task_options.temperature_end=0"))
    with pytest.raises(ConfigError, match="unknown"):
        _engine(_cfg(token_shards, "task_options.temprature_end=0.1"))


def test_joint_training_trains_the_weights_too(token_shards):
    engine = _engine(_cfg(token_shards, "task_options.train_weights=true"))
    assert "layers/0/mlp/w_down" in engine.trainable and score_key(0) in engine.trainable
