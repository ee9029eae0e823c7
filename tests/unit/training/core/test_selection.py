"""Best-checkpoint selection: the best evaluation so far is kept, by min or max, across a
resume; a metric that no hook returns is a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afm.training.core.selection import BestCheckpoint, SelectionError


def test_keeps_the_best_by_mode(tmp_path: Path) -> None:
    saved: list[int] = []
    sel = BestCheckpoint(str(tmp_path), "eval/heldout/loss", "min")
    for step, value in [(10, 3.0), (20, 2.5), (30, 2.7), (40, 2.5), (50, float("nan"))]:
        sel.update(step, {"eval/heldout/loss": value, "eval/other": 1.0}, lambda p, s=step: saved.append(s))
    assert saved == [10, 20] and sel.best_step == 20  # ties keep the earlier step; NaN never wins
    data = json.loads((tmp_path / "best.json").read_text())
    assert data["step"] == 20 and data["value"] == 2.5 and len(data["history"]) == 5
    assert data["results"]["eval/other"] == 1.0
    again = BestCheckpoint(str(tmp_path), "eval/heldout/loss", "min")  # a resumed run
    assert again.best == 2.5 and again.best_step == 20
    assert not again.update(60, {"eval/heldout/loss": 2.6}, lambda p: saved.append(60))
    up = BestCheckpoint(str(tmp_path / "max"), "acc", "max")
    (tmp_path / "max").mkdir()
    up.update(1, {"acc": 0.2}, lambda p: None)
    assert up.update(2, {"acc": 0.3}, lambda p: None) and up.best_step == 2


def test_unknown_metric_and_mode(tmp_path: Path) -> None:
    sel = BestCheckpoint(str(tmp_path), "eval/heldout/acc", "max")
    with pytest.raises(SelectionError, match="eval/heldout/loss"):
        sel.update(1, {"eval/heldout/loss": 1.0}, lambda p: None)
    with pytest.raises(ValueError, match="select_mode"):
        BestCheckpoint(str(tmp_path), "x", "best")
