"""LoRA adapters on the tiny transformer: identity at init, merged == unmerged, swapping
adapters without recompiling, the adapter file format, PEFT tensor layout (stored values
from the slow PEFT parity test)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from afm.model.config import get_config
from afm.model.initializer import init_model
from afm.model.on_device import lora

TINY32 = get_config("tiny", dtype="float32")


def random_adapter(cfg, config: lora.LoraConfig, seed: int, b_scale: float = 0.05) -> lora.Adapter:
    """An adapter with non-zero B (a trained-looking one), deterministic in ``seed``."""
    rng = np.random.RandomState(seed)
    weights = {}
    for path, parts in lora.adapter_shapes(cfg, config).items():
        a = rng.uniform(-0.1, 0.1, parts["a"][0]).astype(np.float32)
        b = (b_scale * rng.standard_normal(parts["b"][0])).astype(np.float32)
        weights[path] = (a, b)
    return lora.Adapter(config, weights)


def _tokens(seed: int = 0, b: int = 2, t: int = 12) -> jnp.ndarray:
    return jnp.asarray(np.random.RandomState(seed).randint(0, TINY32.vocab_size, (b, t)), jnp.int32)


@nnx.jit
def fwd(m, tokens):
    return m(tokens)


def test_fresh_adapter_is_identity_and_merge_equals_unmerged() -> None:
    model = init_model(TINY32, 0)
    toks = _tokens()
    base = np.asarray(fwd(model, toks))
    config = lora.LoraConfig(rank=4, alpha=8)
    # PEFT's init: B = 0, so attaching changes nothing.
    fresh = lora.Adapter(config, {p: (np.asarray(lora.init_a(jax.random.key(1), s["a"][0], lora.target_of(p)[1])),
                                      np.zeros(s["b"][0], np.float32))
                                  for p, s in lora.adapter_shapes(TINY32, config).items()})
    lora.attach(model, fresh)
    assert len(lora.adapted_paths(model)) == 7 * TINY32.n_layers
    np.testing.assert_allclose(np.asarray(fwd(model, toks)), base, atol=1e-6)

    lora.attach(model, random_adapter(TINY32, config, seed=3))  # replaces the fresh one
    unmerged = np.asarray(fwd(model, toks))
    assert np.abs(unmerged - base).max() > 1e-2  # the adapter does something
    lora.merge(model)
    assert lora.adapted_paths(model) == []
    np.testing.assert_allclose(np.asarray(fwd(model, toks)), unmerged, atol=2e-5, rtol=1e-5)


def test_subset_of_targets_and_layers_and_detach() -> None:
    model = init_model(TINY32, 0)
    toks = _tokens(1)
    base = np.asarray(fwd(model, toks))
    config = lora.LoraConfig(rank=2, alpha=2, targets=("v", "down", "q"), layers=(1,))
    assert config.targets == ("q", "v", "down")  # canonical order
    lora.attach(model, random_adapter(TINY32, config, seed=0))
    assert lora.adapted_paths(model) == ["layers/1/attn/wq", "layers/1/attn/wv", "layers/1/mlp/w_down"]
    assert np.abs(np.asarray(fwd(model, toks)) - base).max() > 1e-3
    lora.detach(model)
    np.testing.assert_array_equal(np.asarray(fwd(model, toks)), base)
    with pytest.raises(ValueError, match="targets"):
        lora.LoraConfig(targets=("q", "nope"))
    with pytest.raises(ValueError, match="rank"):
        lora.LoraConfig(rank=0)


def test_adapter_swap_does_not_recompile() -> None:
    """Adapters of one rank and target set are data of the compiled forward: swapping
    them (and their scale) reuses the program. Counted by traces of the jitted function
    and by JAX's own compilation log."""
    model = init_model(TINY32, 0)
    config = lora.LoraConfig(rank=4, alpha=8)
    traces = []

    @nnx.jit
    def forward(m, tokens):
        traces.append(1)
        return m(tokens)

    toks = _tokens(2)
    outs = []
    compiles_before = _compile_count()
    for seed in range(3):
        lora.attach(model, random_adapter(TINY32, config, seed=seed))
        outs.append(np.asarray(forward(model, toks)))
    lora.attach(model, random_adapter(TINY32, config, seed=0), scale=0.5)  # another alpha: data too
    outs.append(np.asarray(forward(model, toks)))
    assert len(traces) == 1
    assert _compile_count() - compiles_before <= 1
    assert np.abs(outs[0] - outs[1]).max() > 1e-3 and np.abs(outs[1] - outs[2]).max() > 1e-3
    assert np.abs(outs[0] - outs[3]).max() > 1e-4
    # Another rank changes the shapes, so it compiles again (as it must).
    lora.attach(model, random_adapter(TINY32, lora.LoraConfig(rank=8, alpha=16), seed=0))
    forward(model, toks)
    assert len(traces) == 2


