"""The results file: lm-eval output parsed, written, read back, compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afm.evaluation.results import (
    FORMAT,
    ResultsError,
    compare,
    from_lm_eval,
    read_results,
    write_results,
)

LM_EVAL_OUT = {
    "results": {
        "arc_easy": {"alias": "arc_easy", "acc,none": 0.5, "acc_stderr,none": 0.1, "acc_norm,none": 0.4,
                     "acc_norm_stderr,none": 0.1},
        "gsm8k_cot": {"alias": "gsm8k_cot", "exact_match,strict-match": 0.25,
                      "exact_match_stderr,strict-match": 0.05, "exact_match,flexible-extract": 0.3,
                      "exact_match_stderr,flexible-extract": "N/A"},
    },
    "groups": {}, "n-shot": {"arc_easy": 0, "gsm8k_cot": 8},
    "n-samples": {"arc_easy": {"original": 100, "effective": 20}},
    "higher_is_better": {"arc_easy": {"acc": True}},
}


def test_from_lm_eval_keeps_metrics_and_picks_the_reports_primary() -> None:
    tasks = from_lm_eval(LM_EVAL_OUT)
    assert tasks["arc_easy"]["primary"] == "acc,none"
    assert tasks["arc_easy"]["metrics"]["acc,none"] == {"value": 0.5, "stderr": 0.1}
    assert tasks["arc_easy"]["samples"] == 20
    assert tasks["gsm8k_cot"]["primary"] == "exact_match,strict-match"
    assert tasks["gsm8k_cot"]["metrics"]["exact_match,flexible-extract"]["stderr"] is None
    assert tasks["gsm8k_cot"]["num_fewshot"] == 8


def test_round_trip_and_compare(tmp_path: Path) -> None:
    a = {"format": FORMAT, "tasks": from_lm_eval(LM_EVAL_OUT), "perplexity": None}
    b = json.loads(json.dumps(a))
    b["tasks"]["arc_easy"]["metrics"]["acc,none"]["value"] = 0.9
    pa, pb = write_results(a, tmp_path / "a.json"), write_results(b, tmp_path / "sub" / "b.json")
    rows = {(r["task"], r["metric"]): r for r in compare(read_results(pa), read_results(pb))}
    arc = rows[("arc_easy", "acc,none")]
    assert arc["delta"] == pytest.approx(0.4) and arc["significant"] is True
    assert rows[("gsm8k_cot", "exact_match,strict-match")]["delta"] == 0.0


def test_read_refuses_other_files(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{}")
    (tmp_path / "y.json").write_text("{broken")
    for name in ("x.json", "y.json", "missing.json"):
        with pytest.raises(ResultsError):
            read_results(tmp_path / name)


def test_groups_are_size_weighted_means_of_their_members() -> None:
    from afm.evaluation.results import add_groups, headline

    def entry(value: float, n: int) -> dict:
        return {"primary": "acc,none", "metrics": {"acc,none": {"value": value, "stderr": 0.1}},
                "samples": n, "num_fewshot": 5, "group": False, "parent": None}

    tasks = {"mmlu_a": entry(1.0, 30), "mmlu_b": entry(0.0, 10)}
    add_groups(tasks, {"mmlu": (["mmlu_a", "mmlu_b"], "acc,none")})
    assert tasks["mmlu"]["metrics"]["acc,none"]["value"] == pytest.approx(0.75)
    assert tasks["mmlu"]["samples"] == 40 and tasks["mmlu_a"]["parent"] == "mmlu"
    assert [r[0] for r in headline({"tasks": tasks})] == ["mmlu"]  # subjects only on request


def test_chance_is_one_over_the_answers_each_item_offered_and_groups_weigh_it() -> None:
    """Issue 56: the report draws a chance line; it comes from what the model was asked
    (answers per item), only for multiple-choice tasks."""
    from afm.evaluation.results import add_chance, add_groups

    metric = {"acc,none": {"value": 0.5, "stderr": 0.1}}
    tasks = {name: {"primary": "acc,none", "metrics": dict(metric), "samples": n}
             for name, n in (("piqa", 2), ("arc", 2), ("lambada", 3))}
    choices = {("piqa", 0): 2, ("piqa", 1): 2, ("arc", 0): 4, ("arc", 1): 5, ("lambada", 0): 1, ("lambada", 1): 1,
               ("lambada", 2): 1}
    configs = {"piqa": {"output_type": "multiple_choice"}, "arc": {"output_type": "multiple_choice"},
               "lambada": {"output_type": "loglikelihood"}}
    add_chance(tasks, choices, configs)
    assert tasks["piqa"]["chance"] == 0.5
    assert abs(tasks["arc"]["chance"] - (0.25 + 0.2) / 2) < 1e-12
    assert "chance" not in tasks["lambada"]  # one continuation scored: no guess to compare with
    add_groups(tasks, {"mc": (["piqa", "arc"], "acc,none")})
    assert abs(tasks["mc"]["chance"] - (0.5 + 0.225) / 2) < 1e-12
