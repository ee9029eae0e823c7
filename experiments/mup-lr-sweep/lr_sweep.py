"""Learning-rate sweeps across widths: the check that muParam (simple) transfers the LR.

``lr_sweep`` trains one model per (width, LR) pair on the same batches for a few steps
and reports the mean loss of the last steps. With muParam the best LR of the proxy
(``width == base_width``) should stay the best (within 2x) for a wider model; with
standard parametrisation (``muparam=False``, ``base_width = width``) it drifts.

Every run is the trainer's own compiled step (``afm.training.core.engine.Engine``: the
pre-training task, the AFM optimizer, muParam multipliers, skip-step off), fed the same
batches, so the sweep measures exactly what ``afm train`` would do at each LR.

Run: ``python experiments/mup-lr-sweep/lr_sweep.py --tokens 'work/demo/tokens/*.parquet'``
(or through ``tests/slow/training/test_muparam_transfer.py`` on a Markov-chain corpus).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


def _sweep_width(mcfg: Any, lrs: list[float], batches: list[dict[str, np.ndarray]], *, use_muparam: bool,
                 seed: int, tail: int) -> dict[float, float]:
    import jax

    from afm.config import load_config
    from afm.model.distributed.sharding import make_mesh
    from afm.training.core.config import TrainConfig
    from afm.training.core.engine import Engine
    from afm.training.tasks import get_task

    overrides = {f.name: getattr(mcfg, f.name) for f in dataclasses.fields(mcfg)}
    out: dict[float, float] = {}
    for lr in lrs:
        cfg = load_config(TrainConfig, {
            "name": f"lr-sweep-{mcfg.dim}-{lr:g}", "model": "tiny", "model_overrides": overrides,
            "data": {"seq_len": batches[0]["inputs"].shape[1], "global_batch_size": batches[0]["inputs"].shape[0]},
            "optimizer": {"learning_rate": lr, "weight_decay": 0.0, "muparam": use_muparam,
                          "skip": {"enabled": False}},
            "schedule": {"warmup_steps": max(len(batches) // 10, 1), "final_fraction": 0.1},
            "total_steps": len(batches), "seed": seed, "mesh": {"data": 1, "fsdp": -1},
        })
        engine = Engine.build(cfg, make_mesh(cfg.mesh, jax.devices()[:1]), get_task(cfg.task, cfg))  # one device, as a sweep runs
        state = engine.init_state()
        losses = []
        for step, batch in enumerate(batches):
            state, metrics = engine.train_step(state, engine.global_batch(batch), step)
            losses.append(float(metrics["loss"]))
        final = float(np.mean(losses[-tail:]))
        out[lr] = final if np.isfinite(final) else float("inf")
    return out


def lr_sweep(
    base_model: Any,
    widths: list[int],
    lrs: list[float],
    data_paths: list[str],
    *,
    steps: int = 60,
    seq_len: int = 64,
    batch: int = 8,
    use_muparam: bool = True,
    seed: int = 0,
    tail: int = 10,
) -> dict[int, dict[float, float]]:
    """``{width: {lr: final loss}}``; heads scale with width (head_dim fixed)."""
    from afm.training.data.loader import make_loader
    from afm.training.data.shards import DataConfig

    loader = make_loader(
        DataConfig(paths=data_paths, seq_len=seq_len, global_batch_size=batch, weights={}, prefetch=0),
        vocab_size=base_model.vocab_size,
    )
    batches = [next(loader) for _ in range(steps)]
    results: dict[int, dict[float, float]] = {}
    for width in widths:
        heads = max(width // base_model.head_dim, 2)
        mcfg = dataclasses.replace(
            base_model,
            dim=width,
            n_heads=heads,
            n_kv_heads=max(heads // 2, 1),
            ffn_dim=3 * width,
            max_seq_len=max(seq_len, base_model.max_seq_len),
            base_width=base_model.base_width if use_muparam else width,
        )
        results[width] = _sweep_width(mcfg, lrs, batches, use_muparam=use_muparam, seed=seed, tail=tail)
    return results


def best_lr(curve: dict[float, float]) -> float:
    return min(curve, key=curve.get)  # type: ignore[arg-type]


if __name__ == "__main__":
    import argparse
    import json

    from afm.model.config import get_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", required=True, help="token shards (afm tokenize output or a glob)")
    ap.add_argument("--widths", default="32,128")
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--standard", action="store_true", help="standard parametrisation instead of muParam")
    args = ap.parse_args()
    proxy = get_config("tiny", base_width=32, n_layers=2)
    grid = [0.032 * 2**i for i in range(7)]
    curves = lr_sweep(proxy, [int(w) for w in args.widths.split(",")], grid, [args.tokens], steps=args.steps,
                      use_muparam=not args.standard)
    print(json.dumps({str(w): {f"{lr:g}": v for lr, v in c.items()} | {"best": best_lr(c)}
                      for w, c in curves.items()}, indent=2))
