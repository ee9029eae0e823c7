"""``afm sft prepare``: every record accounted for, each planted problem caught by the
right stage, PII redacted, benchmark overlap removed (with the common-usage rule),
conversation layouts recognised, the output policy obeyed."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from afm.outputs import OutputError
from afm.synth.demo_data import planted_problems, write_jsonl
from afm.synth.formats import FormatError, to_conversation
from afm.synth.prepare import PrepareConfig, PrepareError, prepare_sft
from tests.paths import CHAT_TOKENIZER

TOK = str(CHAT_TOKENIZER)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    from afm.filters.benchmarks import build_index

    out = tmp_path_factory.mktemp("idx")
    build_index(str(resources.files("afm.filters").joinpath("data/benchmarks")), out)
    return str(out)


def good(i: int) -> dict:
    return {"id": f"g{i}", "messages": [{"role": "user", "content": f"Question number {i}?"},
                                         {"role": "assistant", "content": f"Answer {i}."}]}


def rows(path: Path, prefix: str) -> list[dict]:
    out = []
    for f in sorted(path.glob(f"{prefix}-*.parquet")):
        out += pq.read_table(f).to_pylist()
    return out


def test_every_planted_problem_is_caught_by_its_stage(tmp_path: Path, index: str) -> None:
    src = write_jsonl([good(i) for i in range(5)] + planted_problems(), tmp_path / "in.jsonl")
    m = prepare_sft([str(src)], str(tmp_path / "out"), PrepareConfig("chat", TOK, index, threshold=2),
                    progress=False)
    assert m["totals"] == {"in": 12, "kept": 7, "rejected": 5}
    rejected = {(r["rejected_by"], r["reason"]) for r in rows(tmp_path / "out", "rejects")}
    assert rejected == {("read", "bad_json"), ("format", "no_assistant_turn"), ("pii", "mostly_pii"),
                        ("dedup", "duplicate"), ("decontaminate", "benchmark_overlap")}
    kept = {r["id"]: r for r in rows(tmp_path / "out", "tokens")}
    assert "planted-benchmark" not in kept and "planted-duplicate" in kept
    pii = json.loads(kept["planted-pii"]["messages"])
    assert "jane.doe@gmail.com" not in json.dumps(pii) and "<EMAIL>" in pii["messages"][0]["content"]
    assert m["pii_redactions"] == {"email": 2}
    assert m["decontamination"]["removed_per_benchmark"] == {"demo-math": 1}
    row = kept["g1"]
    assert len(row["tokens"]) == len(row["loss_mask"]) and 0 < sum(row["loss_mask"]) < len(row["tokens"])
    assert row["source"] == "chat"
    assert (tmp_path / "out" / "_SUCCESS").exists()


def test_common_usage_ngrams_are_kept(tmp_path: Path, index: str) -> None:
    """A benchmark n-gram found in at least ``threshold`` conversations is common usage."""
    quote = planted_problems()[4]["messages"][0]["content"]
    convs = [{"id": f"q{i}", "messages": [{"role": "user", "content": f"{quote} ({i})"},
                                            {"role": "assistant", "content": str(i)}]} for i in range(3)]
    src = write_jsonl(convs, tmp_path / "in.jsonl")
    low = prepare_sft([str(src)], str(tmp_path / "a"), PrepareConfig("c", TOK, index, threshold=3), progress=False)
    assert low["totals"]["kept"] == 3
    # below the threshold every conversation is contaminated: kept 0, which is an error (issue 27), not a dataset
    with pytest.raises(PrepareError, match="3 of 3 records rejected"):
        prepare_sft([str(src)], str(tmp_path / "b"), PrepareConfig("c", TOK, index, threshold=4), progress=False)
    assert not (tmp_path / "b" / "_SUCCESS").exists()


def test_too_long_and_switches(tmp_path: Path) -> None:
    src = write_jsonl([good(1), {"messages": [{"role": "user", "content": "x " * 300},
                                               {"role": "assistant", "content": "y"}]}], tmp_path / "in.jsonl")
    m = prepare_sft([str(src)], str(tmp_path / "o"), PrepareConfig("c", TOK, None, pii=False, max_tokens=64),
                    progress=False)
    assert m["stages"]["tokenize"]["reasons"] == {"too_long": 1}
    assert m["decontamination"] == "off" and m["pii"] is False
    with pytest.raises(OutputError, match="finished run"):
        prepare_sft([str(src)], str(tmp_path / "o"), PrepareConfig("c", TOK), progress=False)
    with pytest.raises(PrepareError, match="dataset name"):
        prepare_sft([str(src)], str(tmp_path / "p"), PrepareConfig("bad name", TOK), progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(PrepareError, match="no .jsonl"):
        prepare_sft([str(tmp_path / "empty")], str(tmp_path / "q"), PrepareConfig("c", TOK), progress=False)
    assert not (tmp_path / "q").exists()


@pytest.mark.parametrize("record, roles", [
    ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}, ["user", "assistant"]),
    ({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "a"},
                        {"from": "gpt", "value": "b"}]}, ["system", "user", "assistant"]),
    ({"instruction": "do", "input": "this", "output": "done"}, ["user", "assistant"]),
    ({"prompt": "p", "completion": "c"}, ["user", "assistant"]),
    ({"messages": json.dumps([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])},
     ["user", "assistant"]),
])
def test_layouts(record: dict, roles: list[str]) -> None:
    conv = to_conversation(record)
    assert [m["role"] for m in conv.messages] == roles and len(conv.id) == 24
    assert to_conversation(record).id == conv.id


@pytest.mark.parametrize("record, match", [
    ({"text": "plain document"}, "unknown record layout"),
    ({"conversations": [{"from": "robot", "value": "x"}]}, "unknown speaker"),
    ({"prompt": "p"}, "needs completion"),
    ({"messages": [{"role": "user", "content": 5}]}, "content must be a string"),
    ({"messages": "[not json"}, "not valid JSON"),
    ([1, 2], "must be an object"),
])
def test_bad_layouts(record, match: str) -> None:
    with pytest.raises(FormatError, match=match):
        to_conversation(record)
