"""BFCL: afm's AST match gives BFCL's verdicts on hand-written replies (right call, wrong
argument, extra call, no call for an irrelevant request, and each rule on its own), the
stored values being those of BFCL's own checker (re-derived in the slow tier); the data is
found and rendered as afm's tool schemas."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from bfcl_cases import CASES  # noqa: E402

from afm.evaluation.posttrain.bfcl import data  # noqa: E402
from afm.evaluation.posttrain.bfcl.score import decode, verdict  # noqa: E402


def _entry(task: str, eid: str) -> tuple[data.BfclSet, int]:
    s = data.load(task, str(data.SAMPLE_DIR))  # the shipped sample, whatever else is installed
    return s, [e["id"] for e in s.entries].index(eid)


@pytest.mark.parametrize("task,eid,reply,valid,error_type", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_verdicts_equal_bfcl_checker(task: str, eid: str, reply: str, valid: bool, error_type: str) -> None:
    s, i = _entry(task, eid)
    answer = s.answers[i]["ground_truth"] if s.answers else None
    got = verdict(s.category, s.entries[i]["function"], reply, answer)
    assert (got.valid, got.error_type) == (valid, error_type), got.error


def test_the_four_named_cases_are_covered() -> None:
    kinds = {(c[0], c[3], c[4]) for c in CASES}
    assert ("bfcl_simple", True, "") in kinds  # right call
    assert ("bfcl_simple", False, "value_error:others") in kinds  # wrong argument
    assert ("bfcl_simple", False, "simple_function_checker:wrong_count") in kinds  # extra call / no call
    assert ("bfcl_irrelevance", True, "") in kinds  # no call for an irrelevant request


def test_decode_reads_afm_tool_calls_and_bare_json() -> None:
    assert decode('<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>') == [{"f": {"x": 1}}]
    assert decode('{"name": "f", "arguments": "{\\"x\\": 2}"}') == [{"f": {"x": 2}}]
    assert decode("no call at all") == []


def test_sample_loads_every_category_with_answers(tmp_path: Path) -> None:
    for task in data.CATEGORIES:
        s = data.load(task, str(tmp_path))  # an empty --data-dir falls through
        assert s.entries and s.source in ("bfcl-eval package", "afm sample")
        assert (s.answers is None) == s.is_relevance
        if s.answers:
            assert [a["id"] for a in s.answers] == [e["id"] for e in s.entries]


def test_data_dir_wins_and_broken_files_are_user_errors(tmp_path: Path) -> None:
    import shutil

    shutil.copy(data.SAMPLE_DIR / "BFCL_v4_irrelevance.json", tmp_path / "BFCL_v4_irrelevance.json")
    assert data.load("bfcl_irrelevance", str(tmp_path)).source == "data-dir"
    (tmp_path / "BFCL_v4_simple_python.json").write_text('{"id": "x", "question": [], "function": []}\n')
    with pytest.raises(data.BfclDataError, match="no answers beside it"):
        data.load("bfcl_simple", str(tmp_path))
    (tmp_path / "BFCL_v4_multiple.json").write_text("{not json\n")
    with pytest.raises(data.BfclDataError, match="not readable"):
        data.load("bfcl_multiple", str(tmp_path))


def test_function_docs_become_openapi_tool_schemas() -> None:
    s = data.load("bfcl_multiple", str(data.SAMPLE_DIR))
    tools = data.to_tools(s.entries[0]["function"])
    fn = tools[1]["function"]  # circle_properties.get(radius: float, ...)
    assert tools[0]["type"] == "function" and fn["name"] == "circle_properties.get"
    assert fn["parameters"]["type"] == "object"
    radius = fn["parameters"]["properties"]["radius"]
    assert radius["type"] == "number" and radius["format"] == "float"
    assert radius["description"].endswith("This is a float type value.")
    assert fn["description"].endswith(data.PYTHON_HINT)
    assert s.entries[0]["function"][1]["parameters"]["properties"]["radius"]["type"] == "float"  # not mutated
