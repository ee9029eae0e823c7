"""Preference records: the one reader of the layout, shared by every command that reads
pairs (the reward model, DPO/IPO, iTeC's exports) and by ``afm sft prepare`` (which
trains on the prompt and the chosen reply).

A preference record (report App. E.1), one JSON object per JSONL line or Parquet row::

    {"id": "...",                                  # optional
     "prompt": [{"role": "user", "content": "..."}, ...],   # the whole conversation
     "chosen": "...", "rejected": "...",           # the two assistant replies
     "level": "significantly_better",             # negligibly_better | slightly_better |
                                                   # better | significantly_better
     "chosen_grades": {"instruction_following": 2, "verbosity": 2,
                       "truthfulness": 2, "harmlessness": 2},   # optional, 0/1/2 each
     "rejected_grades": {...}}                     # optional

``prompt`` may also be a plain string (one user turn). ``chosen`` / ``rejected`` may be
lists of messages (TRL's conversational form): the reply is then every message of the
list, in order (assistant turns, and tool results between them), and it must end with an
assistant turn. Without a ``prompt``, two message lists are TRL's implicit-prompt form:
the messages they share from the start are the prompt. A reply recorded as cut at the
token limit (``finish_reason`` ``length`` on a reply message, or ``chosen_finish_reason``
/ ``rejected_finish_reason`` on the record) is never a finished turn (``afm.finish``) and
rejects the record, whoever reads it.

:func:`parse_exchange` reads the conversation (prompt and both replies);
:func:`parse_record` adds the labels the preference tasks need (level, gradings, a
reference's log-probs). Both raise ``ValueError`` whose message starts with the reject
reason (``cut_reply``, ``bad_prompt``, ``missing_level``, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from afm.finish import DROP_REASON, finish_of, is_cut
from afm.model.text.chat import ChatFormatError, validate

LEVELS = ("negligibly_better", "slightly_better", "better", "significantly_better")
GRADES = ("instruction_following", "verbosity", "truthfulness", "harmlessness")

Reply = str | list[dict[str, Any]]  # one assistant text, or the reply's messages in order


@dataclass(frozen=True)
class PreferencePair:
    id: str
    prompt: list[dict[str, Any]]
    chosen: Reply
    rejected: Reply
    level: int
    chosen_grades: tuple[int, int, int, int]
    rejected_grades: tuple[int, int, int, int]
    ref_logps: tuple[float, float] | None = None  # a reference model's (chosen, rejected) log-probs


def is_preference_record(record: Any) -> bool:
    """Whether a record is in this layout (two replies to compare)."""
    return isinstance(record, dict) and "chosen" in record and "rejected" in record


def _grades(value: Any, name: str) -> tuple[int, int, int, int]:
    if value is None:
        return (-1, -1, -1, -1)
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError(f"{name}: expected an object of gradings")
    unknown = set(value) - set(GRADES)
    if unknown:
        raise ValueError(f"{name}: unknown grading {sorted(unknown)[0]!r}")
    out = []
    for g in GRADES:
        v = value.get(g)
        if v is None:
            out.append(-1)
        elif isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2:
            raise ValueError(f"{name}.{g}: expected 0, 1 or 2, got {v!r}")
        else:
            out.append(int(v))
    return tuple(out)  # type: ignore[return-value]


def _messages(value: Any) -> Any:
    """A message list stored as JSON text (a Parquet column) decoded; anything else as is."""
    if isinstance(value, str) and value.lstrip().startswith("[{"):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(decoded, list) and all(isinstance(m, dict) and "role" in m for m in decoded):
            return decoded
    return value


def implicit_prompt(chosen: list[Any], rejected: list[Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """TRL's implicit-prompt form (no ``prompt``; both replies are whole conversations):
    the messages both share from the start, up to the last one the assistant answers, are
    the prompt; the rest is each side's reply."""
    n = 0
    while n < min(len(chosen), len(rejected)) and chosen[n] == rejected[n]:
        n += 1
    # assistant turns (and tool results) both replies open with stay in both replies: a
    # prompt ends with what the assistant answers
    while n and isinstance(chosen[n - 1], dict) and chosen[n - 1].get("role") in ("assistant", "tool"):
        n -= 1
    return chosen[:n], chosen[n:], rejected[n:]


