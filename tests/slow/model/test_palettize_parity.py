"""Parity with coremltools' k-means palettizer (``coremltools.optimize.coreml``,
``OpPalettizerConfig(mode="kmeans", granularity="per_grouped_channel", group_size=16)``,
which calls ``palettize_weights.blockwise_compress``): same bits, same groups of 16 output
channels. Needs the ``hf`` extra (coremltools 9 runs on Linux for its optimize API);
skipped with a message otherwise.

* float16 weights with >= 10,000 values per group: coremltools clusters with its bundled
  ``kmeans1d`` (optimal 1-D k-means), as we do: the same tables and indices.
* smaller float32 groups: coremltools falls back to scikit-learn's k-means++ (one init),
  a local optimum; ours is the global one, so our reconstruction error is at most theirs
  (within 1%), usually below it.
"""

from __future__ import annotations

import numpy as np
import pytest

from afm.model.on_device import palettize

pytestmark = pytest.mark.slow

ct_passes = pytest.importorskip(
    "coremltools.optimize.coreml._quantization_passes",
    reason="palettization parity needs coremltools (pip install 'afm[hf]')",
)


def _coreml(w_out_in: np.ndarray, bits: int, group: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """coremltools' (lut [groups, 2**bits], indices [out, in], dense reconstruction)."""
    pw = ct_passes.palettize_weights
    params = pw.blockwise_compress(w_out_in, "KMEANS", bits, block_sizes=[group, 0])
    dense = pw.decompress(params)
    lut = np.asarray(params.lut).reshape(w_out_in.shape[0] // group, 2**bits)
    return lut, np.asarray(params.indices).astype(np.int64), np.asarray(dense, np.float32)


def _ours(w_out_in: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = palettize.palettize_array(np.asarray(w_out_in, np.float32).T, bits)  # ours is [in, out]
    idx = np.asarray(palettize.unpack_bits(p.indices, bits)).T.astype(np.int64)
    return p.lut.astype(np.float32), idx, palettize.dequantize_array(p).T


@pytest.mark.parametrize("bits", [2, 4])
def test_same_tables_and_indices_as_coremltools_kmeans1d(bits: int) -> None:
    rng = np.random.RandomState(bits)
    w = (rng.standard_normal((64, 640)) * 0.02).astype(np.float16)  # [out, in]; 10,240 per group
    lut_ct, idx_ct, dense_ct = _coreml(w, bits)
    lut, idx, dense = _ours(w, bits)
    np.testing.assert_allclose(lut, lut_ct.astype(np.float32), rtol=1e-3, atol=1e-6)
    # indices: identical except values exactly on a rounded border between two entries
    assert (idx == idx_ct).mean() > 0.999
    ref = w.astype(np.float32)
    err_ct = float(((dense_ct - ref) ** 2).mean())
    err = float(((dense - ref) ** 2).mean())
    assert abs(err - err_ct) <= 0.01 * err_ct


@pytest.mark.parametrize("bits", [2, 4])
def test_error_no_worse_than_coremltools_sklearn_path(bits: int) -> None:
    rng = np.random.RandomState(10 + bits)
    w = (rng.standard_normal((48, 256)) * 0.05).astype(np.float32)  # 4,096 per group: k-means++
    _, _, dense_ct = _coreml(w, bits)
    _, _, dense = _ours(w, bits)
    err_ct = float(((dense_ct - w) ** 2).mean())
    err = float(((dense - w) ** 2).mean())
    print(f"{bits}-bit reconstruction MSE: ours {err:.3e}, coremltools (sklearn) {err_ct:.3e}, ratio {err / err_ct:.4f}")
    assert err <= 1.01 * err_ct
