"""Run metrics: console lines, TensorBoard event files and a ``metrics.jsonl`` log.

``metrics.jsonl`` (one JSON object per logged step) is what comparison plots read; the
TensorBoard events are for humans watching a run. Only process 0 writes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def mfu(tokens_per_s: float, flops_per_token: float, n_devices: int, peak_tflops: float) -> float:
    """Model FLOPs utilisation: achieved training FLOP/s over the devices' peak."""
    peak = peak_tflops * 1e12 * max(n_devices, 1)
    return tokens_per_s * flops_per_token / peak if peak > 0 else float("nan")


class MetricsWriter:
    def __init__(self, workdir: Path, *, enabled: bool = True, tensorboard: bool = True):
        self.enabled = enabled
        self.path = Path(workdir) / "metrics.jsonl"
        self._tb = None
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if tensorboard:
                from tensorboardX import SummaryWriter

                self._tb = SummaryWriter(str(Path(workdir) / "tb"))

    def write(self, step: int, values: dict[str, float]) -> None:
        if not self.enabled:
            return
        row = {"step": step, **{k: (float(v) if math.isfinite(float(v)) else str(v)) for k, v in values.items()}}
        with self.path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for key, value in values.items():
                if math.isfinite(float(value)):
                    self._tb.add_scalar(f"train/{key}", float(value), step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.flush()
            self._tb.close()


def read_metrics(workdir: Path) -> list[dict[str, Any]]:
    """The logged rows of a run (for plots and tests); the last write of a step wins."""
    path = Path(workdir) / "metrics.jsonl"
    rows: dict[int, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[int(row["step"])] = row
    return [rows[k] for k in sorted(rows)]