def parse_reply(value: Any, key: str, rec: dict[str, Any]) -> Reply:
    """One side's reply: a non-empty string, or a list of messages read whole (every
    message, in order) that holds assistant and tool messages only, ends with an assistant
    turn and was not cut at the token limit. ``ValueError`` with the reject reason."""


    side = {k[len(key) + 1:]: v for k, v in rec.items() if k.startswith(key + "_")}
    if is_cut(finish_of(side)):
        raise ValueError(f"{DROP_REASON}: {key!r} stopped for length ({finish_of(side)}): never a finished turn")
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"missing_response: {key!r} is missing or empty")
        return value
    if not isinstance(value, list) or not value:
        raise ValueError(f"missing_response: {key!r} is missing or empty")
    try:
        validate(value)
    except ChatFormatError as exc:
        raise ValueError(f"bad_response: {key!r}: {exc}") from None
    last = value[-1].get("role")
    if last != "assistant":
        raise ValueError(f"reply_not_from_assistant: {key!r} ends with a {last} message, not the assistant's reply")
    for i, m in enumerate(value):
        if m["role"] not in ("assistant", "tool"):
            raise ValueError(f"bad_response: {key!r} message {i} is a {m['role']} turn; a reply holds assistant "
                             "messages and the tool results between them")
        if is_cut(finish_of(m)):
            raise ValueError(f"{DROP_REASON}: {key!r} message {i} stopped for length ({finish_of(m)}): "
                             "never a finished turn")
    if not any((m.get("content") or "").strip() or m.get("tool_calls") for m in value if m["role"] == "assistant"):
        raise ValueError(f"missing_response: {key!r} has no assistant text or tool call")
    return [dict(m) for m in value]


def parse_exchange(rec: Any) -> tuple[list[dict[str, Any]], Reply, Reply]:
    """A preference record's conversation: ``(prompt, chosen, rejected)``, each reply read
    whole and checked (:func:`parse_reply`: the finish rule, an assistant turn last), or
    ``ValueError`` whose message is the reject reason. What every reader of the layout
    shares: the preference tasks add the labels (:func:`parse_record`), ``afm sft prepare``
    trains on the prompt and the chosen reply."""

    if not isinstance(rec, dict):
        raise ValueError(f"not_an_object: got {type(rec).__name__}")
    chosen, rejected = _messages(rec.get("chosen")), _messages(rec.get("rejected"))
    prompt = rec.get("prompt")
    if prompt is None and isinstance(chosen, list) and isinstance(rejected, list):
        prompt, chosen, rejected = implicit_prompt(chosen, rejected)  # TRL's implicit-prompt form
    if isinstance(prompt, str) and prompt.strip().startswith("["):
        try:
            prompt = json.loads(prompt)
        except json.JSONDecodeError:
            pass
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if not isinstance(prompt, list) or not prompt:
        raise ValueError("bad_prompt: expected a non-empty conversation or string")
    try:
        validate(prompt)
    except ChatFormatError as exc:
        raise ValueError(f"bad_prompt: {exc}") from None
    if prompt[-1].get("role") == "assistant":
        raise ValueError("bad_prompt: the conversation ends with an assistant turn")
    responses = parse_reply(chosen, "chosen", rec), parse_reply(rejected, "rejected", rec)
    if responses[0] == responses[1]:
        raise ValueError("identical_responses: chosen equals rejected")
    return prompt, responses[0], responses[1]


def parse_record(rec: Any, default_id: str) -> PreferencePair:
    """A record -> a pair (:func:`parse_exchange` and the labels: level, gradings, a
    reference's log-probs), or ``ValueError`` whose message is the reject reason."""

    prompt, chosen, rejected = parse_exchange(rec)
    if "level" not in rec:
        raise ValueError(f"missing_level: a preference needs a level ({', '.join(LEVELS)})")
    level = rec["level"]
    if level not in LEVELS:
        raise ValueError(f"bad_level: {level!r} is not one of {', '.join(LEVELS)}")
    try:
        cg = _grades(rec.get("chosen_grades"), "chosen_grades")
        rg = _grades(rec.get("rejected_grades"), "rejected_grades")
    except (ValueError, json.JSONDecodeError) as exc:
        raise ValueError(f"bad_grades: {exc}") from None
    ref = None
    if rec.get("ref_chosen_logps") is not None or rec.get("ref_rejected_logps") is not None:
        try:
            ref = (float(rec["ref_chosen_logps"]), float(rec["ref_rejected_logps"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError("bad_ref_logps: ref_chosen_logps and ref_rejected_logps must both be numbers") from None
        if not all(np.isfinite(ref)) or max(ref) > 0:
            raise ValueError(f"bad_ref_logps: log-probs must be finite and <= 0, got {ref}")
    rid = rec.get("id")
    return PreferencePair(str(rid) if rid not in (None, "") else default_id, prompt,
                          chosen, rejected, LEVELS.index(level), cg, rg, ref)


__all__ = ["GRADES", "LEVELS", "PreferencePair", "Reply", "implicit_prompt", "is_preference_record",
           "parse_exchange", "parse_record", "parse_reply"]
