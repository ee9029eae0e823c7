"""The throughput benchmark runs the real step and reports sane figures (CPU: tiny)."""

from __future__ import annotations

import math

import pytest


@pytest.mark.slow
def test_bench_train_tiny_cpu():
    from afm.app.bench.training.throughput import bench_train

    r = bench_train("tiny", seq_len=64, batch=8, steps=2, warmup=1)
    assert r["tokens_per_s"] > 0 and 0 < r["mfu"] < 1
    assert r["global_batch"] == 8 and r["seq_len"] == 64
    assert math.isfinite(r["final_loss"])
