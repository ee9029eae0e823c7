"""``afm bench train --suite gpu`` as a CPU dry run: the three runs with tiny shapes, one JSON."""

from __future__ import annotations

import json

from afm.app.bench.common import BenchOptions
from afm.app.bench.training.gpu_suite import RUNS, comparisons, run_suite


def test_dry_run_writes_one_json_with_every_field(tmp_path) -> None:
    record = run_suite(BenchOptions(quick=True, workdir=tmp_path), steps=1)
    saved = json.loads((tmp_path / "bench-train-gpu.json").read_text())
    assert saved["dry_run"] and saved["jax"] and saved["card"] and saved["backend"] == "cpu"
    assert [r["run"] for r in saved["runs"]] == [label for label, *_ in RUNS]
    for run in saved["runs"]:
        assert run["tokens_per_s"] > 0 and run["mfu"] > 0 and run["first_step_s"] > 0
        assert run["compiled_memory_gb"] > 0
    fp8 = [r for r in saved["runs"] if r["fp8"]]
    assert len(fp8) == 1
    auto = saved["runs"][-1]
    assert auto["auto_fit"].startswith("auto fit: batch") and auto["global_batch"] >= 1
    assert len(comparisons(record)) == len(RUNS)
