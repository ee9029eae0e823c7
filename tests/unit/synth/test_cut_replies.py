"""The one rule of ``afm.finish`` in every synthetic-data writer: a reply that stopped for
length is never a finished turn. It is dropped as ``cut_reply`` before any check, and the
manifest counts it (``cut_replies``); the stand-in generators mark chosen replies ``length``
exactly as a server's ``finish_reason`` would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from afm.finish import DROP_REASON, is_cut
from afm.synth.generators import Generation
from afm.synth.run import SynthRun, finish, open_output
from tests.paths import CHAT_TOKENIZER

sys.path.insert(0, str(Path(__file__).parent))


class CutSome:
    """Wraps a stand-in generator: each reply ``cut(request, index, text)`` picks comes
    back with ``finish_reason`` ``length`` (its text as it was)."""

    def __init__(self, inner, cut):
        self.inner, self.cut, self.name = inner, cut, inner.name

    def generate(self, requests, on_result=None):
        out = []
        for r, g in zip(requests, self.inner.generate(requests)):
            finish = ["length" if self.cut(r, i, t) else f for i, (t, f) in enumerate(zip(g.texts, g.finish))]
            out.append(Generation(g.texts, finish))
        for i, g in enumerate(out):
            if on_result:
                on_result(i, g)
        return out


def test_the_rule_reads_every_api_spelling() -> None:
    assert is_cut("length") and is_cut("max_tokens") and is_cut("LENGTH ")
    assert not any(is_cut(x) for x in ("stop", "end_turn", "tool_calls", "end_of_turn", "end_of_text", None, 3))


def test_synth_math_never_keeps_a_cut_solution(tmp_path: Path) -> None:
    pytest.importorskip("lm_eval", reason="answer rules come from lm-eval (the eval extra)")
    from test_math_tool import SEEDS, MathStandIn

    from afm.synth.math_data import MathConfig, synth_math

    # every right solution (samples 0 and 3) and every rephrased problem comes back cut
    def cut(r, i, text):
        return (r.tag == "math/solve" and i in (0, 3)) or r.tag == "math/rephrase"

    run = SynthRun("math", CutSome(MathStandIn(), cut), progress=False)
    section = synth_math(run, SEEDS, MathConfig(samples=4, keep_per_problem=2))
    assert not any("Working it out" in c["messages"][1]["content"] for c in run.kept)
    assert not any(c["meta"]["strategy"] == "rephrase" for c in run.kept)
    cut_drops = [d for d in run.dropped if d["reason"] == DROP_REASON]
    assert {d["stage"] for d in cut_drops} == {"solve", "evolve"}
    manifest = finish(run, open_output(str(tmp_path / "out"), overwrite=False), section)
    assert manifest["cut_replies"] == len(cut_drops) > 0
    assert manifest["dropped_by_reason"]["solve/cut_reply"] + manifest["dropped_by_reason"]["evolve/cut_reply"] == \
        len(cut_drops)


def test_synth_tool_never_keeps_a_cut_reply(tmp_path: Path) -> None:
    pytest.importorskip("lm_eval", reason="answer rules come from lm-eval (the eval extra)")
    from test_math_tool import TOOLS, ToolStandIn

    from afm.synth.tool_data import ToolConfig, synth_tool

    # a cut call that parses (the stand-in writes whole calls) and a cut plain reply
    def cut(r, i, text):
        return (r.tag == "tool/call" and r.messages[-1]["content"].endswith("request 0")) or \
            (r.tag == "tool/none" and "haiku" in r.messages[-1]["content"])

    run = SynthRun("tool", CutSome(ToolStandIn(), cut), progress=False)
    section = synth_tool(run, TOOLS, ["Tell me about the octopus.", "What is a haiku?"], ToolConfig(parallel=4))
    assert not any(c["meta"]["kind"] == "single" for c in run.kept)  # request 0 was the only right one
    assert not any(c["meta"]["kind"] == "no_tool" for c in run.kept)
    manifest = finish(run, open_output(str(tmp_path / "out"), overwrite=False), section)
    assert manifest["cut_replies"] == len(TOOLS) + 1
    assert manifest["counts"]["single"]["dropped:cut_reply"] == len(TOOLS)


def test_synth_code_never_runs_or_keeps_a_cut_solution() -> None:
    from test_code_pipeline import CodeStandIn

    from afm.synth.code_data import CodeConfig, synth_code

    run = SynthRun("code", CutSome(CodeStandIn(0, Path("/nonexistent")), lambda r, i, t: r.tag == "code/solutions"),
                   progress=False)
    synth_code(run, ["arithmetic"], CodeConfig(problems_per_topic=3, tests_per_problem=5, min_tests=3,
                                               solutions_per_problem=4, timeout_s=2.0, workers=1))
    assert run.kept == []
    assert sum(d["reason"] == DROP_REASON for d in run.dropped) == 8  # 2 testable problems x 4 candidates
    assert not any(d["stage"] == "execute" for d in run.dropped)  # nothing cut was run


def test_sft_prepare_rejects_a_row_whose_reply_was_cut(tmp_path: Path) -> None:
    from afm.synth.prepare import PrepareConfig, prepare_sft

    tok = str(CHAT_TOKENIZER)
    rows = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello there."}]},
        {"messages": [{"role": "user", "content": "count"}, {"role": "assistant", "content": "1, 2, 3, 4, 5, 6,"}],
         "finish_reason": "length"},  # a row-level stop reason (one generated reply per row)
        {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "finish_reason": "stop"},
                      {"role": "user", "content": "c"},
                      {"role": "assistant", "content": "d d d", "stop_reason": "max_tokens"}]},
        {"prompt": "why?", "completion": "Because the", "finish_reason": "length"},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = prepare_sft([str(tmp_path / "in.jsonl")], str(tmp_path / "out"),
                           PrepareConfig("cuts", tok, pii=False), progress=False)
    assert manifest["totals"] == {"in": 4, "kept": 1, "rejected": 3}
    assert manifest["stages"]["format"]["reasons"] == {DROP_REASON: 3}
    assert manifest["cut_replies"] == 3


def test_sft_prepare_reads_sharegpt_and_preference_rows_with_the_finish_rule(tmp_path: Path) -> None:
    """Every layout applies the rule: a ShareGPT ``gpt`` turn cut for length, a preference
    row whose chosen (or rejected) reply was cut, and a message-list reply with a cut
    message are rejected as ``cut_reply`` (as the preference reader rejects the pair); a
    preference row is read by the preference layout's one reader (its reasons, its
    implicit prompt); finished rows of both layouts are kept."""
    from afm.synth.prepare import PrepareConfig, prepare_sft
    from afm.training.data.preferences import parse_record

    tok = str(CHAT_TOKENIZER)
    turns = [{"from": "human", "value": "count"}, {"from": "gpt", "value": "1, 2, 3,", "finish_reason": "length"}]
    rows = [
        {"conversations": turns},  # cut
        {"conversations": [turns[0], {"from": "gpt", "value": "1, 2, 3.", "finish_reason": "stop"}]},  # kept
        {"prompt": "why?", "chosen": "Because.", "rejected": "No", "level": "better",
         "chosen_finish_reason": "length"},  # cut chosen
        {"prompt": "how?", "chosen": "Like so.", "rejected": "Hm, well", "level": "better",
         "rejected_finish_reason": "length"},  # cut rejected: the pair's reader rejects the record
        {"prompt": "what?", "chosen": [{"role": "assistant", "content": "It is", "finish_reason": "length"}],
         "rejected": [{"role": "assistant", "content": "No."}], "level": "better"},  # cut message
        {"prompt": "who?", "chosen": "Me.", "rejected": "You.", "level": "better"},  # kept
        {"chosen": [{"role": "user", "content": "where?"}, {"role": "assistant", "content": "Here."}],
         "rejected": [{"role": "user", "content": "where?"}, {"role": "assistant", "content": "There."}]},  # kept
        {"prompt": "when?", "chosen": [{"role": "user", "content": "x"}], "rejected": "Now."},  # not a reply
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = prepare_sft([str(tmp_path / "in.jsonl")], str(tmp_path / "out"),
                           PrepareConfig("cuts", tok, pii=False), progress=False)
    assert manifest["totals"] == {"in": 8, "kept": 3, "rejected": 5}
    assert manifest["stages"]["format"]["reasons"] == {DROP_REASON: 4, "reply_not_from_assistant": 1}
    assert manifest["cut_replies"] == 4
    for i in (2, 3, 4):  # the preference reader gives the same verdict on the same rows
        with pytest.raises(ValueError, match=f"^{DROP_REASON}"):
            parse_record(rows[i], "x")
    import pyarrow.parquet as pq

    kept = [json.loads(m) for f in sorted((tmp_path / "out").glob("tokens-*.parquet"))
            for m in pq.read_table(f).column("messages").to_pylist()]
    replies = sorted(m["messages"][-1]["content"] for m in kept)
    assert replies == ["1, 2, 3.", "Here.", "Me."]
