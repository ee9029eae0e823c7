"""The benchmark registry: adapters, formats, configs, n per benchmark, short examples.

Rows below are made up in the shape of each public format (no benchmark data is shipped)."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from afm.config import ConfigError
from afm.filters.benchmarks import (
    ADAPTERS,
    BenchmarkSpec,
    build_index,
    choose_n,
    demo_benchmark_specs,
    load_benchmark,
    shared_benchmark_specs,
    specs_from,
)
from afm.filters.ngram_index import NgramIndex

ROWS = {
    "gsm8k": ({"question": "How many apples are left?", "answer": "3 apples.\n#### 3"},
              ["How many apples are left?", "3 apples.\n#### 3"], None),
    "humaneval": ({"task_id": "HumanEval/7", "prompt": "def f(x):\n", "canonical_solution": "  return x\n",
                   "test": "assert f(1) == 1", "entry_point": "f"},
                  ["def f(x):\n", "  return x\n"], "HumanEval/7"),
    "mmlu": ({"question": "What is 2+2?", "subject": "math", "choices": ["3", "4", "5", "6"], "answer": 1},
             ["What is 2+2?", "3", "4", "5", "6"], None),
    "arc": ({"id": "Mercury_1", "question": {"stem": "Which is a planet?", "choices": [
        {"text": "Mars", "label": "A"}, {"text": "Moon", "label": "B"}]}, "answerKey": "A"},
            ["Which is a planet?", "Mars", "Moon"], "Mercury_1"),
    "hellaswag": ({"ind": 12, "ctx": "A man opens a door.", "endings": ["He walks in.", "He flies."],
                   "label": 0}, ["A man opens a door.", "He walks in.", "He flies."], "12"),
    "piqa": ({"id": "p1", "goal": "Open a jar", "sol1": "Twist the lid", "sol2": "Shout at it"},
             ["Open a jar", "Twist the lid", "Shout at it"], "p1"),
    "winogrande": ({"qID": "w1", "sentence": "The cup fell because _ was slippery.",
                    "option1": "the cup", "option2": "the table", "answer": "1"},
                   ["The cup fell because _ was slippery.", "the cup", "the table"], "w1"),
    "triviaqa": ({"question_id": "tq1", "question": "Capital of France?",
                  "answer": {"value": "Paris", "aliases": ["Paris"]}},
                 ["Capital of France?", "Paris"], "tq1"),
    "math": ({"problem": "Solve $x+1=2$.", "solution": "$x=1$", "level": "Level 1", "type": "Algebra"},
             ["Solve $x+1=2$.", "$x=1$"], None),
    "ifeval": ({"key": 1000, "prompt": "Write a haiku about rain.", "instruction_id_list": []},
               ["Write a haiku about rain."], "1000"),
}


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return path


@pytest.mark.parametrize("adapter", sorted(ROWS))
def test_adapters_read_their_format(tmp_path: Path, adapter: str) -> None:
    row, texts, ex_id = ROWS[adapter]
    path = _write_jsonl(tmp_path / f"{adapter}-test.jsonl", [row, row])
    bench = load_benchmark(BenchmarkSpec(name=adapter, path=str(path), adapter=adapter))
    assert [t for e, t in bench.segments if e == 0] == texts
    assert bench.example_ids[0] == (ex_id if ex_id is not None else "0")
    # and the adapter is found from the file name alone
    assert load_benchmark(BenchmarkSpec(name=path.stem, path=str(path))).adapter == adapter


def test_alternative_layouts(tmp_path: Path) -> None:
    arc_hf = {"id": "x", "question": "Which is a gas?", "choices": {"text": ["Air", "Rock"], "label": ["A", "B"]}}
    bench = load_benchmark(BenchmarkSpec("arc", str(_write_jsonl(tmp_path / "a.jsonl", [arc_hf])), adapter="arc"))
    assert [t for _, t in bench.segments] == ["Which is a gas?", "Air", "Rock"]
    tqa = {"Data": [{"QuestionId": "q9", "Question": "Who wrote it?", "Answer": {"Value": "Nobody"}}]}
    (tmp_path / "triviaqa-dev.json").write_text(json.dumps(tqa))
    bench = load_benchmark(BenchmarkSpec("tqa", str(tmp_path / "triviaqa-dev.json")))
    assert bench.adapter == "triviaqa" and bench.example_ids == ["q9"]
    assert [t for _, t in bench.segments] == ["Who wrote it?", "Nobody"]


def test_mmlu_csv_without_header_and_parquet(tmp_path: Path) -> None:
    with open(tmp_path / "mmlu_astronomy_test.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["What orbits Earth?", "Moon", "Sun", "Mars", "Venus", "A"]])
    bench = load_benchmark(BenchmarkSpec("mmlu_astronomy_test", str(tmp_path / "mmlu_astronomy_test.csv")))
    assert bench.adapter == "mmlu-csv"
    assert [t for _, t in bench.segments] == ["What orbits Earth?", "Moon", "Sun", "Mars", "Venus"]
    pq.write_table(pa.Table.from_pylist([ROWS["piqa"][0]]), tmp_path / "piqa.parquet")
    bench = load_benchmark(BenchmarkSpec("piqa", str(tmp_path / "piqa.parquet")))
    assert bench.adapter == "piqa" and bench.example_ids == ["p1"]


def test_yaml_config_fields_and_n_override(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "mine.jsonl", [{"uid": "u1", "prompt": "one two three four five six seven",
                                             "ref": "eight nine ten eleven twelve"}])
    (tmp_path / "benchmarks.yaml").write_text(
        "benchmarks:\n  - name: mine\n    path: mine.jsonl\n    fields: [prompt, ref]\n"
        "    id_field: uid\n    n: 5\n"
    )
    specs = specs_from(tmp_path)  # a directory with a benchmarks.yaml uses it
    assert specs[0].path == str(tmp_path / "mine.jsonl")
    stats = build_index(specs, tmp_path / "idx")
    (rec,) = stats["per_benchmark"]
    assert rec["n"] == 5 and rec["ngrams"] == 3 + 1
    (hit,) = NgramIndex(tmp_path / "idx").scan(["so: eight nine ten eleven twelve!"])[0]
    assert hit.example_id == "u1" and hit.n == 5
    (tmp_path / "bad.yaml").write_text("benchmarks:\n  - name: x\n    pth: a.jsonl\n")
    with pytest.raises(ConfigError, match="pth"):
        specs_from(tmp_path / "bad.yaml")


def test_unknown_layout_and_network_are_clear_errors(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "weird.jsonl", [{"foo": 1, "bar": [2]}])
    with pytest.raises(ValueError, match="benchmarks.yaml"):
        load_benchmark(BenchmarkSpec("weird", str(path)))
    with pytest.raises(RuntimeError, match="allow_hf"):
        load_benchmark(BenchmarkSpec("mmlu", hf_dataset="cais/mmlu", hf_config="all", adapter="mmlu"))
    with pytest.raises(FileNotFoundError):
        load_benchmark(BenchmarkSpec("gone", str(tmp_path / "gone.jsonl")))


def test_choose_n() -> None:
    assert choose_n([2, 3, 3, 3, 50] * 20) == 4  # clamped up
    assert choose_n([40] * 100) == 13  # clamped down
    assert choose_n(list(range(1, 101))) == 5  # 5th percentile of 1..100
    assert choose_n([40] * 10, override=8) == 8
    with pytest.raises(ValueError):
        choose_n([40], override=20)


def test_short_examples(tmp_path: Path) -> None:
    """Examples shorter than n are indexed whole (>= 4 tokens); shorter ones are skipped,
    and a short field next to a long one is not indexed on its own."""
    rows = [{"question": "a b c d e f g h i j k l m n o p", "answer": "return the answer now"}] * 1 + [
        {"question": "Name the largest ocean", "answer": "Pacific"},  # 4 tokens: whole
        {"question": "Two words", "answer": "x"},  # too short
    ] + [{"question": " ".join(f"w{i}_{j}" for j in range(20)), "answer": "zz"} for i in range(30)]
    path = _write_jsonl(tmp_path / "short.jsonl", rows)
    stats = build_index([BenchmarkSpec("short", str(path), adapter="gsm8k")], tmp_path / "idx")
    rec = stats["per_benchmark"][0]
    assert rec["n"] == 13
    assert rec["examples_indexed"] == rec["examples"] - 1
    idx = NgramIndex(tmp_path / "idx")
    hits = idx.scan(["Quiz: NAME the largest ocean?", "two words", "then return the answer now"])
    assert [h.ngram for h in hits[0]] == ["name the largest ocean"] and hits[0][0].example_id == "1"
    assert hits[1] == [] and hits[2] == []


def test_registry_covers_the_common_formats() -> None:
    for name in ("gsm8k", "humaneval", "mmlu", "arc", "hellaswag", "piqa", "winogrande",
                 "triviaqa", "math", "ifeval"):
        assert name in ADAPTERS


def test_demo_set_is_ours_and_indexes() -> None:
    (spec,) = demo_benchmark_specs()
    bench = load_benchmark(spec)
    assert spec.name == "demo-math" and len(bench.example_ids) == 20 and bench.adapter == "gsm8k"


def test_shared_benchmarks_index(shared_eval: Path, tmp_path: Path) -> None:
    stats = build_index(shared_benchmark_specs(shared_eval), tmp_path / "idx")
    by_name = {b["name"]: b for b in stats["per_benchmark"]}
    assert by_name["gsm8k"]["examples"] == 1319 and by_name["humaneval"]["examples"] == 164
    assert by_name["gsm8k"]["examples_indexed"] == 1319
    assert by_name["humaneval"]["examples_indexed"] == 164
    assert 14 <= stats["mb_per_million_ngrams"] <= 18  # 14 bytes per n-gram + prefix filter
