"""Preprocessed benchmark layouts convert back to the upstream layout lm-eval's tasks read."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from afm.evaluation import local_data as ld


def test_arc_from_llm_foundry_layout() -> None:
    doc = ld.arc({"query": "Question: Why is the sky blue?", "choices": ["dust", "scattering"], "gold": 1})
    assert doc == {"question": "Why is the sky blue?",
                   "choices": {"text": ["dust", "scattering"], "label": ["A", "B"]}, "answerKey": "B"}
    assert ld.arc(doc) is doc  # already upstream layout


def test_boolq_from_llm_foundry_layout() -> None:
    doc = ld.boolq({"query": "Passage: Tea is a drink.\nMore text.\nQuestion: is tea a drink?",
                    "choices": ["no", "yes"], "gold": 1})
    assert doc == {"passage": "Tea is a drink.\nMore text.", "question": "is tea a drink", "label": 1}


def test_winogrande_rebuilds_the_same_lm_eval_requests() -> None:
    rec = {"context_options": ["Sarah was a better surgeon than Maria so Sarah",
                               "Sarah was a better surgeon than Maria so Maria"],
           "continuation": "always got the easier cases.", "gold": 1}
    doc = ld.winogrande(rec)
    idx = doc["sentence"].index("_")
    contexts = [doc["sentence"][:idx] + o for o in (doc["option1"], doc["option2"])]
    assert contexts == rec["context_options"]  # lm-eval's doc_to_choice
    assert doc["sentence"][idx + 1:].strip() == rec["continuation"]  # its doc_to_target
    assert doc["answer"] == "2"
    # options sharing their first characters still rebuild the contexts exactly
    shared = ld.winogrande({"context_options": ["I gave the bag", "I gave the box"],
                            "continuation": "away.", "gold": 0})
    i = shared["sentence"].index("_")
    assert [shared["sentence"][:i] + shared["option1"], shared["sentence"][:i] + shared["option2"]] == \
        ["I gave the bag", "I gave the box"]


def test_triviaqa_and_openbookqa() -> None:
    doc = ld.triviaqa({"context": "Question: Which planet is red?\nAnswer:", "answer": "Mars",
                       "aliases": ["Mars", "Red planet"]})
    assert doc["question"] == "Which planet is red" and doc["answer"]["aliases"] == ["Mars", "Red planet"]
    obqa = ld.openbookqa({"ID": "1", "Question Stem": "Sun is a", "Choices": "(A) star (B) planet",
                          "Answer Key": "A"})
    assert obqa["choices"] == {"text": ["star", "planet"], "label": ["A", "B"]} and obqa["answerKey"] == "A"


def test_unknown_layout_and_bad_files_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(ld.LocalDataError, match="missing"):
        ld.arc({"prompt": "x"})
    (tmp_path / "arc_easy-test.jsonl").write_text('{"prompt": "x"}\n')
    with pytest.raises(ld.LocalDataError, match="record 1"):
        ld.load_split(tmp_path, ["arc_easy-test"], "arc")
    (tmp_path / "piqa.jsonl").write_text("{not json\n")
    with pytest.raises(ld.LocalDataError, match="cannot read"):
        ld.load_split(tmp_path, ["piqa"], "identity")
    assert ld.load_split(tmp_path, ["absent"], "identity") is None


SHARED_LAYOUTS = [
    ("arc_easy-test", "arc", lambda d: d["answerKey"] in d["choices"]["label"]),
    ("arc_challenge-test", "arc", lambda d: d["answerKey"] in d["choices"]["label"]),
    ("boolq-validation", "boolq", lambda d: d["label"] in (0, 1) and not d["question"].endswith("?")),
    ("winogrande-dev", "winogrande", lambda d: d["sentence"].count("_") >= 1 and d["answer"] in ("1", "2")),
    ("triviaqa-sm_sub-first2000", "triviaqa", lambda d: d["answer"]["value"] in d["answer"]["aliases"]),
    ("openbookqa-test", "openbookqa", lambda d: d["answerKey"] in d["choices"]["label"] and len(d["choices"]["text"]) == 4),
    ("piqa-validation", "identity", lambda d: d["label"] in (0, 1)),
    ("lambada_openai-test", "identity", lambda d: " " in d["text"]),
]


@pytest.mark.parametrize(("stem", "converter", "check"), SHARED_LAYOUTS)
def test_every_shared_file_converts(shared_eval: Path, stem: str, converter: str, check) -> None:
    docs = ld.load_split(shared_eval / "benchmarks", [stem], converter)
    assert docs and all(check(d) for d in docs)


def test_shared_counts_match_sources_md(shared_eval: Path) -> None:
    def n(stem: str) -> int:
        with gzip.open(shared_eval / "benchmarks" / f"{stem}.jsonl.gz", "rt") as fh:
            return sum(1 for line in fh if line.strip())

    assert (n("arc_easy-test"), n("winogrande-dev"), n("boolq-validation")) == (2376, 1267, 3270)
    first = json.loads(gzip.open(shared_eval / "benchmarks" / "winogrande-dev.jsonl.gz", "rt").readline())
    assert ld.winogrande(first)["answer"] == "2"
