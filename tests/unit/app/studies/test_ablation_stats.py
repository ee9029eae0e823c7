"""The arithmetic of `afm ablate`: paired differences over the same items, seeds averaged
per item, mismatched items refused, the table and the plot."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from afm.app.studies.ablation import (
    AblationError,
    AblationSpec,
    Arm,
    compare_items,
    paired_difference,
    plot_ablation,
    table_lines,
)
from afm.evaluation.results import item_scores


def _run(values: dict[str, list[float]], ids: list[int] | None = None) -> dict:
    ids = ids or list(range(len(next(iter(values.values())))))
    return {"items": {"arc_easy": {"doc_ids": ids, "doc_hashes": [f"h{i}" for i in ids],
                                   "metrics": dict(values)}}}


def test_paired_difference_by_hand() -> None:
    a, b = [1, 0, 1, 0, 1], [1, 1, 1, 0, 0]
    mean_a, mean_b, delta, se = paired_difference(a, b)
    diffs = [0, 1, 0, 0, -1]
    sd = math.sqrt(sum(d * d for d in diffs) / 4)
    assert (mean_a, mean_b, delta) == (0.6, 0.6, 0.0) and se == pytest.approx(sd / math.sqrt(5))
    # Pairing removes what both share: the same offset on every item has no spread.
    _, _, delta, se = paired_difference([0.1, 0.5, 0.9], [0.2, 0.6, 1.0])
    assert delta == pytest.approx(0.1) and se == pytest.approx(0.0, abs=1e-12)


def test_seeds_are_averaged_per_item_and_their_spread_reported() -> None:
    runs_a = [_run({"acc,none": [0, 0, 1, 1]}), _run({"acc,none": [0, 1, 1, 1]})]
    runs_b = [_run({"acc,none": [1, 0, 1, 1]}), _run({"acc,none": [1, 1, 1, 1]})]
    (row,) = compare_items(runs_a, runs_b)
    assert row.items == 4 and row.a == pytest.approx(0.625) and row.b == pytest.approx(0.875)
    assert row.delta == pytest.approx(0.25) and row.seed_sd == pytest.approx(0.0)
    assert row.z > 0


def test_items_must_match() -> None:
    with pytest.raises(AblationError, match="different items"):
        compare_items([_run({"acc,none": [0, 1]}, ids=[0, 1])], [_run({"acc,none": [0, 1]}, ids=[0, 2])])


def test_spec_checks_before_work(tmp_path: Path) -> None:
    arms = (Arm("A", corpus="x"), Arm("A", corpus="y"))
    with pytest.raises(AblationError, match="different"):
        AblationSpec(arms=arms, workdir=tmp_path).check()
    with pytest.raises(AblationError, match="one of them"):
        AblationSpec(arms=(Arm("A"), Arm("B", corpus="y")), workdir=tmp_path).check()
    with pytest.raises(AblationError, match="seeds"):
        AblationSpec(arms=(Arm("A", corpus="x"), Arm("B", corpus="y")), workdir=tmp_path, seeds=(1, 1)).check()


def test_item_scores_from_lm_eval_samples() -> None:
    samples = {"lambada_openai": [
        {"doc_id": 1, "doc_hash": "b", "metrics": ["perplexity", "acc"], "perplexity": -2.5, "acc": 0},
        {"doc_id": 0, "doc_hash": "a", "metrics": ["perplexity", "acc"], "perplexity": -1.0, "acc": 1},
    ]}
    items = item_scores(samples)["lambada_openai"]
    assert items["doc_ids"] == [0, 1] and items["doc_hashes"] == ["a", "b"]
    # per item lm-eval logs the log-likelihood under the aggregate's name: renamed
    assert items["metrics"] == {"loglikelihood": [-1.0, -2.5], "acc": [1.0, 0.0]}


def test_table_and_plot(tmp_path: Path) -> None:
    rows = compare_items([_run({"acc,none": [0, 0, 1, 1, 0, 1]})], [_run({"acc,none": [1, 0, 1, 1, 1, 1]})])
    result = {"arms": {"a": "off", "b": "on", "off": {"documents": 10, "tokens": 5000, "epochs": 6.1},
                       "on": {"documents": 5, "tokens": 2500, "epochs": 12.3}},
              "settings": {"train_config": "tiny-core", "token_budget": 30720, "steps": 60, "seeds": [0]},
              "rows": [r.__dict__ | {"z": r.z} for r in rows]}
    text = "\n".join(table_lines(result))
    assert "| off | 10 | 5,000 | 6.10 |" in text and "| arc_easy | acc,none | 6 |" in text
    assert "+0.3333" in text and "mechanics, not the filter" in text
    pytest.importorskip("matplotlib")
    path = plot_ablation(result, tmp_path / "ablation.png")
    assert path is not None and path.stat().st_size > 5000
