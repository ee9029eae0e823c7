"""``--batch auto`` / ``--remat auto``: the search over compiled memory plans."""

from __future__ import annotations

import jax
import pytest

from afm.errors import UserError
from afm.model.distributed.sharding import MeshConfig, make_mesh
from afm.training.core.config import get_train_config
from afm.training.runs.autofit import REMAT_ORDER, autofit, fit_config

# GiB per sequence kept for the backward pass under each policy (a made-up, monotone plan)
PER_ROW = {"none": 10.0, "dots": 7.0, "dots_except_mlp": 5.0, "qkv_attention": 4.0, "attention": 3.0, "full": 1.0}


def _planner(calls: list):
    def plan(cfg, mesh) -> float:
        width = mesh.shape["data"] * mesh.shape["fsdp"]
        rows = cfg.data.global_batch_size // width
        policy = cfg.model_overrides["remat"]
        calls.append((policy, rows))
        return 8.0 + PER_ROW[policy] * rows

    return plan


@pytest.fixture(scope="module")
def one_device():
    return make_mesh(MeshConfig(data=1, fsdp=1), devices=jax.devices()[:1])


def test_cheapest_policy_that_fits_the_largest_batch(one_device) -> None:
    cfg = get_train_config("tiny-core")
    calls: list = []
    # budget 50: none fits 4 (48), dots 4 (36) but not 8, dots_except_mlp 8 (48), qkv 8 (40) not 16 ...
    fit = autofit(cfg, one_device, batch=True, remat=True, budget_gb=50.0, planner=_planner(calls), max_per_device=64)
    assert (fit.batch_per_device, fit.remat) == (32, "full")  # 8 + 32 = 40; attention 16 -> 56 no
    assert fit.plan_gb == 40.0 and fit.plan_gb <= fit.budget_gb
    # never a grid: each policy starts just above the best batch so far
    assert len(calls) < len(REMAT_ORDER) * 7 and calls[0] == ("none", 1)
    assert all(b > 1 for p, b in calls if p != "none")
    capped = autofit(cfg, one_device, batch=True, remat=True, budget_gb=500.0, planner=_planner([]), max_per_device=16)
    assert (capped.batch_per_device, capped.remat) == (16, "none")  # the cap reached without recomputation


def test_remat_auto_alone_keeps_the_batch(one_device) -> None:
    cfg = get_train_config("tiny-core", ["data.global_batch_size=4"])
    fit = autofit(cfg, one_device, batch=False, remat=True, budget_gb=30.0, planner=_planner([]))
    assert (fit.batch_per_device, fit.remat) == (4, "dots_except_mlp")  # 8 + 5 * 4 = 28
    with pytest.raises(UserError, match="does not fit"):
        autofit(cfg, one_device, batch=False, remat=True, budget_gb=9.0, planner=_planner([]))


def test_fit_config_applies_the_choice(one_device, monkeypatch) -> None:
    cfg = get_train_config("tiny-core")
    monkeypatch.setenv("AFM_DEVICE_MEMORY_GB", "40")  # 36 GiB usable after the headroom
    fitted, fit = fit_config(cfg, one_device, batch=True, remat=True, planner=_planner([]))
    assert fitted.data.global_batch_size == fit.batch_per_device and fitted.model_overrides["remat"] == fit.remat
    assert "auto fit: batch" in fit.summary()
    monkeypatch.setenv("AFM_DEVICE_MEMORY_GB", "lots")
    with pytest.raises(UserError, match="AFM_DEVICE_MEMORY_GB"):
        fit_config(cfg, one_device, batch=True, remat=False, planner=_planner([]))


def test_on_the_compiled_plan_of_the_tiny_model(one_device) -> None:
    """The real planner: XLA's memory analysis of the compiled step, on CPU."""
    from afm.training.runs.memory_plan import plan_config

    cfg = get_train_config("tiny-core", ["data.seq_len=64", "model_overrides.max_seq_len=64"])
    fit = autofit(cfg, one_device, batch=True, remat=False, budget_gb=1.0, max_per_device=4)
    assert fit.batch_per_device == 4 and [b for _, b, _ in fit.tried] == [1, 2, 4]
    sizes = [g for _, _, g in fit.tried]
    assert sizes == sorted(sizes) and sizes[0] > 0  # more rows, more memory
    again = get_train_config("tiny-core", ["data.seq_len=64", "model_overrides.max_seq_len=64",
                                           "data.global_batch_size=4", f"model_overrides.remat={fit.remat}"])
    assert plan_config(again, one_device)["total_gb"] == pytest.approx(fit.plan_gb)
    with pytest.raises(UserError, match="does not fit"):
        autofit(cfg, one_device, batch=True, remat=False, budget_gb=1e-6, max_per_device=4)
