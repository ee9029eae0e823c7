"""afm's BFCL AST match against BFCL's own checker (``bfcl-eval``, installed with
``--no-deps``: ``make test-all`` does it), on the same outputs:

* the hand-written cases of ``tests/unit/evaluation/posttrain/bfcl_cases.py``, whose stored
  verdicts the fast tier checks afm against;
* every entry of the package's Python categories, with replies built from its answer (the
  right call) and perturbed (a parameter dropped, a value changed, a wrong type, an unknown
  parameter, a call too many, no call).

BFCL's checker imports its model table only to ask whether a model's function names had
their dots replaced; that table imports every provider SDK, so the test gives the checker
a one-entry table for afm (names kept as they are) and imports the rest unchanged.
"""

from __future__ import annotations

import copy
import json
import sys
import types
from typing import Any

import pytest

from tests.paths import TESTS

pytestmark = pytest.mark.slow
pytest.importorskip("bfcl_eval")

sys.path.insert(0, str(TESTS / "unit" / "evaluation" / "posttrain"))
_stub = types.ModuleType("bfcl_eval.constants.model_config")
_stub.MODEL_CONFIG_MAPPING = {"afm": types.SimpleNamespace(underscore_to_dot=False)}  # type: ignore[attr-defined]
sys.modules.setdefault("bfcl_eval.constants.model_config", _stub)

from bfcl_cases import CASES  # noqa: E402
from bfcl_eval.constants.enums import Language  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402
from bfcl_eval.utils import is_empty_output, is_function_calling_format_output  # noqa: E402

from afm.evaluation.posttrain.bfcl import data  # noqa: E402
from afm.evaluation.posttrain.bfcl.score import DecodeError, decode, verdict  # noqa: E402


def bfcl_verdict(category: str, functions: list[dict], reply: str, answer: list | None) -> tuple[bool, str]:
    """BFCL's evaluation runner on a reply decoded by afm's parser (the handler's job)."""
    try:
        decoded: Any = decode(reply)
        decoded_ok = True
    except DecodeError:
        decoded_ok = False
    if "relevance" in category:
        has_call = decoded_ok and not is_empty_output(decoded)
        if "irrelevance" in category:
            return (not has_call, "irrelevance_error:decoder_success" if has_call else "")
        return (has_call, "" if has_call else "relevance_error:decoder_failed")
    if not decoded_ok:
        return (False, "ast_decoder:decoder_failed")
    if not is_function_calling_format_output(decoded):
        return (False, "ast_decoder:decoder_wrong_output_format")
    r = ast_checker(functions, decoded, answer, Language.PYTHON, category, "afm")
    return (r["valid"], "" if r["valid"] else r["error_type"])


def test_stored_cases_are_bfcls_verdicts() -> None:
    for task, eid, reply, valid, error_type in CASES:
        s = data.load(task, str(data.SAMPLE_DIR))
        i = [e["id"] for e in s.entries].index(eid)
        answer = s.answers[i]["ground_truth"] if s.answers else None
        assert bfcl_verdict(s.category, s.entries[i]["function"], reply, answer) == (valid, error_type), (eid, reply)


def _first(values: Any) -> Any:
    if not isinstance(values, list):
        return _plain(values)
    for v in values:
        if v != "":
            return _plain(v)
    return None


def _plain(v: Any) -> Any:
    """An answer value ({key: [allowed]} dicts inside) as a concrete value."""
    if isinstance(v, dict):
        return {k: _first(a) for k, a in v.items() if _first(a) is not None}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _calls(answer: list[dict]) -> list[dict]:
    out = []
    for item in answer:
        name, params = next(iter(item.items()))
        args = {p: _first(vals) for p, vals in params.items() if _first(vals) is not None}
        out.append({"name": name, "arguments": args})
    return out


def _reply(calls: list[dict]) -> str:
    return "".join("<tool_call>" + json.dumps(c) + "</tool_call>" for c in calls)


def _variants(calls: list[dict]) -> list[str]:
    out = [_reply(calls), "I will not call anything.", _reply(calls + calls[:1])]
    first = calls[0]["arguments"]
    for key in list(first)[:3]:
        dropped = copy.deepcopy(calls)
        del dropped[0]["arguments"][key]
        out.append(_reply(dropped))
        for new in ("zzz", 12345, 1.5, True, [1, 2], {"k": "v"}):
            changed = copy.deepcopy(calls)
            changed[0]["arguments"][key] = new
            out.append(_reply(changed))
    extra = copy.deepcopy(calls)
    extra[0]["arguments"]["not_a_parameter"] = 1
    out.append(_reply(extra))
    out.append(_reply(list(reversed(calls))))
    return out


@pytest.mark.parametrize("task", [t for t in data.CATEGORIES])
def test_every_package_entry_and_perturbation_agrees(task: str) -> None:
    pkg = data.package_data_dir()
    assert pkg is not None
    s = data.load(task, str(pkg))
    assert s.source == "data-dir"
    compared = 0
    for i, entry in enumerate(s.entries):
        answer = s.answers[i]["ground_truth"] if s.answers else None
        replies = _variants(_calls(answer)) if answer else [
            "No tool fits.", _reply([{"name": (entry["function"] or [{"name": "f"}])[0]["name"], "arguments": {}}]), "<tool_call>{x}</tool_call>"]
        for reply in replies:
            got = verdict(s.category, entry["function"], reply, answer)
            want = bfcl_verdict(s.category, entry["function"], reply, answer)
            assert (got.valid, got.error_type) == want, (entry["id"], reply, got.error)
            compared += 1
    assert compared >= len(s.entries)
