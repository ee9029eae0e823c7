"""muParam multipliers by role, logical-axis sharding rules, mesh shapes, configs."""

from __future__ import annotations

import jax
import pytest

from afm.model.distributed.sharding import MeshConfig, logical_to_spec, make_mesh
from afm.training.core import muparam
from afm.training.core.config import get_train_config
from afm.training.core.stages import stages


def test_hidden_layers_scaled_embeddings_and_norms_not():
    shapes = {"embed": (512, 3072), "layers/0/attn/wq": (3072, 24, 128), "layers/0/mlp/w_down": (8064, 3072),
              "layers/0/attn_norm/scale": (3072,), "final_norm/scale": (3072,)}
    names = {"embed": ("vocab", "embed"), "layers/0/attn/wq": ("embed", "q_heads", "head_dim"),
             "layers/0/mlp/w_down": ("mlp", "embed"), "layers/0/attn_norm/scale": ("norm",),
             "final_norm/scale": ("norm",)}
    m = muparam.lr_multipliers(shapes, names, width=3072, base_width=768)
    assert m["embed"] == 1.0 and m["final_norm/scale"] == 1.0 and m["layers/0/attn_norm/scale"] == 1.0
    assert m["layers/0/attn/wq"] == 0.25 and m["layers/0/mlp/w_down"] == 0.25
    # without logical names the path and rank decide
    assert muparam.classify("tok_embedding", (10, 4), None) == muparam.EMBEDDING
    assert muparam.classify("blocks/0/ln/scale", (4,), None) == muparam.NORM
    assert muparam.classify("blocks/0/ffn/w1", (4, 8), None) == muparam.HIDDEN


def test_logical_rules_shard_evenly_or_replicate():
    mesh = make_mesh(MeshConfig(data=1, fsdp=2, tensor=4), jax.devices()[:8])
    spec = logical_to_spec(("embed", "q_heads", "head_dim"), (64, 4, 16), mesh)
    assert tuple(spec) == ("fsdp", "tensor", None)
    spec = logical_to_spec(("embed", "kv_heads", "head_dim"), (64, 2, 16), mesh)
    assert tuple(spec) == ("fsdp", None, None)  # 2 KV heads do not split 4 ways
    spec = logical_to_spec(("vocab", "embed"), (512, 64), mesh)
    assert tuple(spec) == ("tensor", "fsdp")


def test_mesh_shapes():
    assert MeshConfig(data=-1, tensor=2).shape(8) == (4, 1, 2, 1)
    assert MeshConfig(data=1, fsdp=-1, sequence=4).shape(16) == (1, 4, 1, 4)
    with pytest.raises(ValueError):
        MeshConfig(data=3, fsdp=1).shape(8)


def test_stage_configs_match_spec():
    core = get_train_config("core")
    assert core.data.seq_len == 4096 and core.optimizer.learning_rate == 0.01
    assert core.optimizer.weight_decay == 3.16e-4 and core.schedule.warmup_steps == 5000
    assert core.schedule.final_fraction == 0.005
    cont = get_train_config("continued")
    assert (cont.data.seq_len, cont.optimizer.learning_rate, cont.optimizer.weight_decay) == (8192, 3e-4, 1e-5)
    assert (cont.schedule.warmup_steps, cont.schedule.final_fraction) == (1000, 0.001)
    ctx = get_train_config("context-lengthening")
    assert ctx.data.seq_len == 32768 and ctx.model_overrides["rope_base"] == 6_315_089
    assert {"tiny-core", "tiny-continued", "tiny-context"} <= set(stages())
    over = get_train_config("tiny-core", ["optimizer.name=adamw", "mesh.tensor=2"])
    assert over.optimizer.name == "adamw" and over.mesh.tensor == 2


def test_yaml_config_with_base(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("base: tiny-core\ntotal_steps: 7\noptimizer:\n  learning_rate: 0.02\n")
    cfg = get_train_config(str(path))
    assert cfg.total_steps == 7 and cfg.optimizer.learning_rate == 0.02 and cfg.data.seq_len == 64
    from afm.config import ConfigError

    with pytest.raises(ConfigError):
        get_train_config("no-such-stage")