_COMPILES: list[str] = []


def _compile_count() -> int:
    if not _COMPILES:
        _COMPILES.append("registered")
        jax.monitoring.register_event_duration_secs_listener(
            lambda event, _d, **_kw: _COMPILES.append(event) if "backend_compile" in event else None)
    return len(_COMPILES) - 1


def test_adapter_directory_round_trip(tmp_path) -> None:
    from afm.model.checkpoints.adapter_io import load_adapter, save_adapter
    from afm.model.checkpoints.checkpoint import load_model, save_params

    model = init_model(TINY32, 0)
    base = save_params(model, tmp_path / "base")
    config = lora.LoraConfig(rank=4, alpha=6, targets=("q", "k", "gate"))
    adapter = random_adapter(TINY32, config, seed=5)
    out = save_adapter(adapter, tmp_path / "ad", base=base, base_config=TINY32)
    loaded, meta = load_adapter(out)
    assert meta["dtype"] == "float16" and loaded.config == config
    assert meta["num_params"] == adapter.num_params
    for path, (a, b) in adapter.weights.items():  # 16-bit values, as the report ships adapters
        np.testing.assert_array_equal(loaded.weights[path][0], a.astype(np.float16).astype(np.float32))
        np.testing.assert_array_equal(loaded.weights[path][1], b.astype(np.float16).astype(np.float32))
    with pytest.raises(FileExistsError):
        save_adapter(adapter, out, base=base, base_config=TINY32)

    # An adapter directory is a model path: the base with the adapter attached.
    adapted, cfg = load_model(out)
    assert cfg == TINY32 and len(lora.adapted_paths(adapted)) == 3 * TINY32.n_layers
    lora.attach(model, loaded)
    toks = _tokens(3)
    np.testing.assert_allclose(np.asarray(fwd(adapted, toks)), np.asarray(fwd(model, toks)), atol=1e-6)

    # An adapter for another model shape is refused with a clear error.
    wrong = random_adapter(get_config("tiny", dtype="float32", ffn_dim=128), config, seed=0)
    with pytest.raises(ValueError, match="do not fit"):
        save_adapter(wrong, tmp_path / "bad", base=base, base_config=TINY32)


def test_peft_tensor_layout() -> None:
    """afm ``A [*in, r]``, ``B [r, *out]`` -> torch Linear layout ``[r, in]``, ``[out, r]``
    whose product is the transposed afm delta (what PEFT adds to ``W [out, in]``)."""
    from afm.model.checkpoints.hf_export import peft_config, to_peft_tensors

    config = lora.LoraConfig(rank=3, alpha=6, targets=("q", "o", "down"))
    adapter = random_adapter(TINY32, config, seed=1)
    tensors = to_peft_tensors(adapter)
    assert len(tensors) == 2 * 3 * TINY32.n_layers
    a, b = adapter.weights["layers/0/attn/wo"]
    pa = tensors["base_model.model.model.layers.0.self_attn.o_proj.lora_A.weight"]
    pb = tensors["base_model.model.model.layers.0.self_attn.o_proj.lora_B.weight"]
    assert pa.shape == (3, TINY32.n_heads * TINY32.head_dim) and pb.shape == (TINY32.dim, 3)
    delta = np.tensordot(a, b, axes=1).reshape(-1, TINY32.dim)  # [n*h, d] (afm in, out)
    np.testing.assert_allclose(pb @ pa, delta.T, atol=1e-6)
    cfg = peft_config(adapter, "hf-base")
    assert cfg["r"] == 3 and cfg["lora_alpha"] == 6 and cfg["target_modules"] == ["down_proj", "o_proj", "q_proj"]


# Logits of the PEFT parity setup (tests/slow/model/test_lora_peft_parity.py): tiny model
# seed 0, rank-4 alpha-8 adapter random_adapter(seed=7) on every projection stored in float16,
# tokens _tokens(11, 1, 8); the values Hugging Face Qwen3 + PEFT computed from our exports
# (float32, CPU). Last position, first 6 vocabulary entries.
PEFT_LOGITS = [-0.132774, 0.145943, 0.079147, 0.159784, -0.080069, 0.054879]


def peft_setup():
    model = init_model(TINY32, 0)
    adapter = random_adapter(TINY32, lora.LoraConfig(rank=4, alpha=8), seed=7)
    as_stored = {p: tuple(x.astype(np.float16).astype(np.float32) for x in ab) for p, ab in adapter.weights.items()}
    return model, lora.Adapter(adapter.config, as_stored), _tokens(11, 1, 8)


def test_logits_match_stored_peft_values() -> None:
    model, adapter, toks = peft_setup()
    lora.attach(model, adapter)
    ours = np.asarray(fwd(model, toks))[0, -1, :6]
    np.testing.assert_allclose(ours, np.asarray(PEFT_LOGITS), atol=1e-4)
