"""Palettization: exact bits-per-weight accounting, k-means tables and their error bounds,
bit packing, int8 embedding, and a palettized model that runs like its dequantized twin."""

from __future__ import annotations

import numpy as np
import pytest

from afm.model.config import Palettization, get_config
from afm.model.on_device import palettize

TINY32 = get_config("tiny", dtype="float32")


def test_bits_of_one_tensor_by_hand() -> None:
    # [in 64, out 32] at 4 bits, groups of 16 output channels: 2048 indices x 4 bits +
    # 2 groups x 16 entries x 16 bits = 8192 + 512 = 8704 bits = 4.25 bits per weight.
    assert palettize.palettized_bits((64, 32), 4, n_in=1) == 8704
    # wo [heads 4, head_dim 16, out 64] at 2 bits: 4096 x 2 + 4 groups x 4 x 16 = 8448.
    assert palettize.palettized_bits((4, 16, 64), 2, n_in=2) == 8448
    # int8 rows: 512 x 64 x 8 + 512 x 16 = 270336.
    assert palettize.int8_rows_bits(512, 64) == 270_336


def test_bits_report_whole_model_by_hand() -> None:
    """The tiny model (vocab 512, dim 64, 2 layers, 4x16 q heads, 2x16 kv heads, ffn
    192): layer 0 at 4 bits, layer 1 at 2 bits, int8 tied embedding (counted once),
    norms in float32 (as the palettized checkpoint stores them)."""
    spec = Palettization(bits=tuple((p, 4 if p.startswith("layers/0") else 2)
                                    for p in palettize.projection_paths(2)))
    cfg = TINY32.replace(palettization=spec)
    rows = palettize.bits_report(cfg)
    by = {r.path: r for r in rows}

    def pal(n: int, out: int, b: int) -> int:
        return n * b + (out // 16) * (2**b) * 16

    # per layer: wq 64x64, wk 64x32, wv 64x32, wo 64x64 (n_in 2), gate/up 64x192, down 192x64
    shapes = [(4096, 64), (2048, 32), (2048, 32), (4096, 64), (12288, 192), (12288, 192), (12288, 64)]
    layer = {b: sum(pal(n, o, b) for n, o in shapes) for b in (4, 2)}
    embed = 512 * 64 * 8 + 512 * 16
    norms = 2 * (64 + 64 + 16 + 16) * 32 + 64 * 32
    total = embed + layer[4] + layer[2] + norms
    assert sum(r.bits for r in rows) == total
    assert by["embed"].format == "int8/row" and by["embed"].bits == embed
    assert by["layers/1/mlp/w_up"].format == "palette2"
    weights = 512 * 64 + 2 * sum(n for n, _ in shapes) + 2 * 160 + 64
    summary = palettize.summarize_bits(rows)
    assert summary["weights"] == weights
    assert summary["bpw"] == pytest.approx(total / weights)
    assert summary["two_bit_tensors"] == 7
    # The dense 16-bit model: exactly 16 bits per weight, the embedding once.
    dense = palettize.summarize_bits(palettize.bits_report(TINY32, dense_bits=16))
    assert dense["bpw"] == 16.0 and dense["weights"] == weights


def test_pack_unpack_round_trip() -> None:
    rng = np.random.RandomState(0)
    for bits in (2, 4, 8):
        idx = rng.randint(0, 2**bits, (3, 5, 16)).astype(np.uint8)
        packed = palettize.pack_bits(idx, bits)
        assert packed.shape == (3, 5, 16 * bits // 8)
        np.testing.assert_array_equal(np.asarray(palettize.unpack_bits(packed, bits)), idx)
    with pytest.raises(ValueError, match="multiple"):
        palettize.pack_bits(np.zeros((3,), np.uint8), 2)


def _lloyd(values: np.ndarray, k: int, iters: int = 50) -> float:
    """Plain Lloyd's k-means from quantile seeds: squared error per value."""
    c = np.quantile(values, (np.arange(k) + 0.5) / k)
    for _ in range(iters):
        assign = np.abs(values[:, None] - c[None]).argmin(1)
        c = np.array([values[assign == j].mean() if np.any(assign == j) else c[j] for j in range(k)])
    return float(((values - c[np.abs(values[:, None] - c[None]).argmin(1)]) ** 2).mean())


@pytest.mark.parametrize("bits", [2, 4])
def test_dequantize_quantize_error_bounds(bits: int) -> None:
    rng = np.random.RandomState(bits)
    w = (rng.standard_normal((96, 48)) * 0.05).astype(np.float32)  # [in, out]: 3 groups
    p = palettize.palettize_array(w, bits)
    assert p.lut.shape == (3, 2**bits) and p.indices.shape == (96, 48 * bits // 8)
    back = palettize.dequantize_array(p)
    err = np.abs(back - w)
    for g in range(3):
        cols = slice(16 * g, 16 * g + 16)
        lut = np.sort(p.lut[g].astype(np.float32))
        assert np.all(np.diff(p.lut[g].astype(np.float32)) >= 0)  # ascending tables
        assert set(np.unique(back[:, cols])) <= set(lut)  # every value is on its group's table
        # nearest-entry assignment: within half the widest gap inside the range, and the
        # table spans the group's values (k-means centroids lie inside it)
        inside = (w[:, cols] >= lut[0]) & (w[:, cols] <= lut[-1])
        assert err[:, cols][inside].max() <= np.diff(lut).max() / 2 + 1e-3
        assert lut[0] >= w[:, cols].min() - 1e-3 and lut[-1] <= w[:, cols].max() + 1e-3
        # optimal 1-D k-means: never worse than Lloyd's iterations on the same group
        group = w[:, cols].ravel().astype(np.float64)
        ours = float(((back[:, cols].ravel() - group) ** 2).mean())
        assert ours <= _lloyd(group, 2**bits) * 1.001
    # relative RMS error of a Gaussian matrix: ~0.1 at 4 bits, ~0.35 at 2 bits
    rel = np.sqrt(((back - w) ** 2).mean()) / w.std()
    assert rel < {4: 0.13, 2: 0.4}[bits]


def test_palettize_multi_input_axes_matches_flattened() -> None:
    """wo [heads, head_dim, out] is grouped by output channel like its [heads*head_dim, out] view."""
    rng = np.random.RandomState(1)
    w = rng.standard_normal((4, 16, 32)).astype(np.float32)
    p3 = palettize.palettize_array(w, 4, n_in=2)
    p2 = palettize.palettize_array(w.reshape(64, 32), 4, n_in=1)
    np.testing.assert_array_equal(p3.lut, p2.lut)
    np.testing.assert_array_equal(palettize.dequantize_array(p3).reshape(64, 32), palettize.dequantize_array(p2))


def test_int8_rows() -> None:
    rng = np.random.RandomState(2)
    t = rng.standard_normal((10, 24)).astype(np.float32)
    t[3] = 0.0  # an all-zero row keeps scale 0 and values 0
    q, s = palettize.quantize_int8_rows(t)
    assert q.dtype == np.int8 and s.dtype == np.float16 and np.abs(q).max() <= 127
    back = q.astype(np.float32) * s.astype(np.float32)[:, None]
    assert np.all(np.abs(back - t) <= s.astype(np.float32)[:, None] / 2 + 1e-6)
    np.testing.assert_array_equal(back[3], 0.0)


def test_palettized_model_runs_like_its_dequantized_twin(tmp_path) -> None:
    """A checkpoint written with indices + tables loads as a palettized Transformer whose
    forward pass (dequantizing on the fly) equals the dense model holding the dequantized
    weights; the export path (dense_params) gives exactly those weights."""
    import jax.numpy as jnp
    from flax import nnx

    from afm.model.checkpoints.checkpoint import load_model, save_params
    from afm.model.initializer import init_model
    from afm.model.transformer import Transformer

    dense = init_model(TINY32, 0)
    params = nnx.to_pure_dict(nnx.state(dense, nnx.Param))
    paths = palettize.projection_paths(TINY32.n_layers)
    spec = Palettization(bits=tuple((p, 2 if "w_up" in p else 4) for p in paths))
    qcfg = TINY32.replace(palettization=spec, scan_layers=False)
    abstract = nnx.eval_shape(lambda: Transformer(qcfg, rngs=nnx.Rngs(0)))
    qparams = nnx.to_pure_dict(nnx.state(abstract, nnx.Param))
    twin = nnx.to_pure_dict(nnx.state(dense, nnx.Param))
    for path, b in spec.bits:
        i, sub, attr = path.split("/")[1:]
        p = palettize.palettize_array(np.asarray(params["layers"][int(i)][sub][attr]), b,
                                      n_in=palettize.input_axes(path))
        qparams["layers"][int(i)][sub][attr] = {"indices": p.indices, "lut": p.lut}
        twin["layers"][int(i)][sub][attr] = palettize.dequantize_array(p)
    q, s = palettize.quantize_int8_rows(np.asarray(params["embed"]))
    qparams["embed"] = {"values": q, "scale": s}
    twin["embed"] = q.astype(np.float32) * s.astype(np.float32)[:, None]
    for i in range(TINY32.n_layers):
        for norm in ("attn_norm", "mlp_norm"):
            qparams["layers"][i][norm] = params["layers"][i][norm]
        for norm in ("q_norm", "k_norm"):
            qparams["layers"][i]["attn"][norm] = params["layers"][i]["attn"][norm]
    qparams["final_norm"] = params["final_norm"]
    save_params(qparams, tmp_path / "q", qcfg)

    quantized, cfg = load_model(tmp_path / "q")
    assert cfg.palettization == spec
    assert isinstance(quantized.layers[0].mlp.w_up, palettize.PalettizedWeight)
    assert quantized.layers[0].mlp.w_up.indices[...].dtype == jnp.uint8
    from afm.model.checkpoints.hf_export import dense_params

    exported = dense_params(quantized)
    np.testing.assert_array_equal(exported["layers"][1]["mlp"]["w_up"], twin["layers"][1]["mlp"]["w_up"])
    np.testing.assert_allclose(exported["embed"], twin["embed"], rtol=1e-6)

    twin_model = init_model(TINY32, 1)
    state = nnx.state(twin_model, nnx.Param)
    nnx.replace_by_pure_dict(state, twin)
    nnx.update(twin_model, state)
    toks = jnp.asarray(np.random.RandomState(0).randint(0, 512, (2, 16)), jnp.int32)
    ours = np.asarray(nnx.jit(lambda m, t: m(t))(quantized, toks))
    ref = np.asarray(nnx.jit(lambda m, t: m(t))(twin_model, toks))
    np.testing.assert_allclose(ours, ref, atol=1e-4, rtol=1e-4)

