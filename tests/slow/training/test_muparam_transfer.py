"""muParam (simple): the best LR of a proxy transfers (within 2x) to a 4x wider model."""

from __future__ import annotations

import importlib.util

import pytest

from afm.model.config import get_config
from tests.paths import ROOT

SCRIPT = ROOT / "experiments" / "mup-lr-sweep" / "lr_sweep.py"


def _lr_sweep_module():
    spec = importlib.util.spec_from_file_location("mup_lr_sweep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_best_lr_transfers_to_4x_width(markov_token_shards):
    proxy = get_config("tiny", base_width=32, n_layers=2)  # proxy width 32, wide model 128
    lrs = [0.032 * 2**i for i in range(7)]  # 0.032 .. 2.048, factor-2 grid
    sweep = _lr_sweep_module()
    lr_sweep, best_lr = sweep.lr_sweep, sweep.best_lr
    curves = lr_sweep(proxy, [32, 128], lrs, markov_token_shards, steps=80, use_muparam=True)
    best_proxy, best_wide = best_lr(curves[32]), best_lr(curves[128])
    print("muParam LR sweep (final loss):", curves)
    assert best_proxy not in (lrs[0], lrs[-1]), f"proxy optimum at the grid edge: {curves[32]}"
    assert 0.5 <= best_wide / best_proxy <= 2.0, curves
