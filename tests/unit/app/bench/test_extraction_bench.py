"""``afm bench extraction --block-model FILE``: a candidate block model is timed and scored
beside the shipped one, on the same pages in the same chunks."""

from __future__ import annotations

import shutil

import pytest

from afm.app.bench.common import BenchOptions
from afm.app.bench.filters.filters import bench_extraction
from afm.filters.extraction.block_model import MODEL_PATH


def test_a_candidate_model_runs_beside_the_shipped_one(shared_eval, tmp_path) -> None:
    candidate = tmp_path / "candidate.json"
    shutil.copy(MODEL_PATH, candidate)  # the same model: the same text, so the same F1
    rows = {r.metric: r for r in bench_extraction(BenchOptions(
        quick=True, shared_dir=shared_eval.parent, block_models=(candidate,)))}
    assert rows["speed: afm blocks candidate.json vs trafilatura default"].ours > 0
    assert rows["speed: afm blocks candidate.json vs the shipped model"].baseline == \
        rows["speed: blocks vs trafilatura default (20 pages of 1 sources)"].ours
    same = rows["F1 pooled: afm blocks candidate.json vs the shipped model"]
    assert same.ours == pytest.approx(same.baseline) and same.ours > 0.5
    # ScrapingHub is one of the shipped model's training sources: its F1 says so
    assert "F1 scrapinghub: blocks vs trafilatura default (in-sample)" in rows


def test_candidate_files_need_distinct_names(tmp_path) -> None:
    from click.testing import CliRunner

    from afm.app.bench.command import bench_command

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(MODEL_PATH, tmp_path / folder / "m.json")
    result = CliRunner().invoke(bench_command, ["extraction", "--block-model", str(tmp_path / "a" / "m.json"),
                                                "--block-model", str(tmp_path / "b" / "m.json")])
    assert result.exit_code == 2 and "distinct file names" in result.output
