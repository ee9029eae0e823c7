"""Whether the pages read are spread over workers (``read.reshuffle``): ``auto`` spreads a
few files over a cluster or several local workers, and never with one local worker, where
the spread has nowhere to go and would only write every page's HTML to a spill file and
read it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afm.pipelines.beam.io import should_reshuffle


@pytest.mark.parametrize(("setting", "files", "workers", "spread"), [
    ("auto", 3, None, True),  # a cluster runner: it decides how many workers
    ("auto", 3, 4, True),
    ("auto", 3, 1, False),  # one local worker: nowhere to spread to
    ("auto", 5000, 4, False),  # enough files to keep every worker busy
    ("always", 3, 1, True),
    ("never", 3, 4, False),
])
def test_auto_spreads_only_where_there_are_workers(setting: str, files: int, workers: int | None,
                                                    spread: bool) -> None:
    assert should_reshuffle(setting, files, 1000, workers) is spread


def test_a_bad_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="reshuffle"):
        should_reshuffle("sometimes", 3, 1000, 1)


@pytest.mark.parametrize(("workers", "spread"), [("1", False), ("2", True)])
def test_the_curate_graph_spreads_pages_by_the_local_workers(tmp_path: Path, workers: str, spread: bool) -> None:
    import apache_beam as beam

    from afm.pipelines.beam.runners import build_options
    from afm.pipelines.curate.pipeline import plan_curate

    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "a", "text": "A short text."}) + "\n")
    args = [f"--direct_num_workers={workers}"]
    plan = plan_curate([str(docs)], tmp_path / "out", config={"decontaminate": {"enabled": False}},
                       pipeline_args=args)
    pipeline = beam.Pipeline(options=build_options(plan.runner, plan.pipeline_args))
    plan.build(pipeline)
    labels = {t.unique_name for t in pipeline.to_runner_api().components.transforms.values()}
    assert ("read/spread pages" in labels) is spread
    assert "read/read records" in labels
