"""Top-1 distillation: the loss against a NumPy transcription, the teacher on the fly,
precomputed targets (``afm distill targets``) and the loader's aligned column."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow.parquet as pq
import pytest

from afm.config import ConfigError
from afm.model.distributed.sharding import MeshConfig, make_mesh
from afm.model.parts import ModelParts
from afm.outputs import OutputError
from afm.training.compress.distill_targets import compute_targets
from afm.training.core.config import get_train_config, model_config
from afm.training.core.engine import Engine
from afm.training.data.loader import make_loader
from afm.training.data.shards import DataConfig, DataError, write_token_shard
from afm.training.tasks import get_task
from afm.training.tasks.distill import DistillTask

SEQ = 32


def _random(parts: ModelParts, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for k, s in parts.shapes.items():
        std = 1.0 if k == "embed" else 0.3
        out[k] = (np.ones(s) if k.endswith("scale") else rng.normal(0.0, std, s)).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def teacher_ckpt(tmp_path_factory):
    """A random tiny-teacher saved as an afm.model checkpoint (float32 compute)."""
    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.config import get_config

    cfg = get_config("tiny-teacher").replace(dtype="float32", base_width=64)
    parts = ModelParts.build(cfg, seed=0)
    params = _random(parts, 11)
    path = tmp_path_factory.mktemp("teacher") / "model"
    save_params(parts.layout.unflatten({k: jnp.asarray(v) for k, v in params.items()}), path, cfg)
    return str(path), parts, params


def _cfg(paths, *extra):
    return get_train_config("tiny-distill-core", [
        f"data.paths={[str(p) for p in paths]}", f"data.seq_len={SEQ}", "data.global_batch_size=4", "data.prefetch=0",
        "model_overrides.dtype=float32", *extra])


def _engine(cfg):
    return Engine.build(cfg, make_mesh(MeshConfig(data=1), jax.devices()[:1]), get_task(cfg.task, cfg))


def _input(cfg):
    """The task's own input (precomputed mode adds the teacher column to the loader)."""
    return DistillTask(cfg).make_input(vocab_size=512, process_index=0, process_count=1)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _student_logits(engine, params, batch) -> np.ndarray:
    model = engine.parts.build_model({k: jnp.asarray(v) for k, v in params.items()})
    return np.asarray(model(batch["inputs"], positions=batch["positions"], segment_ids=batch["segment_ids"]))


@pytest.fixture(scope="module")
def target_shards(tmp_path_factory, teacher_ckpt, token_shards):
    out = tmp_path_factory.mktemp("targets") / "distill"
    compute_targets(teacher_ckpt[0], list(token_shards), str(out), window=16, batch_size=4)
    return out


@pytest.mark.parametrize("weights,chunk", [((0.9, 0.1), 8), ((3.0, 1.0), 32)])
def test_distillation_loss_equals_a_numpy_transcription(target_shards, weights, chunk):
    tw, lw = weights
    cfg = _cfg([target_shards], f"task_options.teacher_weight={tw}", f"task_options.label_weight={lw}",
               f"loss_chunk={chunk}")
    engine = _engine(cfg)
    params = _random(engine.parts, 3)
    source = _input(cfg)
    batch = next(b for b in source if (b["teacher_top1"] == -1).any())  # a batch with a document end
    top1 = batch["teacher_top1"]
    assert (top1 >= 0).mean() > 0.8  # only appended EOS slots have no teacher token
    jparams = {k: jnp.asarray(v) for k, v in params.items()}
    gbatch = engine.global_batch(batch)
    from afm.training.core.task import LossContext

    def loss(p, b, train):
        ctx = LossContext(engine.parts.build_model, engine.model_config, jax.random.key(0), train, jnp.asarray(0))
        out = engine.task.loss(p, b, ctx)
        return out.loss[0] / out.loss[1], {k: s / w for k, (s, w) in out.metrics.items()}

    got, metrics = jax.jit(loss, static_argnums=2)(jparams, gbatch, True)

    lp = _log_softmax(_student_logits(engine, params, gbatch))
    rows, cols = np.indices(batch["targets"].shape)
    label = lp[rows, cols, batch["targets"]]
    teacher = lp[rows, cols, np.maximum(top1, 0)]
    alpha, beta = tw / (tw + lw), lw / (tw + lw)
    per_token = np.where(top1 >= 0, -(alpha * teacher + beta * label), -label)
    mask = batch["loss_mask"]
    expected = (per_token * mask).sum() / mask.sum()
    np.testing.assert_allclose(float(got), expected, rtol=2e-5)
    np.testing.assert_allclose(float(metrics["label_loss"]), (-label * mask).sum() / mask.sum(), rtol=2e-5)
    agree = (lp.argmax(-1) == top1) * mask * (top1 >= 0)
    np.testing.assert_allclose(float(metrics["teacher_agreement"]), agree.sum() / (mask * (top1 >= 0)).sum(), rtol=1e-6)
    # evaluation reports the label cross-entropy, comparable with pre-training runs
    held_out, _ = jax.jit(loss, static_argnums=2)(jparams, gbatch, False)
    np.testing.assert_allclose(float(held_out), (-label * mask).sum() / mask.sum(), rtol=2e-5)


