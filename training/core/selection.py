"""Best-checkpoint selection: keep the parameters of the best evaluation so far.

Evaluation metrics fluctuate between checkpoints, so the report selects SFT checkpoints
by automatic evaluation (§4.2) instead of taking the last one. With
``eval.select_metric`` set (a key the evaluation hooks return, e.g.
``eval/heldout/loss`` or ``eval/benchmarks/arc_easy/acc``) and ``eval.select_mode``
(``min`` or ``max``), every evaluation that improves on the best so far writes the
parameters to ``workdir/best`` (the ``afm.model.checkpoints.checkpoint`` format, loadable by every
command that takes ``--checkpoint`` or ``--init-from``) and ``workdir/best.json`` (step,
metric, every evaluation result of that step, and the history of all evaluations).

A checkpoint is written only when the metric improves, so the cost is one parameter
export per improvement; ties keep the earlier step.
"""

from __future__ import annotations

import json
import math
from typing import Any

from afm import fs

SELECT_MODES = ("min", "max")


class SelectionError(ValueError):
    """The selection metric is not among the evaluation results."""


class BestCheckpoint:
    """Tracks ``metric`` across evaluations; see the module docstring."""

    def __init__(self, workdir: str, metric: str, mode: str = "max", *, write: bool = True):
        if mode not in SELECT_MODES:
            raise ValueError(f"eval.select_mode must be one of {SELECT_MODES}, got {mode!r}")
        self.workdir = workdir
        self.metric = metric
        self.mode = mode
        self.write = write  # host 0 writes best.json; every host takes part in the save
        self.best: float | None = None
        self.best_step: int | None = None
        self.history: list[dict[str, Any]] = []
        previous = fs.as_path(workdir) / "best.json"
        if previous.exists():  # a resumed run continues the comparison
            data = json.loads(previous.read_text())
            if data.get("metric") == metric and data.get("mode") == mode:
                self.best, self.best_step = data.get("value"), data.get("step")
                self.history = list(data.get("history", []))

    def improves(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.best is None:
            return True
        return value < self.best if self.mode == "min" else value > self.best

    def update(self, step: int, results: dict[str, float], save: Any) -> bool:
        """Record this evaluation; when it is the best so far call ``save(path)`` to write
        the parameters and return True."""
        if self.metric not in results:
            known = ", ".join(sorted(results)) or "none"
            raise SelectionError(
                f"eval.select_metric {self.metric!r} is not among the evaluation results ({known})"
            )
        value = float(results[self.metric])
        self.history = [h for h in self.history if h["step"] != step]
        self.history.append({"step": step, "value": value})
        better = self.improves(value)
        if better:
            save(str(fs.as_path(self.workdir) / "best"))
            self.best, self.best_step = value, step
        self._write(results if better else None)
        return better

    def _write(self, results: dict[str, float] | None) -> None:
        if not self.write:
            return
        path = fs.as_path(self.workdir) / "best.json"
        old = json.loads(path.read_text()) if path.exists() else {}
        data = {
            "metric": self.metric, "mode": self.mode, "step": self.best_step, "value": self.best,
            "checkpoint": str(fs.as_path(self.workdir) / "best"),
            "results": results if results is not None else old.get("results", {}),
            "history": self.history,
        }
        fs.write_text_atomic(str(path), json.dumps(data, indent=2) + "\n")
