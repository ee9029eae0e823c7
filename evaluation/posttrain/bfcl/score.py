"""A model's reply to a BFCL entry -> BFCL's verdict.

The reply is decoded with the one parser of afm's tool-call format
(``afm.synth.tool_data.parse_calls``: ``<tool_call>{"name", "arguments"}</tool_call>``
blocks, or a bare JSON call) into BFCL's decoded form ``[{name: {param: value}}]``; then,
as BFCL's evaluation runner does:

* AST categories: a reply that does not decode is ``ast_decoder:decoder_failed``, one that
  decodes to something else than a list of one-key ``{name: {params}}`` objects is
  ``ast_decoder:decoder_wrong_output_format``, anything else goes to the AST match
  (:mod:`afm.evaluation.posttrain.bfcl.ast_match`);
* irrelevance: right when the reply holds no call (it does not decode, or decodes to
  nothing); relevance: right when it holds at least one.
"""

from __future__ import annotations

from typing import Any

from afm.evaluation.posttrain.bfcl.ast_match import Verdict, check
from afm.synth.tool_data import parse_calls


class DecodeError(ValueError):
    """A reply whose tool calls are not valid JSON calls."""


def decode(reply: str) -> list[dict[str, Any]]:
    """``[{name: arguments}]`` of the calls in ``reply`` ([] when it makes none)."""
    calls = parse_calls(reply)
    if calls is None:
        raise DecodeError("a tool call in the reply is not a JSON object with a name")
    return [{c["name"]: c["arguments"]} for c in calls]


def is_call_format(decoded: Any) -> bool:
    """BFCL's ``is_function_calling_format_output``: a list of ``{name: {params}}``."""
    return isinstance(decoded, list) and all(
        isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item.values())), dict)
        for item in decoded)


def is_empty(decoded: Any) -> bool:
    """BFCL's ``is_empty_output``: no call (``[]``, ``[{}]`` or not in call format)."""
    return not is_call_format(decoded) or len(decoded) == 0 or (len(decoded) == 1 and len(decoded[0]) == 0)


def verdict(category: str, functions: list[dict[str, Any]], reply: str,
            answer: list[dict[str, Any]] | None) -> Verdict:
    """BFCL's verdict on ``reply`` for one entry of ``category``."""
    if "relevance" in category:  # irrelevance and relevance share the decode-or-not rule
        try:
            has_call = not is_empty(decode(reply))
        except DecodeError:
            has_call = False
        if "irrelevance" in category:
            return Verdict(True) if not has_call else Verdict(
                False, "irrelevance_error:decoder_success", ["Valid syntax. Successfully decode AST when it should not."])
        return Verdict(True) if has_call else Verdict(
            False, "relevance_error:decoder_failed", ["Invalid syntax. Failed to decode AST when it should have."])
    if answer is None:
        raise ValueError(f"{category}: an AST category needs its possible answer")
    try:
        decoded = decode(reply)
    except DecodeError as exc:
        return Verdict(False, "ast_decoder:decoder_failed", [f"Invalid syntax. Failed to decode AST. {exc}"])
    if not is_call_format(decoded):
        return Verdict(False, "ast_decoder:decoder_wrong_output_format",
                       ["Did not output in the specified format."])
    return check(functions, decoded, answer, category)
