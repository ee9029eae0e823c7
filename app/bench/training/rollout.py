"""``afm bench rollout``: RL rollout throughput, batched vs one response at a time, and how
close decoding comes to the memory-bandwidth roofline.

An RL iteration samples ``K`` responses for each of ``n`` prompts. Ours: one KV-cache
sampler call over all ``n * K`` rows (``afm.training.rl.rollout.sample_groups``'s path).
Baseline: the unbatched path, one call per response (batch 1, same sampler, same cache),
which is what looping ``afm generate`` over prompts costs. Both generate the same number of
tokens (no stop token, so every row runs ``max_new_tokens``); compile time is excluded
(one warm-up call per shape).

Decoding is bound by memory bandwidth: every step reads every weight once (in its storage
dtype) and each row's keys and values written so far (bf16 for a bf16 model). On a device
whose peak bandwidth is known (:data:`PEAK_BANDWIDTH`), the batched run's bytes read per
second over that peak is printed as the roofline fraction; prefill is counted in the time,
so the fraction is a lower bound. ``--config afm-on-device`` measures the on-device model
(an accelerator's job: on CPU expect minutes).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from afm.app.bench.common import BenchOptions, Comparison

# Peak memory bandwidth (bytes/s) by device kind: vendors' data-sheet figures.
PEAK_BANDWIDTH = {
    "H100 SXM": 3.35e12, "H100 PCIe": 2.0e12, "H100": 3.35e12, "H200": 4.8e12, "GH200": 4.0e12,
    "A100-SXM4-80GB": 2.04e12, "A100": 1.56e12, "L4": 0.3e12,
    "TPU v4": 1.2e12, "TPU v5 lite": 0.82e12, "TPU v5e": 0.82e12, "TPU v5p": 2.76e12, "TPU v6 lite": 1.64e12,
}


def peak_bandwidth(device_kind: str) -> float | None:
    """The longest table name contained in the device's kind (``NVIDIA H100 80GB HBM3``)."""
    hits = [name for name in PEAK_BANDWIDTH if name.lower() in device_kind.lower()]
    return PEAK_BANDWIDTH[max(hits, key=len)] if hits else None


def bytes_read(model: Any, rows: int, prompt_len: float, new_tokens: int) -> float:
    """Bytes a decode of ``new_tokens`` steps over ``rows`` rows reads: all weights per
    step plus, per row, the KV cache filled so far (mean over the steps)."""
    import jax
    from flax import nnx

    cfg = model.cfg
    weights = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    kv_per_token = 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * np.dtype(cfg.dtype).itemsize
    mean_context = prompt_len + (new_tokens + 1) / 2
    return new_tokens * (weights + rows * mean_context * kv_per_token)


def _seconds(fn) -> float:
    fn()  # compile
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_rollout(opts: BenchOptions) -> list[Comparison]:
    import jax
    from flax import nnx

    from afm.model.config import get_config
    from afm.model.inference.sampling import sample
    from afm.model.transformer import Transformer

    n, k, new = (4, 4, 24) if opts.quick else (8, 8, 48)
    name = opts.model_config or "tiny"
    cfg = get_config(name).replace(max_seq_len=max(256, opts.seq_len or 0))
    model = Transformer(cfg, rngs=nnx.Rngs(params=0))
    rng = np.random.default_rng(0)
    prompts = [rng.integers(4, cfg.vocab_size, size=int(rng.integers(20, 40))).tolist() for _ in range(n)]
    rows = [p for p in prompts for _ in range(k)]
    tokens = len(rows) * new

    def batched() -> None:
        sample(model, rows, max_new_tokens=new, temperature=1.0, seed=1)

    def one_at_a_time() -> None:
        for i, row in enumerate(rows):
            sample(model, [row], max_new_tokens=new, temperature=1.0, seed=i)

    ours_s = _seconds(batched)
    base_s = _seconds(one_at_a_time)
    label = f"{cfg.name}, {n} prompts x K={k}, {new} new tokens"
    out = [Comparison(f"rollout tok/s ({label})", tokens / ours_s, tokens / base_s, "one response per sampler call",
                      "tok/s", "> 1x (batching pays)")]
    device = jax.devices()[0]
    peak = peak_bandwidth(getattr(device, "device_kind", ""))
    prompt_len = float(np.mean([len(p) for p in prompts]))
    achieved = bytes_read(model, len(rows), prompt_len, new) / ours_s
    if peak is None:
        out.append(Comparison(f"decode bytes read/s ({label}; no peak bandwidth known for {device.device_kind})",
                              achieved / 1e9, None, "", "GB/s"))
    else:
        out.append(Comparison(f"memory-bandwidth roofline fraction ({label}, {device.device_kind})",
                              100 * achieved / peak, None, "", f"% of {peak / 1e12:.2f} TB/s"))
    return out


BENCHMARKS = {"rollout": bench_rollout}
