"""The curate bench's real-pages rounds (``--repeat``): every round measures every run,
the round whose whole-curate ratio is the median stands for the run, and each ratio's
range over the rounds is reported with it (one round's ratio drifts ~20% on a busy box)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from afm.app.bench.common import BenchOptions
from afm.app.bench.pipelines import curate

# CPU seconds of (first file: 100 pages, all files: 1,000 pages) per run and round:
# trafilatura runs at 25 pages/CPU-s in every round; whole curate at 2x, 1.5x, 3x of it.
TRAF = (4.0, 40.0)
CURATE = {1: (2.0, 20.0), 2: (2.0, 26.0), 3: (2.0, 14.0)}


def _manifest(path: Path, pages: int, cpu: float) -> str:
    path.mkdir(parents=True, exist_ok=True)
    stages = [{"stage": "read", "cpu_s": cpu / 2, "documents": pages, "ms_per_document": 500 * cpu / pages}]
    costs = {"stages": stages, "stages_cpu_s": cpu / 2, "process_cpu_s": cpu,
             "stages_ms_per_document": 500 * cpu / pages, "process_ms_per_document": 1000 * cpu / pages}
    (path / "manifest.json").write_text(json.dumps({"costs": costs}))
    return str(path / "manifest.json")


def _fake_measure(kind: str, inputs: Path, out: Path, extra: dict) -> curate.Measured:
    round_ = int(re.search(r"round(\d+)", out.name).group(1))
    big = inputs.name == "all"
    pages = 1000 if big else 100
    if kind == "afm-all":
        cpu = CURATE[round_][big]
        return curate.Measured(pages, pages, cpu, cpu, 100.0, _manifest(out, pages, cpu))
    cpu = TRAF[big] if kind == "trafilatura" else TRAF[big] / 5
    return curate.Measured(pages, pages, cpu, cpu, 100.0)


SEEN: list[dict] = []  # each measured run's extra settings, in order


@pytest.fixture
def rounds(tmp_path, monkeypatch):
    (tmp_path / "first").mkdir()
    (tmp_path / "all").mkdir()
    SEEN.clear()

    def measure(kind, inputs, out, extra):
        SEEN.append(extra)
        return _fake_measure(kind, inputs, out, extra)

    monkeypatch.setattr(curate, "measure", measure)
    monkeypatch.setattr(curate, "build_real_corpus", lambda pages, work: (tmp_path / "first", tmp_path / "all"))
    monkeypatch.setattr("afm.app.bench.filters.filters.held_gold_pages", lambda opts, limit=None: [])

    def run(repeat: int, block_models: tuple = ()):
        opts = BenchOptions(repeat=repeat, workdir=tmp_path, block_models=block_models)
        return curate.bench_real_pages(opts, tmp_path, "index")
    return run


def test_the_median_round_stands_for_the_run_and_the_range_is_reported(rounds, tmp_path) -> None:
    rows = rounds(3)
    whole = rows[0]
    assert whole.ratio == pytest.approx(2.0)  # round 1: the median of 2x, 1.5x, 3x
    assert "3 rounds" in whole.metric and "1.50x-3.00x" in whole.metric
    record = json.loads((tmp_path / "result-real-pages.json").read_text())
    ratios = record["ratios_to_trafilatura_by_round"]
    default = next(k for k in ratios if k.startswith("afm curate, every default"))
    assert ratios[default] == pytest.approx([1.5, 2.0, 3.0])
    # every round's runs are kept apart: the per-stage tables read the median round's own
    assert "real-round1-" in record[default]["big"]["manifest"]
    assert (tmp_path / "out" / "real-round3-3-all-files" / "manifest.json").exists()


def test_one_round_is_the_plain_run(rounds) -> None:
    whole = rounds(1)[0]
    assert whole.ratio == pytest.approx(2.0)
    assert "rounds" not in whole.metric


def test_with_two_rounds_the_lower_one_stands(rounds) -> None:
    assert rounds(2)[0].ratio == pytest.approx(1.5)  # rounds 1 (2x) and 2 (1.5x): the lower


def test_a_candidate_block_model_gets_a_whole_curate_run_of_its_own(rounds, tmp_path) -> None:
    model = tmp_path / "candidate.json"
    model.write_text("{}")
    rows = rounds(1, (model,))
    row = next(r for r in rows if "candidate.json vs trafilatura alone" in r.metric)
    assert row.ratio == pytest.approx(2.0)  # round 1's whole-curate cost
    params = [e["config"]["extract"]["params"] for e in SEEN if "config" in e]
    assert {"method": "blocks", "block_model_path": str(model)} in params
    assert sum(p.get("block_model_path") == str(model) for p in params) == 2  # the first file and all files


def test_whole_curate_also_runs_as_afm_curate_does_by_default(rounds) -> None:
    """Besides the one-process runs, whole curate with blocks runs its stages in a worker
    process beside the launcher, as ``afm curate`` does by default (other allocator settings)."""
    rows = rounds(1)
    assert any(r.metric.startswith("afm curate, every stage, extract=blocks, one worker process vs") for r in rows)
    modes = [e.get("running_mode") for e in SEEN if e.get("config", {}).get("extract", {}).get("params", {})
             .get("method") == "blocks"]
    assert modes.count("multi_processing") == 2 and None in modes  # first file and all files; and in process