def test_targets_are_the_teachers_argmax_per_window(target_shards, teacher_ckpt, token_shards):
    _, parts, params = teacher_ckpt
    out = pq.read_table(f"{target_shards}/tokens-00000.parquet")
    src = pq.read_table(token_shards[0])
    assert out.column("id").to_pylist() == src.column("id").to_pylist()
    assert out.column("tokens").to_pylist() == src.column("tokens").to_pylist()
    model = parts.build_model({k: jnp.asarray(v) for k, v in params.items()})
    forward = jax.jit(lambda t: jnp.argmax(model(t), -1))
    checked = 0
    for tokens, top1 in list(zip(out.column("tokens").to_pylist(), out.column("teacher_top1").to_pylist(), strict=True))[:12]:
        assert len(top1) == len(tokens)
        for start in range(0, len(tokens), 16):  # each 16-token window on its own
            window = tokens[start:start + 16]
            padded = window + [3] * (16 - len(window))  # causal: the padding changes nothing before it
            want = np.asarray(forward(jnp.asarray([padded])))[0][: len(window)]
            np.testing.assert_array_equal(top1[start:start + 16], want)
            checked += 1
    assert checked > 12
    assert (target_shards / "_SUCCESS").exists()
    with pytest.raises(OutputError, match="already holds a finished run"):
        compute_targets(teacher_ckpt[0], list(token_shards), str(target_shards), window=16)


def test_teacher_on_the_fly_gives_the_precomputed_top1(teacher_ckpt, tmp_path):
    """The frozen teacher beside the student: restored from its checkpoint, no gradient, and
    its top-1 ids on a row of whole documents equal `afm distill targets`' ids."""
    path, parts, params = teacher_ckpt
    docs = [{"id": f"d{i}", "source": "web", "tokens": list(np.random.default_rng(i).integers(3, 512, 7))}
            for i in range(40)]  # 7 tokens + EOS: 4 documents per 32-token row, none split
    shard = write_token_shard(docs, tmp_path / "docs.parquet")
    compute_targets(path, [shard], str(tmp_path / "targets"), window=16)
    cfg = _cfg([tmp_path / "targets"], f"task_options.teacher={path}", "data.shuffle=false")
    engine = _engine(cfg)
    assert all(k.startswith("teacher/") for k in engine.frozen) and len(engine.frozen) == len(parts.shapes)
    state = engine.init_state(_random(engine.parts, 3))
    for k, v in params.items():
        np.testing.assert_array_equal(np.asarray(state.frozen["teacher/" + k]), v)
    batch = next(_input(_cfg([tmp_path / "targets"], "data.shuffle=false")))
    ids = jax.jit(lambda p, b: engine.task.teacher_ids(p, b, None))(engine.all_params(state), engine.global_batch(batch))
    real = batch["segment_ids"] > 0
    eos_slot = batch["teacher_top1"] < 0  # the appended EOS: next document (masked)
    np.testing.assert_array_equal(np.asarray(ids)[real & ~eos_slot], batch["teacher_top1"][real & ~eos_slot])


def test_student_and_teacher_must_share_all_but_the_ffn(teacher_ckpt, token_shards):
    with pytest.raises(ConfigError, match="dim 64 vs 96"):
        _engine(_cfg(token_shards, f"task_options.teacher={teacher_ckpt[0]}", "model_overrides.dim=96"))
    with pytest.raises(DataError, match="afm distill targets"):
        next(_input(_cfg(token_shards)))
    with pytest.raises(ConfigError, match="not both 0"):
        _engine(_cfg(token_shards, "task_options.teacher_weight=0", "task_options.label_weight=0"))
    assert model_config(_cfg(token_shards)).ffn_dim == 192


def test_loader_packs_an_aligned_column_with_its_tokens(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(30):
        tokens = rng.integers(3, 500, int(rng.integers(3, 50))).tolist()
        rows.append({"id": str(i), "source": "web", "tokens": tokens})
    import pyarrow as pa

    table = pa.Table.from_pylist(rows)
    table = table.append_column("shadow", pa.array([[t + 1 for t in r["tokens"]] for r in rows], pa.list_(pa.int32())))
    pq.write_table(table, tmp_path / "s.parquet", row_group_size=8)
    cfg = DataConfig(paths=[str(tmp_path / "s.parquet")], seq_len=40, global_batch_size=2, prefetch=0,
                     aligned_columns=["shadow"])
    loader = make_loader(cfg, vocab_size=512)
    for _ in range(5):
        b = next(loader)
        from_doc = b["shadow"] >= 0
        np.testing.assert_array_equal(b["shadow"][from_doc], b["inputs"][from_doc] + 1)
        assert (b["inputs"][~from_doc & (b["segment_ids"] > 0)] == cfg.eos_id).all()  # only appended EOS lack it
    bad = table.set_column(3, "shadow", pa.array([r["tokens"][:-1] for r in rows], pa.list_(pa.int32())))
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(DataError, match="not aligned"):
        next(make_loader(DataConfig(paths=[str(tmp_path / "bad.parquet")], seq_len=40, global_batch_size=2,
                                    prefetch=0, aligned_columns=["shadow"]), vocab_size=512))
    with pytest.raises(DataError, match="outside"):
        next(make_loader(cfg, vocab_size=100))
