"""BFCL's AST match for Python function calls, re-implemented beside afm's pins.

The Berkeley Function Calling Leaderboard scores a call by comparing its decoded form
``[{name: {param: value}}]`` with a list of acceptable values per parameter
(``possible_answer``); its checker lives in ``bfcl_eval.eval_checker.ast_eval`` but cannot
be imported next to afm's dependencies (it pulls every provider SDK through its model
table, and the package pins numpy 1.26). This module applies the same rules, in the same
order, with the same error types, so a verdict here is BFCL's verdict; the slow tier runs
the package's own checker on the same outputs and compares (``tests/slow/evaluation``).

Rules (BFCL ``ast_checker.py``, Apache-2.0):

* simple / live_simple: exactly one call, checked against the one function;
* multiple: exactly one call, checked against the function the answer names;
* parallel, parallel_multiple: as many calls as answers, matched in any order (each
  answer takes the first unmatched call that passes);
* per call: the name must match; every required parameter present; no parameter the
  function or the answer does not know; each value of the declared type (an ``int`` for a
  ``float`` is accepted; a value of the answer's type is accepted as a "variable"); strings
  compared case-insensitively without spaces and ``,./-_*^``; lists, dicts and lists of
  dicts element-wise the same way; anything else by equality; a parameter the answer lists
  without ``""`` (optional marker) must be present.

Only Python-typed categories are handled; BFCL's Java and JavaScript categories need its
type converters and are not offered (see docs/evaluation.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

PYTHON_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list,
    "tuple": list, "dict": dict, "any": str,
}
NESTED = ("array", "tuple")  # types whose items are checked one level deep


@dataclass(frozen=True)
class Verdict:
    """BFCL's ``{"valid", "error", "error_type"}`` for one test entry."""

    valid: bool
    error_type: str = ""
    error: list[Any] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "error_type": self.error_type, "error": self.error}


OK = Verdict(True)


def _bad(error_type: str, message: Any) -> Verdict:
    return Verdict(False, error_type, [message])


def check(functions: list[dict[str, Any]], calls: list[dict[str, Any]], answer: list[dict[str, Any]],
          category: str) -> Verdict:
    """BFCL's ``ast_checker`` for Python: ``calls`` decoded as ``[{name: {param: value}}]``."""
    if "parallel" in category:
        return _parallel_no_order(functions, calls, answer)
    if "multiple" in category:
        if len(calls) != len(answer):
            return _bad("multiple_function_checker:wrong_count", "Wrong number of functions.")
        expected = next(iter(answer[0]))
        return check_one(_find(functions, expected), calls[0], answer[0])
    if len(calls) != 1:
        return _bad("simple_function_checker:wrong_count", "Wrong number of functions.")
    return check_one(functions[0], calls[0], answer[0])


def _find(functions: list[dict[str, Any]] | dict[str, Any], name: str) -> dict[str, Any] | None:
    if isinstance(functions, dict):
        return functions
    return next((f for f in functions if f["name"] == name), None)


def _parallel_no_order(functions: list[dict[str, Any]], calls: list[dict[str, Any]],
                       answer: list[dict[str, Any]]) -> Verdict:
    if len(calls) != len(answer):
        return _bad("parallel_function_checker_no_order:wrong_count", "Wrong number of functions.")
    matched: list[int] = []
    for i, expected in enumerate(answer):
        doc = _find(functions, next(iter(expected)))
        errors: list[Any] = []
        result = OK
        for j, call in enumerate(calls):
            if j in matched:
                continue
            result = check_one(doc, call, expected)
            if result.valid:
                matched.append(j)
                break
            errors.append({f"Model Result Index {j}": {"sub_error": result.error,
                                                       "sub_error_type": result.error_type}})
        if not result.valid:
            left = [j for j in range(len(calls)) if j not in matched]
            return Verdict(False, "parallel_function_checker_no_order:cannot_find_match",
                           [f"Could not find a matching function among index {left} of model output "
                            f"for index {i} of possible answers.", *errors])
    return OK


