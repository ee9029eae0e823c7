"""``afm synth math`` and ``afm synth tool`` driven by deterministic stand-in generators:
each strategy makes the problems it should, solutions are kept exactly when their final
answer matches the ground truth (the evaluation's GSM8K rules), and every drop has a reason;
tool calls are kept only when they name the right tool with schema-valid arguments."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from afm.synth.generators import Generation, GenerationRequest
from afm.synth.math_data import MathConfig, read_seed, reverse_problem, synth_math
from afm.synth.run import SynthRun, finish, open_output
from afm.synth.tool_data import ToolConfig, check_call, distractors_for, parse_calls, synth_tool
from tests.paths import ROOT

pytest.importorskip("lm_eval", reason="answer rules come from lm-eval (the eval extra)")

SEEDS = [{"id": "s1", "question": "Ann has 12 apples and buys 30 more. How many apples does she have?",
          "answer": "12 + 30 = 42\n#### 42"},
         {"id": "s2", "question": "A box holds 7 pens. How many pens are in 5 boxes?", "answer": "#### 35"},
         {"id": "s3", "question": "What is the color of the sky?"}]  # no ground truth


class MathStandIn:
    """Deterministic replies: sample 0 right, 1 wrong, 2 without an answer, 3 = sample 0."""

    name = "stand-in-math"

    def __init__(self) -> None:
        self.gold = {s["question"]: s["answer"].split("#### ")[-1] for s in SEEDS if "answer" in s}

    def answer_for(self, q: str) -> str:
        if "unknown variable X" in q:
            for seed in SEEDS:
                rev = reverse_problem(read_seed(seed, 0))
                if rev and rev.question == q:
                    return rev.gold
        for base, gold in self.gold.items():
            if base in q:
                return gold
        return "9"

    def reply(self, r: GenerationRequest) -> list[str]:
        q = r.messages[-1]["content"]
        if r.tag == "math/rephrase":
            return ["Here is a puzzle for you to think about. " + q.split("Problem: ", 1)[1]
                    + " Explain how you find it."]
        if r.tag == "math/depth":
            return ["New problem: " + q.split("Problem: ", 1)[1] + " Then she eats 2 of them."]
        if r.tag == "math/breadth":
            return ["A farmer has 3 cows. How many legs do they have?"] if "sky" not in q else [""]
        if r.tag == "math/judge_problem":
            return ["solvable: no; difficulty: 1" if "sky" in q else "solvable: yes; difficulty: 6"]
        if r.tag == "math/judge_solution":
            problem, solution = q.split("Problem: ", 1)[1].split("\n\nSolution: ", 1)
            said = re.search(r"The answer is (\d+)", solution)
            return ["correct" if said and said.group(1) == self.answer_for(problem) else "incorrect"]
        question = q.split("\n\n", 1)[1]
        gold = self.answer_for(question)
        wrong = str(int(gold) + 1)
        good = f"Working it out step by step. The answer is {gold}."
        return [good, f"Hmm. The answer is {wrong}.", "I am not sure.", good][: r.n]

    def generate(self, requests, on_result=None):
        out = []
        for i, r in enumerate(requests):
            texts = self.reply(r)
            g = Generation(texts, ["stop"] * len(texts))
            out.append(g)
            if on_result:
                on_result(i, g)
        return out


def test_math_pipeline_keeps_exactly_the_verified_solutions(tmp_path: Path) -> None:
    run = SynthRun("math", MathStandIn(), progress=False)
    section = synth_math(run, SEEDS, MathConfig(samples=4, keep_per_problem=2))
    kept = run.kept
    strategies = {c["meta"]["strategy"] for c in kept}
    assert strategies == {"seed", "rephrase", "reverse", "depth", "breadth"}
    for c in kept:
        meta = c["meta"]
        answer = re.search(r"The answer is (\d+)", c["messages"][1]["content"]).group(1)
        if meta["gold"] is not None:
            assert answer == meta["gold"] and meta["verified_by"] == "ground_truth"
        else:
            assert meta["verified_by"] == "judge"
    # reverse: the hidden number is the ground truth
    rev = [c for c in kept if c["meta"]["strategy"] == "reverse"]
    assert {c["meta"]["gold"] for c in rev} == {"12", "7"}
    reasons = {(d["stage"], d["reason"]) for d in run.dropped}
    assert {("solve", "wrong_answer"), ("solve", "no_final_answer"), ("evolve", "judged_unsolvable"),
            ("evolve", "no_reverse_form"), ("solve", "surplus_solution")} <= reasons
    # one kept solution per problem: sample 3 repeats sample 0 (a duplicate, not a second one)
    ids = [c["id"].rsplit("/", 1)[0] for c in kept]
    assert len(ids) == len(set(ids))
    assert section["per_strategy"]["seed"] == {"problems": 3, "solved": 3}
    out = open_output(str(tmp_path / "out"), overwrite=False)
    manifest = finish(run, out, section)
    assert manifest["kept"] == len(kept) and (tmp_path / "out" / "_SUCCESS").exists()
    lines = (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()
    assert len(lines) == len(kept) and json.loads(lines[0])["messages"][0]["role"] == "user"


def test_majority_vote_without_ground_truth() -> None:
    run = SynthRun("math", MathStandIn(), progress=False)
    synth_math(run, SEEDS[2:], MathConfig(strategies=("seed",), samples=4, verify="majority"))
    # 4 samples: "9", "10", none, "9" -> no strict majority (2 of 4): nothing kept
    assert run.kept == [] and sum(d["reason"] == "no_majority" for d in run.dropped) == 3


TOOLS = [json.loads(line) for line in (ROOT / "synth" / "data" / "tools.jsonl")
         .read_text().splitlines()]


class ToolStandIn:
    """Queries per tool; calls right for the first query, wrong tool for the second,
    bad arguments for the third; calls a tool for the first no-tool prompt."""

    name = "stand-in-tool"

    def reply(self, r: GenerationRequest) -> str:
        q = r.messages[-1]["content"]
        if r.tag == "tool/queries":
            name = re.search(r"function '(\w+)'", q).group(1)
            return json.dumps([f"{name} request {k}" for k in range(3)])
        if r.tag == "tool/none":
            return '<tool_call>{"name": "set_timer", "arguments": {"minutes": 1}}</tool_call>' if "octopus" in q \
                else "Here is an answer."
        calls = []
        for part in q.split(" Also, "):
            name, k = re.match(r"(\w+) request (\d)", part.strip()).groups()
            tool = next(t for t in TOOLS if t["function"]["name"] == name)
            args = valid_args(tool)
            if k == "1":
                name = "send_message" if name != "send_message" else "set_timer"
            if k == "2":
                args = {"nonsense": True}
            calls.append(f'<tool_call>{json.dumps({"name": name, "arguments": args})}</tool_call>')
        return "".join(calls)

    def generate(self, requests, on_result=None):
        out = [Generation([self.reply(r)], ["stop"]) for r in requests]
        for i, g in enumerate(out):
            if on_result:
                on_result(i, g)
        return out


def valid_args(tool: dict[str, Any]) -> dict[str, Any]:
    params = tool["function"]["parameters"]
    values = {"string": "Paris", "integer": 3, "number": 2.5}
    out = {}
    for key in params.get("required", []):
        spec = params["properties"][key]
        out[key] = spec["enum"][0] if "enum" in spec else ("USD" if "pattern" in spec else values[spec["type"]])
    if "date" in out:
        out["date"] = "2025-01-01"
    return out


def test_tool_pipeline_validates_calls() -> None:
    run = SynthRun("tool", ToolStandIn(), progress=False)
    synth_tool(run, TOOLS, ["Tell me about the octopus.", "What is a haiku?"], ToolConfig(parallel=4))
    singles = [c for c in run.kept if c["meta"]["kind"] == "single"]
    assert len(singles) == len(TOOLS)  # the first query of every tool
    for c in singles:
        call = c["messages"][1]["tool_calls"][0]["function"]
        tool = next(t for t in c["tools"] if t["function"]["name"] == call["name"])
        assert check_call(call, tool) is None and c["messages"][0]["content"].endswith("request 0")
        assert len(c["tools"]) == 4  # the oracle among 3 distractors
    reasons = {(d["stage"], d["reason"]) for d in run.dropped}
    assert {("single", "wrong_tool"), ("single", "invalid_arguments"), ("no_tool", "called_a_tool")} <= reasons
    assert sum(c["meta"]["kind"] == "parallel" for c in run.kept) == 4
    assert [c["messages"][0]["content"] for c in run.kept if c["meta"]["kind"] == "no_tool"] == ["What is a haiku?"]
    # The kept conversations render with the chat template.
    from afm.model.text.chat import render_text

    assert "<tool_call>" in render_text(singles[0]["messages"], tools=singles[0]["tools"])


def test_call_parsing_and_distractors() -> None:
    assert parse_calls("no call here") == []
    assert parse_calls('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>') == [
        {"name": "f", "arguments": {"a": 1}}]
    assert parse_calls("<tool_call>{broken</tool_call>") is None
    assert parse_calls('{"name": "f", "arguments": {}}') == [{"name": "f", "arguments": {}}]
    weather = TOOLS[0]
    assert distractors_for(weather, TOOLS, 1)[0]["function"]["name"] == "get_forecast"
