"""``afm bench dpo_packing``: DPO pairs trained per second, packed rows vs one pair per row.

Both runs are the DPO task's own train step (frozen reference, the same model, sequence
length and number of rows per step) fed by its own loaders: ours packs several pairs per
row (``task_options.packing: pairs``, :mod:`afm.training.data.packed_pairs`), the baseline
gives each chosen and each rejected sequence a row of its own, as an unpacked pair batch
does (TRL's ``DPOTrainer`` cannot pack either). The pairs are random tokens with chat-like
lengths (log-normal prompt and reply lengths, medians 48 and 64 tokens, a long tail), since
throughput depends on lengths, not on which tokens they are. Both runs step through the same
number of rows, so the ratio is how many more pairs the same compute trains; compile time is
excluded (one warm-up step each).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from afm.app.bench.common import BenchOptions, Comparison


def synthetic_pairs(n: int, *, seq_len: int, vocab: int, seed: int = 0) -> Any:
    """``n`` pairs of random tokens: a shared prompt and two replies, each pair fitting a
    packed row (chosen + rejected <= ``seq_len``)."""
    from afm.training.data.preferences import TokenizedPairs

    rng = np.random.default_rng(seed)
    chosen, rejected, c0, r0 = [], [], [], []
    while len(chosen) < n:
        prompt, a, b = (int(x) for x in np.ceil(rng.lognormal(np.log([48, 64, 64]), 0.6)))
        if 2 * prompt + a + b > seq_len:
            continue
        p = rng.integers(4, vocab, prompt)
        chosen.append(np.concatenate([p, rng.integers(4, vocab, a)]).astype(np.int32))
        rejected.append(np.concatenate([p, rng.integers(4, vocab, b)]).astype(np.int32))
        c0.append(prompt)
        r0.append(prompt)
    return TokenizedPairs(chosen, rejected, np.asarray(c0, np.int32), np.asarray(r0, np.int32),
                          np.zeros(n, np.int32), np.zeros((n, 8), np.int32), [f"p{i}" for i in range(n)])


def _pairs_per_second(packing: str, data: Any, *, model: str, seq_len: int, rows: int, steps: int) -> dict[str, float]:
    """Train ``steps`` DPO steps of ``rows`` rows of ``seq_len`` tokens each."""
    import jax

    from afm.model.distributed.sharding import MeshConfig, make_mesh
    from afm.training.core.config import get_train_config
    from afm.training.core.engine import Engine
    from afm.training.data.packed_pairs import PackedPairLoader
    from afm.training.data.preferences import PairLoader
    from afm.training.tasks import get_task

    packed = packing == "pairs"
    # unpacked, a pair takes two rows (chosen, rejected): the same rows per step = half the pairs
    batch = rows if packed else rows // 2
    cfg = get_train_config("tiny-dpo", [f"model={model}", f"data.global_batch_size={batch}", f"data.seq_len={seq_len}",
                                        f"model_overrides.max_seq_len={seq_len}", f"task_options.packing={packing}",
                                        "task_options.max_pairs_per_row=16"])
    engine = Engine.build(cfg, make_mesh(MeshConfig(data=1, fsdp=1), devices=jax.devices()[:1]), get_task(cfg.task, cfg))
    if packed:
        loader: Any = PackedPairLoader(data, seq_len=seq_len, global_batch=batch, max_pairs=16, pad_id=0, seed=0)
    else:
        loader = PairLoader(data, seq_len=seq_len, global_batch=batch, pad_id=0, seed=0)
    host = [next(loader) for _ in range(steps + 1)]
    pairs = [float(b["pair_weight"].sum()) if packed else float(len(b["level"])) for b in host]
    state = engine.init_state()
    state, metrics = engine.train_step(state, engine.global_batch(host[0]), 0)  # compile
    jax.block_until_ready(metrics)
    start = time.perf_counter()
    for i, b in enumerate(host[1:], 1):
        state, metrics = engine.train_step(state, engine.global_batch(b), i)
    jax.block_until_ready(metrics)
    seconds = time.perf_counter() - start
    return {"pairs_per_s": sum(pairs[1:]) / seconds, "pairs_per_step": float(np.mean(pairs[1:]))}


def bench_dpo_packing(opts: BenchOptions) -> list[Comparison]:
    from afm.model.config import get_config

    model = opts.model_config or "tiny"
    seq_len = opts.seq_len or 512
    steps, rows = (3, 8) if opts.quick else (10, 16)
    data = synthetic_pairs(512, seq_len=seq_len, vocab=get_config(model).vocab_size)
    ours = _pairs_per_second("pairs", data, model=model, seq_len=seq_len, rows=rows, steps=steps)
    base = _pairs_per_second("none", data, model=model, seq_len=seq_len, rows=rows, steps=steps)
    label = f"{model}, {rows} rows x {seq_len} tokens per step"
    return [
        Comparison(f"DPO pairs/s ({label})", ours["pairs_per_s"], base["pairs_per_s"], "one pair per two rows",
                   "pairs/s", "> 1x (packing pays)"),
        Comparison(f"DPO pairs per step ({label})", ours["pairs_per_step"], base["pairs_per_step"],
                   "one pair per two rows", "pairs"),
    ]


BENCHMARKS = {"dpo_packing": bench_dpo_packing}