def check_one(doc: dict[str, Any] | None, call: dict[str, Any], answer: dict[str, Any]) -> Verdict:
    """BFCL's ``simple_function_checker`` (Python): one call against one function."""
    if doc is None:  # BFCL would fail looking the function up; an invalid call either way
        return _bad("simple_function_checker:wrong_func_name", "Function not found in the function list.")
    possible = next(iter(answer.values()))
    name = doc["name"]
    props = doc["parameters"]["properties"]
    if name not in call:
        return _bad("simple_function_checker:wrong_func_name", f"Function name {name!r} not found in model output.")
    args = call[name]
    for param in doc["parameters"].get("required", []):
        if param not in args:
            return _bad("simple_function_checker:missing_required", f"Missing required parameter: {param!r}.")
    for param, value in args.items():
        if param not in props or param not in possible:
            return _bad("simple_function_checker:unexpected_param", f"Unexpected parameter: {param!r}.")
        declared = props[param]["type"]
        expected = PYTHON_TYPES.get(declared)
        if expected is None:
            return _bad("type_error:unsupported", f"Unsupported type {declared!r} for parameter {param!r}.")
        nested = PYTHON_TYPES.get(props[param].get("items", {}).get("type", "")) if declared in NESTED else None
        if declared in NESTED and nested is None:
            return _bad("type_error:unsupported", f"Unsupported item type for parameter {param!r}.")
        if declared == "tuple" and type(value) is tuple:
            value = list(value)
        if declared == "float" and type(value) is int:
            value = float(value)  # Python's int -> float promotion is accepted
        typed = _type_check(param, value, possible[param], declared, expected, nested)
        if not typed.valid:
            return typed.verdict
        if not typed.is_variable:
            if expected is dict:
                v = _dict_check(param, value, possible[param])
            elif expected is list and nested is dict:
                v = _list_dict_check(param, value, possible[param])
            elif expected is str:
                v = _string_check(param, value, possible[param])
            elif expected is list:
                v = _list_check(param, value, possible[param])
            else:
                v = None
            if v is not None:
                if not v.valid:
                    return v
                continue
        if value not in possible[param]:
            return _bad("value_error:others", f"Invalid value for parameter {param!r}: {value!r}. "
                                              f"Expected one of {possible[param]}.")
    for param, values in possible.items():
        if param not in args and "" not in values:
            return _bad("simple_function_checker:missing_optional",
                        f"Optional parameter {param!r} not provided and not marked as optional.")
    return OK


@dataclass(frozen=True)
class _Typed:
    valid: bool
    is_variable: bool = False
    verdict: Verdict = OK


def _answer_type(possible: list[Any]) -> type | None:
    return next((type(a) for a in possible if a != ""), None)


def _type_check(param: str, value: Any, possible: list[Any], declared: str, expected: type,
                nested: type | None) -> _Typed:
    """BFCL's ``type_checker``: the declared type, one level of item types for lists, or
    the answer's own type (a "variable" standing for a value)."""
    answer_type = _answer_type(possible)
    is_variable = answer_type is not None and answer_type is not expected
    failure = OK
    if type(value) is expected:
        if nested is None:
            return _Typed(True, is_variable)
        for item in possible:
            ok = True
            if type(item) is list:
                for element in value:
                    if not _type_check(param, element, item, str(nested), nested, None).valid:
                        ok = False
                        break
            if ok:
                return _Typed(True, is_variable)
        failure = Verdict(False, "type_error:nested", [
            f"Nested type checking failed for parameter {param!r}. Expected outer type {declared} "
            f"with inner type {nested}. Parameter value: {value!r}."])
    if answer_type is not None and type(value) is answer_type:
        # BFCL returns its result as it stands here: a pass as a "variable", or the nested failure
        return _Typed(failure.valid, True, failure)
    return _Typed(False, verdict=Verdict(False, "type_error:simple", [*failure.error,
        f"Incorrect type for parameter {param!r}. Expected type {declared}, got {type(value).__name__}. "
        f"Parameter value: {value!r}."]))


def standardize(text: str) -> str:
    """Case, spaces and ``,./-_*^`` do not count; single quotes read as double."""
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def _std(x: Any) -> Any:
    return standardize(x) if type(x) is str else x


def _string_check(param: str, value: str, possible: list[Any]) -> Verdict:
    if standardize(value) not in [standardize(p) for p in possible if type(p) is str]:
        return _bad("value_error:string", f"Invalid value for parameter {param!r}: {value!r}. "
                                          f"Expected one of {possible}. Case insensitive.")
    return OK


def _list_check(param: str, value: list[Any], possible: list[Any]) -> Verdict:
    if [_std(v) for v in value] not in [[_std(x) for x in p] for p in possible]:
        return _bad("value_error:list/tuple", f"Invalid value for parameter {param!r}: {value!r}. "
                                              f"Expected one of {possible}.")
    return OK


def _dict_check(param: str, value: dict[str, Any], possible: list[Any]) -> Verdict:
    result = Verdict(False, "dict_checker:unclear")
    for candidate in possible:
        if candidate == "":
            continue
        result = Verdict(False, "dict_checker:unclear")
        ok = True
        for key, v in value.items():
            if key not in candidate:
                result, ok = _bad("value_error:dict_key", f"Unexpected dict key parameter: '{key}'."), False
                break
            allowed = [_std(a) for a in candidate[key]]
            if _std(v) not in allowed:
                result, ok = _bad("value_error:dict_value", f"Invalid value for parameter {key!r}: {v!r}. "
                                                            f"Expected one of {allowed}."), False
                break
        for key, allowed in candidate.items():  # BFCL looks even after a bad value (its message wins)
            if key not in value and "" not in allowed:
                result = Verdict(False, "value_error:dict_key", [*result.error, f"Missing dict key parameter: '{key}'."])
                ok = False
                break
        if ok:
            return OK
    return result


def _list_dict_check(param: str, value: list[Any], possible: list[Any]) -> Verdict:
    result = Verdict(False, "list_dict_checker:unclear")
    for candidate in possible:
        if len(value) != len(candidate):
            result = _bad("value_error:list_dict_count", "Wrong number of dictionaries in the list.")
            continue
        for item, expected in zip(value, candidate):
            result = _dict_check(param, item, [expected])
            if not result.valid:
                break
        else:
            return OK
    return result
