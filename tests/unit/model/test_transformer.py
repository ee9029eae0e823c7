"""The AFM transformer: sizes, shapes, causality, packing, KV-cache decoding, remat/scan."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from afm.model.blocks.layers import apply_rope, rope_tables
from afm.model.config import CONFIGS, flops_per_token, get_config, param_counts
from afm.model.initializer import init_model
from afm.model.transformer import KVCache, Transformer, with_config

TINY32 = get_config("tiny", dtype="float32")


@nnx.jit
def fwd(m: Transformer, tokens, positions=None, segment_ids=None):
    """Jitted forward: one compile per shape instead of one per op (tests stay fast)."""
    return m(tokens, positions=positions, segment_ids=segment_ids)


@nnx.jit
def fwd_cache(m: Transformer, tokens, cache):
    return m(tokens, cache=cache)


@pytest.fixture(scope="module")
def model() -> Transformer:
    return init_model(TINY32, 0)


def _tokens(b: int, t: int, seed: int = 0) -> jnp.ndarray:
    return jnp.asarray(np.random.RandomState(seed).randint(0, TINY32.vocab_size, (b, t)), jnp.int32)


def test_on_device_counts_match_table_1() -> None:
    p = param_counts(get_config("afm-on-device"))
    assert abs(p["non_embedding"] / 1e9 - 2.58) < 0.01
    assert abs(p["embedding"] / 1e9 - 0.15) < 0.01
    cfg = get_config("afm-on-device")
    assert (cfg.dim, cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.n_layers, cfg.vocab_size) == (
        3072, 128, 24, 8, 26, 49_152)


def test_named_configs_and_flops() -> None:
    assert {"tiny", "100m", "1b", "afm-on-device", "afm-teacher-6.4b", "afm-server"} <= set(CONFIGS)
    assert abs(param_counts(get_config("afm-teacher-6.4b"))["total"] / 1e9 - 6.4) < 0.05
    assert get_config("afm-server").vocab_size >= 100_000
    cfg = get_config("tiny")
    # 6N for the matmuls plus an attention term that grows with the sequence length.
    assert flops_per_token(cfg, 512) > flops_per_token(cfg, 256) > 0
    with pytest.raises(KeyError):
        get_config("nope")
    with pytest.raises(ValueError):
        get_config("tiny", n_kv_heads=3)


def test_param_counts_equal_the_module(model: Transformer) -> None:
    n = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    assert n == param_counts(TINY32)["total"]


def test_shapes_and_logical_axes(model: Transformer) -> None:
    c = TINY32
    attn = model.layers[0].attn
    assert attn.wq.shape == (c.dim, c.n_heads, c.head_dim)
    assert attn.wk.shape == attn.wv.shape == (c.dim, c.n_kv_heads, c.head_dim)
    assert attn.wo.shape == (c.n_heads, c.head_dim, c.dim)
    assert attn.q_norm.scale.shape == attn.k_norm.scale.shape == (c.head_dim,)
    assert model.embed.shape == (c.vocab_size, c.dim)
    specs = nnx.get_partition_spec(nnx.state(model, nnx.Param))
    assert tuple(specs["embed"].get_value()) == ("vocab", "embed")
    assert tuple(specs["layers"][0]["attn"]["wk"].get_value()) == ("embed", "kv_heads", "head_dim")
    assert tuple(specs["layers"][0]["mlp"]["w_down"].get_value()) == ("mlp", "embed")
    logits = fwd(model, _tokens(2, 7))
    assert logits.shape == (2, 7, c.vocab_size) and logits.dtype == jnp.float32


def test_initial_loss_is_near_uniform(model: Transformer) -> None:
    """muParam-simple init + 1/width logit scale: first loss ~ log(vocab)."""
    toks = _tokens(4, 32)
    logp = jax.nn.log_softmax(fwd(model, toks)[:, :-1])
    nll = -jnp.take_along_axis(logp, toks[:, 1:, None], axis=-1).mean()
    assert abs(float(nll) - np.log(TINY32.vocab_size)) < 0.5


def test_rope_depends_only_on_relative_position() -> None:
    rng = np.random.RandomState(1)
    q = jnp.asarray(rng.randn(1, 1, 1, 16), jnp.float32)
    k = jnp.asarray(rng.randn(1, 1, 1, 16), jnp.float32)

    def dot(pq: int, pk: int) -> float:
        cq, sq = rope_tables(jnp.array([[pq]]), 16, 500_000.0)
        ck, sk = rope_tables(jnp.array([[pk]]), 16, 500_000.0)
        return float((apply_rope(q, cq, sq) * apply_rope(k, ck, sk)).sum())

    assert dot(7, 3) == pytest.approx(dot(107, 103), rel=1e-4)
    assert dot(7, 3) != pytest.approx(dot(7, 6), rel=1e-3)


def test_causality(model: Transformer) -> None:
    toks = _tokens(2, 12)
    changed = toks.at[:, 8:].set((toks[:, 8:] + 1) % TINY32.vocab_size)
    a, b = fwd(model, toks), fwd(model, changed)
    np.testing.assert_allclose(a[:, :8], b[:, :8], atol=1e-6)
    assert not np.allclose(a[:, 8:], b[:, 8:])


def test_segments_isolate_packed_documents(model: Transformer) -> None:
    doc_a, doc_b = _tokens(1, 5, seed=1), _tokens(1, 6, seed=2)
    packed = jnp.concatenate([doc_a, doc_b], axis=1)
    seg = jnp.asarray([[1] * 5 + [2] * 6])
    pos = jnp.asarray([list(range(5)) + list(range(6))])
    out = fwd(model, packed, positions=pos, segment_ids=seg)
    alone = fwd(model, jnp.concatenate([doc_b, doc_a], axis=1))  # doc_b first: unaffected by a
    np.testing.assert_allclose(out[:, 5:], alone[:, :6], atol=2e-5)
    np.testing.assert_allclose(out[:, :5], fwd(model, packed)[:, :5], atol=2e-5)


@pytest.mark.parametrize("scan", [False, True])
def test_kv_cache_decoding_equals_full_forward(model: Transformer, scan: bool) -> None:
    m = with_config(model, scan_layers=scan)
    cfg = m.cfg
    toks = _tokens(2, 10, seed=3)
    full = fwd(m, toks)
    cache = KVCache.create(cfg, batch=2, max_len=16)
    logits, cache = fwd_cache(m, toks[:, :4], cache)
    steps = [logits]
    for i in range(4, 10):
        logits, cache = fwd_cache(m, toks[:, i : i + 1], cache)
        steps.append(logits)
    assert int(cache.index) == 10
    np.testing.assert_allclose(jnp.concatenate(steps, axis=1), full, atol=1e-4)


def test_prefill_into_a_prompt_sized_cache_then_grown_decodes_the_same(model: Transformer) -> None:
    """The evaluation engine prefills into a cache exactly the prompt's length (a square
    causal problem attention computes by blocks) and grows it for the decode steps: the
    logits equal the full forward's."""
    cfg = model.cfg
    toks = _tokens(2, 10, seed=4)
    full = fwd(model, toks)
    logits, cache = fwd_cache(model, toks[:, :6], KVCache.create(cfg, batch=2, max_len=6))
    cache = cache.grown(12)
    assert cache.max_len == 12 and int(cache.index) == 6
    steps = [logits]
    for i in range(6, 10):
        logits, cache = fwd_cache(model, toks[:, i : i + 1], cache)
        steps.append(logits)
    np.testing.assert_allclose(jnp.concatenate(steps, axis=1), full, atol=1e-4)
    with pytest.raises(ValueError, match="shrink"):
        cache.grown(4)


