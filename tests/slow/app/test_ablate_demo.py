"""`afm ablate --demo`: the demo site crawled, curated twice (quality model off / keeping
the best half), one tokenizer, the same tiny model and budget on each, the same eval
items; the table printed and the plot written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main

pytest.importorskip("scrapy")
pytest.importorskip("apache_beam")
pytest.importorskip("lm_eval")


@pytest.mark.slow
def test_ablate_demo_prints_its_table_and_writes_its_plot(tmp_path: Path) -> None:
    work = tmp_path / "ablate"
    res = CliRunner().invoke(main, ["ablate", "--demo", "--workdir", str(work), "--token-budget", "5120",
                                    "--seeds", "0,1"])
    assert res.exit_code == 0, res.output
    assert "| task | metric | items | A | B | B - A | paired SE | z | seed SD |" in res.output
    assert "mechanics, not the filter" in res.output
    result = json.loads((work / "ablation.json").read_text())
    off, on = result["arms"]["a"], result["arms"]["b"]
    assert result["arms"][on]["tokens"] < result["arms"][off]["tokens"]  # the filter kept less
    assert result["settings"]["steps"] == 10 and result["settings"]["seeds"] == [0, 1]
    tasks = {r["task"] for r in result["rows"]}
    assert tasks == {"arc_easy", "piqa", "hellaswag"}
    for row in result["rows"]:
        assert row["items"] > 0 and row["se"] >= 0 and row["seed_sd"] is not None
    assert (work / "ablation.png").stat().st_size > 10_000 and (work / "ablation.md").is_file()
    # Both arms were trained on the same number of tokens, from the same tokenizer.
    for arm in (off, on):
        for seed in ("0", "1"):
            evaluated = json.loads(Path(result["arms"][arm]["seeds"][seed]["eval"]).read_text())
            assert evaluated["model"]["tokenizer"].startswith(result["settings"]["tokenizer"])
