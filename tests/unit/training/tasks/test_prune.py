"""The pruning task and the pruned model: masks with exactly D units, gradients before the
end, pruning zero units changes nothing, the materialised model's loss equals the hard-mask
loss, clear errors. The controls (afm prune apply --method random|magnitude): random is
seeded with D units per layer, magnitude keeps the largest units of a hand-made weight,
both write the checkpoint `afm train --init-from` reads."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.app.cli import main
from afm.config import ConfigError
from afm.model.distributed.sharding import MeshConfig, make_mesh
from afm.model.parts import ModelParts
from afm.training.compress.pruning import (
    apply_baseline,
    magnitude_kept,
    pruned_params,
    random_kept,
    score_key,
    select_units,
    unit_magnitudes,
)
from afm.training.core.config import get_train_config, model_config
from afm.training.core.engine import Engine
from afm.training.core.task import LossContext
from afm.training.data.loader import make_loader
from afm.training.tasks import get_task
from afm.training.tasks.prune import PruneTask

D = 192


def _cfg(token_shards, *extra):
    return get_train_config(
        "tiny-prune",
        [f"data.paths={list(token_shards)}", "data.seq_len=32", "data.global_batch_size=4", "data.prefetch=0",
         "model_overrides.dtype=float32", "total_steps=10", *extra],
    )


def _engine(cfg):
    return Engine.build(cfg, make_mesh(MeshConfig(data=1), jax.devices()[:1]), get_task(cfg.task, cfg))


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


def test_random_control_is_seeded_with_d_distinct_units_per_layer():
    kept = random_kept(3, 576, D, seed=1)
    assert len(kept) == 3
    for idx in kept:
        assert len(idx) == D and len(set(idx.tolist())) == D and (np.diff(idx) > 0).all()
        assert 0 <= idx.min() and idx.max() < 576
    assert all((a == b).all() for a, b in zip(kept, random_kept(3, 576, D, seed=1), strict=True))  # same seed
    assert not (kept[0] == kept[1]).all()  # each layer drawn on its own
    assert not all((a == b).all() for a, b in zip(kept, random_kept(3, 576, D, seed=2), strict=True))
    with pytest.raises(ValueError, match="target-ffn-dim"):
        random_kept(2, 576, 576, seed=0)


def test_magnitude_control_keeps_the_largest_units_of_a_hand_made_weight():
    """Units 1 and 3 are large through different matrices (gate+up columns, down row): the
    criterion counts all three; unit 4 has the largest single entry but the smaller norm."""
    gate = np.full((2, 5), 0.1, np.float32)
    up = np.full((2, 5), 0.1, np.float32)
    down = np.full((5, 2), 0.1, np.float32)
    gate[:, 1] = up[:, 1] = 1.0  # |unit 1|^2 = 4 + 0.02
    down[3, :] = 1.5  # |unit 3|^2 = 4.5 + 0.04
    gate[0, 4] = 1.9  # |unit 4|^2 = 3.61 + 0.05
    params = {"layers/0/mlp/w_gate": gate, "layers/0/mlp/w_up": up, "layers/0/mlp/w_down": down}
    np.testing.assert_allclose(unit_magnitudes(params, 0)[[0, 1, 3, 4]], np.sqrt([0.06, 4.02, 4.54, 3.66]), rtol=1e-5)
    assert magnitude_kept(params, 1, 2)[0].tolist() == [1, 3]
    assert magnitude_kept(params, 1, 3)[0].tolist() == [1, 3, 4]
    small = select_units(params, [np.array([3, 1])])  # any order in, original order out
    np.testing.assert_array_equal(small["layers/0/mlp/w_down"], down[[1, 3]])
    np.testing.assert_array_equal(small["layers/0/mlp/w_gate"], gate[:, [1, 3]])


@pytest.mark.parametrize("method", ["random", "magnitude"])
def test_controls_write_the_checkpoint_init_from_reads(tmp_path, token_shards, method):
    from afm.model.checkpoints.checkpoint import save_params
    from afm.training.core.checkpoint import checkpoint_model_config, restore_params_only

    teacher = ModelParts.build(model_config(_cfg(token_shards)).replace(name="t", dtype="float32"), seed=0)
    rng = np.random.default_rng(4)
    params = {k: rng.normal(0.0, 0.2, s).astype(np.float32) for k, s in teacher.shapes.items()}
    save_params(teacher.layout.unflatten({k: jnp.asarray(v) for k, v in params.items()}), tmp_path / "teacher",
                teacher.config)
    summary = apply_baseline(str(tmp_path / "teacher"), str(tmp_path / "out"), method, D, seed=5)
    assert summary["method"] == method
    record = json.loads((tmp_path / "out" / "prune.json").read_text())
    assert record["method"] == method and record["target_ffn_dim"] == D and len(record["kept"]) == 2
    expected = random_kept(2, 576, D, seed=5) if method == "random" else magnitude_kept(params, 2, D)
    assert all((np.asarray(a) == b).all() for a, b in zip(record["kept"], expected, strict=True))
    config = checkpoint_model_config(str(tmp_path / "out"))
    assert config.ffn_dim == D and config.dim == teacher.config.dim
    student = ModelParts.build(config, seed=0)
    like = {k: jnp.zeros(s, jnp.float32) for k, s in student.shapes.items()}
    got, _ = restore_params_only(str(tmp_path / "out"), like, student.layout)  # what --init-from does
    want = select_units(params, expected)
    for k in student.layout.keys:
        np.testing.assert_array_equal(np.asarray(got[k]), want[k])


@pytest.mark.parametrize("args,message", [
    (["--method", "random", "--run", "r"], "takes --teacher"),
    (["--method", "random", "--teacher", "t"], "needs --target-ffn-dim"),
    (["--method", "magnitude", "--teacher", "t", "--target-ffn-dim", "8", "--seed", "1"], "--seed is for"),
    (["--run", "r", "--seed", "1"], "soft-top-k takes --run"),
    (["--method", "magnitude", "--teacher", "/nonexistent/t", "--target-ffn-dim", "8"], "not a model checkpoint"),
])
def test_apply_options_fail_in_one_line(tmp_path, args, message):
    from click.testing import CliRunner

    result = CliRunner().invoke(main, ["prune", "apply", *args, "--out", str(tmp_path / "o")])
    assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
