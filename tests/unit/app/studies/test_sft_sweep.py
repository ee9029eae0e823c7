"""The mixture sweep's plan and verdicts (the runs themselves: slow tier)."""

from __future__ import annotations

import pytest

from afm.app.studies.sft_sweep import perturbations, recommend


def test_one_weight_at_a_time() -> None:
    runs = perturbations({"a": 0.5, "b": 0.3, "c": 0.2}, 0.5)
    assert [(n, s) for n, s, _ in runs] == [("a", "+"), ("a", "-"), ("b", "+"), ("b", "-"), ("c", "+"), ("c", "-")]
    _, _, w = runs[3]
    assert w == {"a": 0.5, "b": 0.15, "c": 0.2}  # only b changed; the loader renormalises
    removed = perturbations({"a": 0.5, "b": 0.5}, 1.0, only=["b"])
    assert removed[1][2]["b"] == 0.0
    with pytest.raises(ValueError, match="unknown dataset"):
        perturbations({"a": 1.0}, 0.5, only=["z"])
    with pytest.raises(ValueError, match="delta"):
        perturbations({"a": 1.0}, 0.0)


def test_recommendation() -> None:
    runs = [{"dataset": "a", "direction": "+", "change": -0.2, "helps": True},
            {"dataset": "a", "direction": "-", "change": 0.1, "helps": False},
            {"dataset": "b", "direction": "+", "change": 0.05, "helps": False},
            {"dataset": "b", "direction": "-", "change": 0.02, "helps": False}]
    advice = recommend(runs, "min")
    assert advice["a"].startswith("raise") and advice["b"].startswith("keep")
