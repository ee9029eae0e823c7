"""Issue 13, observed cases in ``afm decontam``: stale files of an earlier run, bad input
lines, and ``build-index`` over every file of ``../shared/eval/benchmarks``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from afm.app.commands.pipelines.decontam import decontam_group
from afm.filters.benchmarks import DATA_DIR, SUITES, build_index


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("idx") / "idx"
    build_index(str(DATA_DIR), out)
    return str(out)


def _docs(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"ordinary text {i} " * 10})
                            + "\n" for i in range(n)))
    return path


def _rows_on_disk(out: Path) -> int:
    return sum(pq.read_metadata(f).num_rows for f in out.glob("*.parquet"))


def test_rerun_leaves_no_stale_part_files(tmp_path: Path, index: str) -> None:
    """Observed: `afm decontam run` into a directory of an earlier run left stale part
    files (10 rows on disk, 5 reported)."""
    out = tmp_path / "out"
    runner = CliRunner()
    args = ["run", "--index", index, "--output", str(out)]
    assert runner.invoke(decontam_group, [*args, "--input", str(_docs(tmp_path / "a.jsonl", 10))]
                         ).exit_code == 0
    result = runner.invoke(decontam_group, [*args, "--input", str(_docs(tmp_path / "b.jsonl", 5))])
    assert result.exit_code == 1 and "--overwrite" in result.output
    result = runner.invoke(decontam_group, [*args, "--input", str(tmp_path / "b.jsonl"),
                                            "--overwrite"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["in"] == 5 == _rows_on_disk(out)


def test_bad_input_lines_are_rejects(tmp_path: Path, index: str) -> None:
    """Observed: in decontam run a single malformed JSON line aborted everything."""
    src = tmp_path / "d.jsonl"
    src.write_text('{"id": 7, "text": "an integer id, fine"}\n{"broken\n'
                   + json.dumps({"text": "lone \ud800 surrogate", "signals": "x"}) + "\n")
    result = CliRunner().invoke(decontam_group, ["run", "--index", index, "--input", str(src),
                                                 "--output", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["totals"] == {"in": 3, "kept": 2, "rejected": 1}


def test_build_index_reads_every_shared_benchmark(tmp_path: Path, shared_eval: Path) -> None:
    """Observed: build-index over ../shared/eval/benchmarks stopped at LAMBADA's layout."""
    bench = shared_eval / "benchmarks"
    files = sorted(p for p in bench.iterdir() if p.name.endswith(".jsonl.gz"))
    runner = CliRunner()
    result = runner.invoke(decontam_group, ["build-index", "--benchmarks", str(bench),
                                            "--out", str(tmp_path / "all")])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "all" / "index.json").read_text())
    assert len(meta["benchmarks"]) == len(files) == 15
    result = runner.invoke(decontam_group, ["build-index", "--suite", "report", "--benchmarks",
                                            str(bench), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    names = {b["name"] for b in json.loads((tmp_path / "report" / "index.json").read_text())["benchmarks"]}
    assert names == set(SUITES["report"]) - {"hellaswag"}
    assert "hellaswag" in result.output  # named as missing, not silently left out
