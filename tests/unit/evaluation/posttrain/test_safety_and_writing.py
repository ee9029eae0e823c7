"""Safety sets, the keyword refusal detector and its rates; AlpacaEval's win rates (the
length-controlled one removes a length bias) and Arena-Hard's score on known verdicts;
the writing files in their publishers' layouts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from afm.evaluation.posttrain.judges.grading import Game, PairItem, PairResult, model_scores
from afm.evaluation.posttrain.safety import data as sdata
from afm.evaluation.posttrain.safety import refusal
from afm.evaluation.posttrain.safety.score import keyword_verdicts, summarize
from afm.evaluation.posttrain.writing import alpaca_eval, arena_hard
from afm.evaluation.posttrain.writing import data as wdata


@pytest.mark.parametrize("reply,refused", [
    ("I'm sorry, but I can't help with that.", True), ("  Sorry - no.", True), ("No, I won't.", True),
    ("I cannot provide instructions for that.", True), ("As an AI, I must decline.", True),
    ("Here is how you do it: first ...", False), ("Sure! Step 1: ...", False),
    ("To kill a Python process, run kill PID. I cannot stress enough: save your work.", False),
    ("Well, I am unable to assist with this request.", True), ("", True), ("   ", True),
    ("I\u2019m sorry, that is not possible.", True),
])
def test_keyword_detector(reply: str, refused: bool) -> None:
    assert refusal.is_refusal(reply) is refused
    assert "weaker" in refusal.LABEL


def test_shipped_sets_have_their_publishers_counts() -> None:
    harm = sdata.load("safety_harmbench", None)
    unsafe = sdata.load("safety_xstest", None)
    safe = sdata.load("overrefusal_xstest", None)
    assert len(harm.items) == 100 and harm.harmful and "sample" in harm.source
    assert len(unsafe.items) == 200 and unsafe.harmful
    assert len(safe.items) == 250 and not safe.harmful
    assert {i.category for i in harm.items} >= {"chemical_biological", "illegal", "misinformation_disinformation"}


def test_data_dir_files_replace_the_shipped_ones_and_bad_ones_are_user_errors(tmp_path: Path) -> None:
    (tmp_path / "harmbench_behaviors_text_all.csv").write_text(
        "Behavior,FunctionalCategory,SemanticCategory,Tags,ContextString,BehaviorID\n"
        "Do a bad thing,standard,illegal,,,bad1\nCopy a book,copyright,copyright,,,copy1\n")
    s = sdata.load("safety_harmbench", str(tmp_path))
    assert [i.id for i in s.items] == ["bad1"] and s.source.startswith("data-dir")
    (tmp_path / "xstest_prompts.csv").write_text("id,prompt\n1,hi\n")
    with pytest.raises(sdata.SafetyDataError, match="expected columns"):
        sdata.load("overrefusal_xstest", str(tmp_path))


def test_keyword_rates_by_category() -> None:
    items = [sdata.SafetyItem("1", "p", "a", True), sdata.SafetyItem("2", "p", "a", True),
             sdata.SafetyItem("3", "p", "b", True), sdata.SafetyItem("4", "p", "b", True)]
    v = keyword_verdicts(items, ["Sure, here it is", "I'm sorry, no.", "Okay: step one", "Okay."])
    s = summarize(True, v)
    assert s["metric"] == "violation_rate" and s["rate"] == 0.75 and s["failed"] == 0
    assert s["by_category"] == {"a": {"rate": 0.5, "items": 2}, "b": {"rate": 1.0, "items": 2}}
    assert s["stderr"] == pytest.approx(np.sqrt(0.75 * 0.25 / 4))


def _pair(g0: str | None, g1: str | None, answer: str = "a", reference: str = "r") -> PairResult:
    return PairResult(PairItem("i", "q", answer, reference), (Game(g0, error=None if g0 else "x"),
                                                               Game(g1, error=None if g1 else "x")))


def test_arena_hard_weights_significant_verdicts_and_drops_incomplete_pairs() -> None:
    assert model_scores(_pair("B>>A", "A>>B")) == [1.0] * 6
    assert model_scores(_pair("A=B", "A>B")) == [1.0, 0.5]
    assert model_scores(_pair("A>B", None)) is None
    res = arena_hard.score([_pair("B>>A", "A>>B"), _pair("A>B", "B>A"), _pair(None, "A>B")], rounds=200)
    assert res["raw"] == pytest.approx(6 / 8) and res["failed"] == 1 and res["battles"] == 8
    assert abs(res["score"] - 0.75) < 0.05 and res["lower"] < 0.75 < res["upper"]
    assert arena_hard.score([_pair(None, None)])["score"] is None


def test_alpaca_preferences_average_the_two_orders() -> None:
    prefs = alpaca_eval.preferences([_pair("B>A", "A>B"), _pair("A>B", "A>B"), _pair(None, "B>A"), _pair(None, None)])
    assert prefs == [2.0, 1.5, 1.0, None]


def test_length_control_removes_a_judge_s_length_bias() -> None:
    rng = np.random.default_rng(0)
    n = 200
    model_len = rng.integers(100, 2000, n)
    base_len = np.full(n, 1000)
    # a judge that prefers whichever answer is longer, whatever the content
    p_win = 1 / (1 + np.exp(-(model_len - base_len) / 300))
    prefs = [1.0 + float(rng.random() < p) for p in p_win]
    raw = alpaca_eval.win_rate(prefs)["win_rate"]
    lc = alpaca_eval.length_controlled(prefs, model_len.tolist(), base_len.tolist())
    assert lc["glm"] == "length_controlled_minimal" and lc["weights"]["tanh_std_delta_len"] < 0  # longer baseline: fewer wins
    assert abs(lc["lc_win_rate"] - 0.5) < 0.06  # at equal length the judge is indifferent
    # the same judge, but the model writes 1.5x longer: raw win rate inflated, LC is not
    longer = np.minimum(model_len * 1.5, 3000).astype(int)
    p2 = 1 / (1 + np.exp(-(longer - base_len) / 300))
    prefs2 = [1.0 + float(rng.random() < p) for p in p2]
    raw2 = alpaca_eval.win_rate(prefs2)["win_rate"]
    lc2 = alpaca_eval.length_controlled(prefs2, longer.tolist(), base_len.tolist())["lc_win_rate"]
    assert raw2 > raw + 0.1 and abs(lc2 - 0.5) < 0.08
    assert alpaca_eval.length_controlled([2.0] * 8, list(range(8)), [3] * 8)["lc_win_rate"] > 0.99
    few = alpaca_eval.length_controlled([None, 2.0, 1.0, 2.0, 1.5], [1, 2, 3, 4, 5], [3] * 5)
    assert few["lc_win_rate"] is None and "5 cross-validation folds" in few["note"]


def test_writing_files_in_their_layouts(tmp_path: Path) -> None:
    with pytest.raises(wdata.WritingDataError, match="alpaca_eval_gpt4_baseline.json"):
        wdata.load_alpaca_eval(str(tmp_path))
    (tmp_path / "alpaca_eval.json").write_text(json.dumps([{"instruction": "a", "output": "b", "generator": "g"}]))
    (tmp_path / "instruction_difficulty.csv").write_text("index,instruction_difficulty\n0,0.7\n")
    s = wdata.load_alpaca_eval(str(tmp_path))
    assert s.items[0].reference == "b" and s.items[0].difficulty == 0.7 and s.reference_model == "g"
    v2 = tmp_path / "arena-hard-v2.0"
    (v2 / "model_answer").mkdir(parents=True)
    (v2 / "question.jsonl").write_text(json.dumps({"uid": "u1", "category": "hard_prompt", "prompt": "P"}) + "\n")
    (v2 / "model_answer" / "o3-mini.jsonl").write_text(json.dumps(
        {"uid": "u1", "messages": [{"role": "user", "content": "P"}, {"role": "assistant", "content": {"answer": "A"}}]})
        + "\n")
    a = wdata.load_arena_hard(str(tmp_path))
    assert a.items[0].prompt == "P" and a.items[0].reference == "A" and a.reference_model == "o3-mini"
    (v2 / "model_answer" / "other.jsonl").write_text("")
    with pytest.raises(wdata.WritingDataError, match="--arena-baseline"):
        wdata.load_arena_hard(str(tmp_path))
    g = wdata.load_graded(None)
    assert g.source.startswith("afm toy set") and {i.category for i in g.items} == {"summarization", "composition"}


def test_a_limit_keeps_every_category() -> None:
    safe = sdata.load("overrefusal_xstest", None)
    picked = sdata.spread(safe.items, 10)
    assert len(picked) == 10 and len({i.category for i in picked}) == 10
    everything = sdata.spread(safe.items, 1000)
    assert len(everything) == 250 and {i.id for i in everything} == {i.id for i in safe.items}


def test_a_reward_model_judge_grades_pairs_and_an_unscorable_answer_never_wins() -> None:
    from afm.evaluation.posttrain.judges import grading
    from afm.evaluation.posttrain.judges.judge import JudgeError, RewardJudge
    from afm.evaluation.posttrain.writing import arena_hard

    class Scorer:  # RewardModelScorer's interface: rewards, NaN with last_reasons for what it cannot score
        def __call__(self, prompts, replies):
            self.last_reasons = {"longer than the reward model's window (8 tokens)": 1} if any(
                r == "too long" for r in replies) else {}
            return np.array([float("nan") if r == "too long" else float(len(r)) for r in replies], np.float32)

    judge = RewardJudge(Scorer(), "rm:stub")
    items = [grading.PairItem("win", "q", "longer answer", "short"), grading.PairItem("tie", "q", "same", "same"),
             grading.PairItem("loss", "q", "x", "a longer reference"), grading.PairItem("nan", "q", "too long", "ref")]
    by_id = {r.item.id: r for r in grading.pairwise(judge, items)}
    assert [g.label for g in by_id["win"].games] == ["B>A", "A>B"]
    assert [g.label for g in by_id["tie"].games] == ["A=B", "A=B"]
    assert [g.label for g in by_id["loss"].games] == ["A>B", "B>A"]
    assert all(g.label is None and "window" in (g.error or "") for g in by_id["nan"].games)
    assert grading.model_scores(by_id["nan"]) is None
    assert arena_hard.score(list(by_id.values()))["failed"] == 1
    with pytest.raises(JudgeError, match="pairs only"):
        grading.single(judge, [("a", "q", "a", "composition", None)])


def test_writing_sets_come_from_the_hub_only_with_allow_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    hub = tmp_path / "hub"
    asked: list[tuple[str, list[str]]] = []

    def fake_snapshot(repo_id: str, repo_type: str, allow_patterns: list[str]) -> str:
        assert repo_type == "dataset"
        asked.append((repo_id, allow_patterns))
        for f in allow_patterns:
            (hub / f).parent.mkdir(parents=True, exist_ok=True)
        if repo_id == "tatsu-lab/alpaca_eval":
            (hub / allow_patterns[0]).write_text(json.dumps([{"instruction": "i", "output": "o",
                                                              "generator": "gpt4_turbo"}]))
        else:
            (hub / allow_patterns[0]).write_text(
                json.dumps({"uid": "u", "category": "hard_prompt", "prompt": "P"}) + "\n"
                + json.dumps({"uid": "w", "category": "creative_writing", "prompt": "W"}) + "\n")
            for f in allow_patterns[1:]:
                model = Path(f).stem
                (hub / f).write_text("".join(json.dumps({"uid": u, "messages": [
                    {"role": "assistant", "content": {"answer": f"{u} by {model}"}}]}) + "\n" for u in "uw"))
        return str(hub)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot)
    empty = str(tmp_path / "empty")
    with pytest.raises(wdata.WritingDataError, match="--allow-hub"):
        wdata.load_alpaca_eval(empty)
    with pytest.raises(wdata.WritingDataError, match="--allow-hub"):
        wdata.load_arena_hard(empty)
    assert not asked  # nothing fetched without --allow-hub
    a = wdata.load_alpaca_eval(empty, allow_hub=True)
    assert a.reference_model == "gpt4_turbo" and a.items[0].reference == "o"
    h = wdata.load_arena_hard(empty, allow_hub=True)  # v2.0: each category against its own baseline
    assert h.reference_model == "hard_prompt: o3-mini-2025-01-31, creative_writing: gemini-2.0-flash-001"
    assert [i.reference for i in h.items] == ["u by o3-mini-2025-01-31", "w by gemini-2.0-flash-001"]
    assert asked[1] == ("lmarena-ai/arena-hard-auto", ["data/arena-hard-v2.0/question.jsonl",
                                                      "data/arena-hard-v2.0/model_answer/gemini-2.0-flash-001.jsonl",
                                                      "data/arena-hard-v2.0/model_answer/o3-mini-2025-01-31.jsonl"])
    one = wdata.load_arena_hard(empty, "o3-mini-2025-01-31", allow_hub=True)
    assert one.reference_model == "o3-mini-2025-01-31" and [i.reference for i in one.items][1] == "w by o3-mini-2025-01-31"
    with pytest.raises(wdata.WritingDataError, match="no baseline for category 'creative_writing'"):
        wdata.load_arena_hard(empty, "hard_prompt=o3-mini-2025-01-31", allow_hub=True)
    with pytest.raises(wdata.WritingDataError, match="expected MODEL or CATEGORY=MODEL"):
        wdata.parse_baselines("hard_prompt=,x")

    def offline(*args: object, **kwargs: object) -> str:
        raise OSError("no network\nsecond line")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(wdata.WritingDataError, match=r"could not fetch .* \(OSError: no network\)$"):
        wdata.load_alpaca_eval(empty, allow_hub=True)
