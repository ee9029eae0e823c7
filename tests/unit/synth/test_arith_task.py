"""The verifiable arithmetic task: problems solvable from their text, a grader that ranks
by checkable facts, and preference JSONL from sampled responses."""

from __future__ import annotations

import json
import random

import pytest

from afm.synth.arith_task import (
    LEVELS,
    NotArithmetic,
    corrupted_responses,
    grade_pair,
    grade_response,
    make_problems,
    solve,
    task_reward,
    write_preferences,
    write_sft,
)


def test_problems_are_deterministic_and_solvable_from_the_prompt():
    a, b = make_problems(50, seed=3), make_problems(50, seed=3)
    assert a == b and a != make_problems(50, seed=4)
    for p in a:
        assert solve(p.messages()) == p.answer == solve(p.question)
        assert p.answer >= 0
        # the reference working is true arithmetic and ends at the answer
        g = grade_response(p.messages(), p.solution())
        assert g.correct and g.format_ok and g.false_equations == 0


def test_not_arithmetic_is_a_clear_error():
    with pytest.raises(NotArithmetic):
        solve([{"role": "user", "content": "Write a poem about the sea."}])
    with pytest.raises(NotArithmetic):
        solve("Ann has 3 apples. Ann flies away. How many apples does Ann have now?")
    with pytest.raises(NotArithmetic):
        solve([{"role": "system", "content": "hi"}])


def test_gradings_follow_checkable_properties():
    p = make_problems(1, seed=0)[0]
    prompt = p.messages()
    good = grade_response(prompt, p.solution())
    assert good.gradings == {"instruction_following": 2, "verbosity": 2, "truthfulness": 2,
                             "harmlessness": 2}
    wrong = grade_response(prompt, f"I think so.\nAnswer: {p.answer + 1}")
    assert wrong.gradings["truthfulness"] == 0 and not wrong.correct
    unformatted = grade_response(prompt, f"The total is {p.answer} in the end.")
    assert unformatted.correct and unformatted.gradings["instruction_following"] == 1
    assert grade_response(prompt, "no idea at all").gradings["instruction_following"] == 0
    short = grade_response(prompt, f"Answer: {p.answer}")
    assert short.gradings["verbosity"] == 1
    verbose = grade_response(prompt, "word " * 100 + f"\nAnswer: {p.answer}")
    assert verbose.gradings["verbosity"] == 0
    false_eq = grade_response(prompt, f"2 + 2 = 5\nAnswer: {p.answer}")
    assert false_eq.correct and false_eq.gradings["truthfulness"] == 1
    rude = grade_response(prompt, f"What a stupid question.\nAnswer: {p.answer}")
    assert rude.gradings["harmlessness"] == 0
    assert task_reward(prompt, p.solution()) == pytest.approx(1.45)
    assert task_reward(prompt, p.solution()) > task_reward(prompt, f"Answer: {p.answer + 1}")


def test_pair_levels_grow_with_the_quality_gap():
    p = make_problems(1, seed=1)[0]
    prompt = p.messages()
    v = grade_pair(prompt, f"Answer: {p.answer + 1}", p.solution())
    assert v.chosen == 1 and v.level == "significantly_better"
    v = grade_pair(prompt, p.solution(), f"Total is {p.answer}, I believe.")
    assert v.chosen == 0 and v.level == "better"  # format only
    v = grade_pair(prompt, f"Answer: {p.answer}", p.solution())
    assert v.chosen == 1 and v.level == "slightly_better"  # length only
    v = grade_pair(prompt, p.solution(), p.solution() + " ")
    assert v.level == "negligibly_better"


def test_write_preferences_from_sampled_responses(tmp_path):
    rng = random.Random(0)
    problems = make_problems(20, seed=2)
    samples = [(p.messages(), corrupted_responses(p, rng) + [p.solution()]) for p in problems]
    samples.append(([{"role": "user", "content": "Tell me a joke."}], ["a", "b"]))
    out = tmp_path / "prefs.jsonl"
    summary = write_preferences(out, samples, pairs_per_prompt=3, seed=0)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary.pairs == len(rows) == 60
    assert summary.skipped_not_arithmetic == 1 and summary.skipped_identical == 20
    assert sum(summary.levels.values()) == 60 and summary.levels["significantly_better"] > 0
    for row in rows:
        assert row["level"] in LEVELS and row["chosen"] != row["rejected"]
        assert task_reward(row["prompt"], row["chosen"]) >= task_reward(row["prompt"], row["rejected"])
        assert set(row["chosen_grades"]) == set(row["rejected_grades"]) == {
            "instruction_following", "verbosity", "truthfulness", "harmlessness"}
    # the same seed writes the same file
    write_preferences(tmp_path / "again.jsonl", samples, pairs_per_prompt=3, seed=0)
    assert (tmp_path / "again.jsonl").read_text() == out.read_text()


def test_write_sft_rows_are_chat_conversations(tmp_path):
    n = write_sft(tmp_path / "sft.jsonl", make_problems(5))
    rows = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert n == 5 and [m["role"] for m in rows[0]["messages"]] == ["user", "assistant"]


def test_write_preferences_never_pairs_a_reply_cut_at_the_token_limit(tmp_path):
    """A sampled reply that stopped for length (the end-of-turn token would be appended to
    it in training) never enters a pair, whatever its grade; the drops are counted."""
    from afm.finish import Reply

    rng = random.Random(1)
    problems = make_problems(12, seed=4)
    samples, cut_texts = [], set()
    for p in problems:
        finished = [Reply(t, "end_of_turn") for t in corrupted_responses(p, rng)[1:4]]  # not the solution
        # the best-looking reply was cut: a truncated solution and a cut correct answer
        cut = [Reply(p.solution()[: len(p.solution()) // 2], "length"), Reply(p.solution(), "length")]
        cut_texts |= {r.text for r in cut}
        samples.append((p.messages(), finished + cut + ["Answer: 0"]))  # plain strings: scripted, finished
    out = tmp_path / "prefs.jsonl"
    summary = write_preferences(out, samples, pairs_per_prompt=6, seed=0)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary.cut_replies == 2 * len(problems) and summary.pairs == len(rows) > 0
    assert not any(r["chosen"] in cut_texts or r["rejected"] in cut_texts for r in rows)