def test_remat_and_scan_keep_the_function_and_its_gradient(model: Transformer) -> None:
    toks = _tokens(2, 8, seed=4)

    def loss_and_grad(m):
        return nnx.jit(nnx.value_and_grad(lambda m: m(toks).std()))(m)

    base_loss, base_grad = loss_and_grad(model)
    for variant in (with_config(model, remat="block", scan_layers=True),):
        assert variant.cfg.scan_layers and variant.cfg.remat == "block"
        loss, grad = loss_and_grad(variant)
        assert float(loss) == pytest.approx(float(base_loss), rel=1e-5)
        for a, b in zip(jax.tree.leaves(base_grad), jax.tree.leaves(grad)):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-4)


def test_bf16_compute_with_f32_params(model: Transformer) -> None:
    m = with_config(model, dtype="bfloat16")
    assert m.layers[0].mlp.w_up.dtype == jnp.float32
    h, _ = nnx.jit(lambda m, t: m.features(t))(m, _tokens(1, 4))
    assert h.dtype == jnp.bfloat16
    assert fwd(m, _tokens(1, 4)).dtype == jnp.float32


def test_every_attention_backend_gives_the_same_model(model: Transformer) -> None:
    """The model on the splash kernel (Pallas interpret mode on CPU) equals the XLA one,
    plain causal and with packed documents."""
    toks = _tokens(2, 16, seed=5)
    seg = jnp.asarray([[1] * 7 + [2] * 9, [1] * 16])
    splash = with_config(model, attention_impl="splash")
    np.testing.assert_allclose(fwd(splash, toks), fwd(model, toks), atol=2e-5)
    np.testing.assert_allclose(
        fwd(splash, toks, segment_ids=seg), fwd(model, toks, segment_ids=seg), atol=2e-5
    )
    with pytest.raises(ValueError, match="needs a GPU"):
        fwd(with_config(model, attention_impl="cudnn"), toks)
    with pytest.raises(ValueError, match="shapes"):
        with_config(model, dim=128)
