"""``afm bench rollout``: RL rollout throughput, batched vs one response at a time.

An RL iteration samples ``K`` responses for each of ``n`` prompts. Ours: one KV-cache
sampler call over all ``n * K`` rows (``afm.training.rl.rollout.sample_groups``'s path).
Baseline: the unbatched path, one call per response (batch 1, same sampler, same cache),
which is what looping ``afm generate`` over prompts costs. Both generate the same number of
tokens (no stop token, so every row runs ``max_new_tokens``); compile time is excluded
(one warm-up call per shape).
"""

from __future__ import annotations

import time

import numpy as np

from afm.benchutil import BenchOptions, Comparison


def _tokens_per_second(fn, tokens: int) -> float:
    fn()  # compile
    start = time.perf_counter()
    fn()
    return tokens / (time.perf_counter() - start)


def bench_rollout(opts: BenchOptions) -> list[Comparison]:
    from afm.model.config import get_config
    from afm.model.sampling import sample
    from afm.model.transformer import Transformer
    from flax import nnx

    n, k, new = (4, 4, 24) if opts.quick else (8, 8, 48)
    cfg = get_config(opts.model_config or "tiny").replace(max_seq_len=256)
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

    ours = _tokens_per_second(batched, tokens)
    base = _tokens_per_second(one_at_a_time, tokens)
    label = f"{cfg.name}, {n} prompts x K={k}, {new} new tokens"
    return [Comparison(f"rollout tok/s ({label})", ours, base, "one response per sampler call", "tok/s",
                       "> 1x (batching pays)")]


BENCHMARKS = {"rollout": bench_rollout}
