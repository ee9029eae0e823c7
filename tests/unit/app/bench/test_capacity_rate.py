"""The capacity model takes its CPU rate from the curate bench's steady state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afm.app.bench.pipelines.capacity import CURATE_RESULT, steady_rate


def test_rate_is_the_every_stage_steady_state(tmp_path: Path) -> None:
    path = tmp_path / CURATE_RESULT
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "afm-datatrove-stages": {"steady_pages_per_cpu_s": 90.0},
        "afm-all": {"steady_pages_per_cpu_s": 64.5, "startup_cpu_s": 11.0},
        "load_average": [1.0, 2.0, 3.0]}))
    assert steady_rate(tmp_path) == (64.5, [1.0, 2.0, 3.0])


def test_missing_result_says_which_bench_to_run(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="afm bench curate"):
        steady_rate(tmp_path)


def test_a_full_bench_run_measures_curate_before_the_capacity_model_reads_it() -> None:
    from afm.app.bench.command import _collect, discover, run_order

    every = tuple(discover())
    assert every.index("capacity") < every.index("curate")  # discovery order alone would fail
    order = run_order(every, _collect("BENCHMARK_INPUTS"))
    assert order.index("curate") < order.index("capacity") and sorted(order) == sorted(every)
    assert run_order(("capacity",), {"capacity": ("curate",)}) == ["capacity"]  # not added when not asked
    assert run_order(("capacity", "curate", "dedup"), {"capacity": ("curate",)}) == ["curate", "capacity", "dedup"]
