"""``afm sft sweep`` end to end on the tiny model: baseline + one dataset perturbed both
ways, a table, sweep.json and sweep.png."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afm.app.studies.sft_sweep import sweep
from afm.synth.demo_data import write_demo_set
from afm.synth.prepare import PrepareConfig, prepare_sft
from tests.paths import CHAT_TOKENIZER

pytestmark = pytest.mark.slow
TOK = str(CHAT_TOKENIZER)


def test_sweep_runs_and_reports(tmp_path: Path) -> None:
    files = write_demo_set(tmp_path / "raw", per_set=30, held_out_per_set=6, planted=False)
    data, held = [], []
    for split, out in (("train", data), ("heldout", held)):
        for name in ("arith", "copy"):
            prepare_sft([files[split][name]], str(tmp_path / split / name), PrepareConfig(name, TOK), progress=False)
            out.append(str(tmp_path / split / name))
    result = sweep("tiny-sft", tmp_path / "sweep", data=data, heldout=held, steps=6, delta=0.5, only=["copy"],
                   overrides=["model_overrides.vocab_size=640"])
    runs = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["runs"]
    assert [(r["dataset"], r["direction"]) for r in runs] == [("baseline", ""), ("copy", "+"), ("copy", "-")]
    assert runs[1]["weights"]["copy"] > runs[0]["weights"]["copy"] > runs[2]["weights"]["copy"]
    assert all("change" in r for r in runs[1:]) and "copy" in result["recommendation"]
    assert (tmp_path / "sweep" / "sweep.png").stat().st_size > 1000
