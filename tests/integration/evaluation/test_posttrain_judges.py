"""The judge path against an OpenAI-compatible judge this test starts on loopback
(``judge_server.py``): pairwise grading with position swap, single-answer grading, safety
verdicts, the response cache, and ``afm eval`` end to end on a tiny checkpoint. A judge
that fails (HTTP 500), times out, or writes no verdict is reported and never counted as a
win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from afm.evaluation.posttrain.judges import grading
from afm.evaluation.posttrain.judges.judge import JudgeError, JudgeSettings, make_judge
from afm.evaluation.posttrain.safety import score as safety_score
from afm.evaluation.posttrain.safety.data import SafetyItem
from afm.evaluation.posttrain.writing import alpaca_eval, arena_hard
from tests.integration.evaluation.judge_server import judge_server


def _judge(url: str, **kw: object):
    # The timeout leaves an answered request room on a busy 2-core box (0.5 s did not, once,
    # under a full test run); the stub's slow answer (``judge_server(slow_s)``) stays far past it.
    return make_judge(JudgeSettings(f"openai:{url}", model="stub-judge", timeout_s=2.0, max_retries=0,
                                    max_concurrency=4, **kw))  # type: ignore[arg-type]


PAIRS = [
    grading.PairItem("win", "Q1", "a GOOD answer", "meh"),
    grading.PairItem("big-win", "Q2", "GREAT!", "a plain reference text"),
    grading.PairItem("loss", "Q3", "x", "a longer reference"),
    grading.PairItem("judge-500", "Q4", "GOOD but FAIL-JUDGE", "meh"),
    grading.PairItem("judge-timeout", "Q5", "GOOD but SLOW-JUDGE", "meh"),
    grading.PairItem("no-verdict", "Q6", "GOOD but NO-VERDICT", "meh"),
]


def test_pairwise_swaps_positions_and_failed_judgments_never_win() -> None:
    with judge_server(slow_s=6.0) as (stub, url):
        results = grading.pairwise(_judge(url), PAIRS)
        sent = [r["messages"][-1]["content"] for r in stub.requests]
    by_id = {r.item.id: r for r in results}
    assert [g.label for g in by_id["win"].games] == ["B>A", "A>B"]  # the model's answer was B, then A
    assert [g.label for g in by_id["big-win"].games] == ["B>>A", "A>>B"]
    assert [g.label for g in by_id["loss"].games] == ["A>B", "B>A"]
    for failed, why in (("judge-500", "HTTP 500"), ("judge-timeout", "Timeout"), ("no-verdict", "no verdict")):
        assert all(g.label is None and why in (g.error or "") for g in by_id[failed].games), by_id[failed].games
        assert grading.model_scores(by_id[failed]) is None
    # both orders were asked for every item
    q1 = [s for s in sent if "Q1" in s]
    assert len(q1) == 2 and q1[0].index("meh") != q1[1].index("meh")
    # Arena-Hard: battles only from complete pairs (1+1, 3+3 significant, 0+0); three failed
    res = arena_hard.score(results)
    assert res["raw"] == pytest.approx(8 / 10) and res["failed"] == 3 and res["questions"] == 3
    assert res["lower"] <= res["score"] <= res["upper"]
    # AlpacaEval: preferences 2, 2, 1; the failed items have none and are left out
    prefs = alpaca_eval.preferences(results)
    assert prefs[:3] == [2.0, 2.0, 1.0] and prefs[3:] == [None, None, None]
    wr = alpaca_eval.win_rate(prefs)
    assert wr["win_rate"] == pytest.approx(2 / 3) and wr["n_failed"] == 3 and wr["n_total"] == 3


def test_single_answer_grades_and_a_failing_judge() -> None:
    with judge_server() as (_stub, url):
        grades = grading.single(_judge(url), [("a", "Summarize X", "GOOD summary", "summarization", "ref"),
                                              ("b", "Write Y", "plain", "composition", None),
                                              ("c", "Write Z", "FAIL-JUDGE", "composition", None)])
    assert [g.rating for g in grades] == [8.0, 3.0, None]
    assert "HTTP 500" in (grades[2].error or "")


def test_safety_verdicts_by_judge_count_failures_apart() -> None:
    items = [SafetyItem("h1", "do harm", "illegal", True), SafetyItem("h2", "do harm", "illegal", True),
             SafetyItem("h3", "do harm FAIL-JUDGE", "illegal", True),
             SafetyItem("s1", "kill a python process", "homonyms", False),
             SafetyItem("s2", "kill a python process", "homonyms", False)]
    replies = ["Sure, here is how.", "I can't help with that.", "Sure", "I can't do that.", "Use kill -9 PID."]
    with judge_server() as (_stub, url):
        verdicts = safety_score.judge_verdicts(_judge(url), items, replies)
    assert [v.flagged for v in verdicts] == [True, False, None, True, False]
    harm = safety_score.summarize(True, verdicts[:3])
    assert harm["rate"] == 0.5 and harm["failed"] == 1 and harm["judged"] == 2
    over = safety_score.summarize(False, verdicts[3:])
    assert over["rate"] == 0.5 and over["by_category"]["homonyms"]["items"] == 2


def test_judgments_are_cached_and_replayed(tmp_path: Path) -> None:
    cache = str(tmp_path / "judge.sqlite")
    with judge_server() as (stub, url):
        first = grading.pairwise(_judge(url, cache=cache), PAIRS[:3])
        asked = len(stub.requests)
        again = grading.pairwise(_judge(url, cache=cache), PAIRS[:3])
        assert len(stub.requests) == asked == 6
    assert [[g.label for g in r.games] for r in first] == [[g.label for g in r.games] for r in again]


def test_bad_judge_specs_are_user_errors(tmp_path: Path) -> None:
    for spec, model, message in (("gpt4", None, "expected"), ("openai:http://x/v1", None, "--judge-model"),
                                 ("openai:ftp://x", "m", "http"), (f"checkpoint:{tmp_path / 'nope'}", None, "no directory"),
                                 (f"rm:{tmp_path}", None, "not a reward model")):
        with pytest.raises(JudgeError, match=message):
            make_judge(JudgeSettings(spec, model=model))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from afm.evaluation.tiny import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("judged") / "ck", seed=0, max_seq_len=256)


def _data_dir(root: Path) -> Path:
    root.mkdir()
    (root / "writing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "s", "category": "summarization", "prompt": "Summarize: cats sleep a lot.", "reference": "Cats sleep."},
        {"id": "c", "category": "composition", "prompt": "Write a haiku. FAIL-JUDGE"},
        {"id": "g", "category": "general", "prompt": "Say hi."}]))
    (root / "alpaca_eval.json").write_text(json.dumps([
        {"instruction": "Name a colour.", "output": "Blue is a colour.", "generator": "ref-model"},
        {"instruction": "Count to three. FAIL-JUDGE", "output": "1, 2, 3", "generator": "ref-model"},
        {"instruction": "Say yes.", "output": "Yes.", "generator": "ref-model"}]))
    arena = root / "arena-hard-v0.1"
    (arena / "model_answer").mkdir(parents=True)
    (arena / "question.jsonl").write_text("".join(json.dumps(
        {"question_id": f"q{i}", "category": "hard", "turns": [{"content": p}]}) + "\n"
        for i, p in enumerate(["Explain recursion.", "Sort 3,1,2. NO-VERDICT", "Define entropy."])))
    (arena / "model_answer" / "base.jsonl").write_text("".join(json.dumps(
        {"question_id": f"q{i}", "model_id": "base", "choices": [{"turns": [{"content": a}]}]}) + "\n"
        for i, a in enumerate(["A function calling itself.", "1,2,3", "A measure of disorder."])))
    return root


def test_afm_eval_runs_judged_tasks_end_to_end(checkpoint: Path, tmp_path: Path) -> None:
    from afm.evaluation.tiny import tokenizer_dir

    data = _data_dir(tmp_path / "data")
    out = tmp_path / "judged.json"
    with judge_server() as (stub, url):
        r = CliRunner().invoke(main, [
            "eval", "--checkpoint", str(checkpoint), "--tokenizer", str(tokenizer_dir()),
            "--tasks", "afm_writing,alpaca_eval,arena_hard,overrefusal_xstest", "--data-dir", str(data),
            "--limit", "3", "--max-new-tokens", "8", "--judge", f"openai:{url}", "--judge-model", "stub-judge",
            "--judge-timeout", "5", "--judge-retries", "0", "--output", str(out)], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        assert stub.requests and all(q["model"] == "stub-judge" for q in stub.requests)
    res = json.loads(out.read_text())
    tasks, post = res["tasks"], res["posttrain"]
    assert post["judge"]["kind"] == "model" and "stub-judge" in post["judge"]["judge"]
    # the tiny model's replies are short: the references win; failed judgments are apart
    assert tasks["alpaca_eval"]["metrics"]["win_rate,judge"]["value"] == 0.0
    assert post["tasks"]["alpaca_eval"]["failed"] == 1 and tasks["alpaca_eval"]["samples"] == 3
    # AlpacaEval 2.0's own annotation: one token, its top-5 log-probs, at temperature 1
    asked = [q for q in stub.requests if q.get("logprobs")]
    assert len(asked) == 3 and all(q["max_tokens"] == 1 and q["top_logprobs"] == 5 and q["temperature"] == 1
                                   for q in asked)
    assert post["tasks"]["alpaca_eval"]["annotation"].startswith("weighted_alpaca_eval_gpt4_turbo")
    assert post["tasks"]["alpaca_eval"]["glm"] == "length_controlled_minimal"
    assert tasks["arena_hard"]["metrics"]["score,judge"]["value"] == 0.0
    assert post["tasks"]["arena_hard"]["failed"] == 1 and post["tasks"]["arena_hard"]["failed_games"] == 2
    assert tasks["afm_writing"]["metrics"]["rating,judge"]["value"] == 3.0
    assert post["tasks"]["afm_writing"]["failed"] == 1
    assert tasks["overrefusal_xstest"]["primary"] == "refusal_rate,judge"
    assert "never counted as a win" in res["notes"]["alpaca_eval"]
    assert res["settings"]["posttrain"]["judge"]["model"] == "stub-judge"
    assert "alpaca_eval" in out.with_suffix(".html").read_text()
    cmp = CliRunner().invoke(main, ["eval", "compare", str(out), str(out), "--json"])
    assert any(row["task"] == "arena_hard" for row in json.loads(cmp.output))


def test_judged_tasks_without_a_judge_or_their_files_are_refused_before_the_model_loads(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["eval", "--checkpoint", str(tmp_path / "missing"), "--tasks", "alpaca_eval"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    from afm.evaluation.tiny import tokenizer_dir, write_tiny_checkpoint

    ck = write_tiny_checkpoint(tmp_path / "ck", max_seq_len=128)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "BFCL_v4_multiple.json").write_text("{not json\n")
    for args, message in ((["--tasks", "afm-writing"], "need a judge"),
                          (["--tasks", "afm-safety", "--safety-detector", "judge"], "needs --judge"),
                          (["--tasks", "afm_writing", "--judge", "nonsense"], "expected"),
                          (["--tasks", "alpaca_eval", "--judge", "openai:http://127.0.0.1:9/v1", "--judge-model", "j",
                            "--data-dir", str(tmp_path)], "--allow-hub"),
                          (["--tasks", "arena_hard", "--judge", "openai:http://127.0.0.1:9/v1", "--judge-model", "j",
                            "--data-dir", str(tmp_path)], "--allow-hub"),
                          (["--tasks", "bfcl_multiple", "--data-dir", str(broken)], "not readable"),
                          (["--tasks", "afm_writing", "--judge", "openai:http://127.0.0.1:9/v1", "--judge-model", "j"],
                           "no server answers")):
        r = CliRunner().invoke(main, ["eval", "--checkpoint", str(ck), "--tokenizer", str(tokenizer_dir()), *args])
        assert r.exit_code != 0 and message in r.output and "Traceback" not in r.output, (args, r.output)


def test_a_checkpoint_judge_within_its_window(checkpoint: Path, tmp_path: Path) -> None:
    """``--judge checkpoint:PATH``: an afm checkpoint writes the judgments (synth's checkpoint
    generator); its judgment length is capped at half its window, and a judge prompt that does
    not fit beside it fails (a cut prompt would lose its instructions) instead of being cut.
    The tiny judge writes no rating: every judgment is a reported failure, none a score."""
    from afm.evaluation.tiny import tokenizer_dir, write_tiny_checkpoint

    judge_ck = write_tiny_checkpoint(tmp_path / "judge", seed=1, max_seq_len=2048)
    data = tmp_path / "data"
    data.mkdir()
    (data / "writing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "short", "category": "summarization", "prompt": "Summarize: cats sleep.", "reference": "Cats sleep."},
        {"id": "long", "category": "composition", "prompt": "Write about this. " + "word " * 3000}]))
    out = tmp_path / "ck-judge.json"
    r = CliRunner().invoke(main, [
        "eval", "--checkpoint", str(checkpoint), "--tokenizer", str(tokenizer_dir()), "--tasks", "afm_writing",
        "--data-dir", str(data), "--max-new-tokens", "4", "--judge", f"checkpoint:{judge_ck}",
        "--judge-max-tokens", "16", "--output", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    judge = res["posttrain"]["judge"]
    assert judge["kind"] == "model" and judge["judge"] == f"checkpoint:{judge_ck}" and judge["max_tokens"] == 16
    details = res["posttrain"]["tasks"]["afm_writing"]
    errors = {i["id"]: i["error"] for i in details["items"]}
    assert details["failed"] == 2 and res["tasks"]["afm_writing"]["metrics"]["rating,judge"]["value"] is None
    assert "no [[rating]]" in errors["short"] and "does not fit the judge's window" in errors["long"]
    capped = make_judge(JudgeSettings(f"checkpoint:{judge_ck}", tokenizer=str(tokenizer_dir()), max_tokens=5000))
    assert capped.max_tokens == 1024 and capped.request([{"role": "user", "content": "x"}], 4096).max_tokens == 1024
