"""Instruction-data records -> conversations in the chat format (``afm.model.text.chat``).

Public instruction sets come in a few layouts; each record is recognised by its keys:

==============================  ============================================================
layout                          keys
==============================  ============================================================
chat (OpenAI / HF / TRL)        ``messages`` [+ ``tools``]
ShareGPT                        ``conversations``: ``from`` (system/human/user/gpt/
                                assistant/tool/function_response) + ``value``
Alpaca                          ``instruction`` [+ ``input``] + ``output``
preference pair                 ``chosen`` + ``rejected`` [+ ``prompt``]: the prompt and
                                the chosen reply, read by the preference layout's one
                                reader (``afm.synth.preference_format``)
prompt / completion             ``prompt`` + ``completion`` / ``response`` / ``answer``
==============================  ============================================================

Every layout applies the one finish rule (``afm.finish``): a reply that stopped at the
token limit is never a finished turn, wherever the record says so: ``finish_reason`` /
``stop_reason`` (or ``<reply>_finish_reason``, e.g. ``chosen_finish_reason``) on the
record, or on an assistant message or a ShareGPT ``gpt`` turn. Such a record is a
:class:`CutReply`.

The result is a :class:`Conversation` (messages, tools, id) or a :class:`FormatError`
whose ``reason`` says what is wrong (``bad_format``, ``cut_reply``, a preference
reader's reason); the preparation step turns those into rejects counted by reason.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from afm.finish import DROP_REASON, FINISH_KEYS, finish_of, is_cut
from afm.model.text.chat import ChatFormatError, validate
from afm.synth.preference_format import is_preference_record, parse_exchange

SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant",
                  "assistant": "assistant", "chatgpt": "assistant", "bing": "assistant",
                  "tool": "tool", "function_response": "tool", "observation": "tool"}


class FormatError(ValueError):
    """A record that is not a conversation in any known layout; ``reason`` is the
    countable reject reason."""

    def __init__(self, message: str, reason: str = "bad_format"):
        super().__init__(message)
        self.reason = reason


class CutReply(FormatError):
    """A record holding a reply that stopped at the token limit (``afm.finish``)."""

    def __init__(self, message: str):
        super().__init__(f"{DROP_REASON}: {message}: a reply stopped for length is never a finished turn",
                         DROP_REASON)


def record_cut(record: dict[str, Any]) -> str | None:
    """The record-level key saying its reply was cut (``finish_reason``, or a reply's own
    ``<reply>_finish_reason`` such as ``chosen_finish_reason``), or None."""
    for key, value in record.items():
        if isinstance(key, str) and (key in FINISH_KEYS or key.endswith(tuple("_" + k for k in FINISH_KEYS))) \
                and is_cut(value):
            return key
    return None


@dataclass
class Conversation:
    """Messages in the chat format, the tools offered, and a stable id."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    id: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = conversation_id(self.messages, self.tools)

    def texts(self) -> list[str]:
        """Every piece of text a model would read or write (for PII and decontamination)."""
        out = [m.get("content") or "" for m in self.messages]
        for m in self.messages:
            for call in m.get("tool_calls") or []:
                out.append(json.dumps(call, ensure_ascii=False))
        return [t for t in out if t]

    def to_json(self) -> str:
        data: dict[str, Any] = {"id": self.id, "messages": self.messages}
        if self.tools:
            data["tools"] = self.tools
        return json.dumps(data, ensure_ascii=False)


def conversation_id(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
    """A content hash: the same conversation gets the same id in every run."""
    key = json.dumps({"m": messages, "t": tools or []}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise FormatError(f"{what} must be a string, got {type(value).__name__}")
    return value


def _from_sharegpt(turns: Any) -> list[dict[str, Any]]:
    if not isinstance(turns, list):
        raise FormatError("conversations must be a list")
    out = []
    for i, t in enumerate(turns):
        if not isinstance(t, dict):
            raise FormatError(f"conversations[{i}] is not an object")
        who = str(t.get("from", t.get("role", ""))).lower()
        if who not in SHAREGPT_ROLES:
            raise FormatError(f"conversations[{i}]: unknown speaker {who!r}")
        if SHAREGPT_ROLES[who] == "assistant" and is_cut(finish_of(t)):
            raise CutReply(f"conversations[{i}] ({who}) stopped for length ({finish_of(t)})")
        out.append({"role": SHAREGPT_ROLES[who], "content": _text(t.get("value", t.get("content")),
                                                                   f"conversations[{i}].value")})
    return out


def to_conversation(record: Any) -> Conversation:
    """One record in any layout of the module docstring -> a validated conversation."""
    if not isinstance(record, dict):
        raise FormatError(f"a record must be an object, got {type(record).__name__}")
    tools = record.get("tools")
    if isinstance(tools, str):  # some exports store the tool list as JSON text
        try:
            tools = json.loads(tools)
        except ValueError as exc:
            raise FormatError(f"tools is not valid JSON ({exc})") from None
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise FormatError("tools must be a list of objects")
    cut_key = record_cut(record)
    if cut_key:
        raise CutReply(f"{cut_key} is {record[cut_key]!r}")
    if "messages" in record:
        messages = record["messages"]
        if isinstance(messages, str):
            try:
                messages = json.loads(messages)
            except ValueError as exc:
                raise FormatError(f"messages is not valid JSON ({exc})") from None
    elif "conversations" in record:
        messages = _from_sharegpt(record["conversations"])
    elif is_preference_record(record):
        try:
            prompt_msgs, chosen, _ = parse_exchange(record)
        except ValueError as exc:
            reason = str(exc).split(":", 1)[0]
            if reason == DROP_REASON:
                raise CutReply(str(exc).split(":", 1)[1].strip()) from None
            raise FormatError(str(exc), reason) from None
        reply = [{"role": "assistant", "content": chosen}] if isinstance(chosen, str) else chosen
        messages = [*prompt_msgs, *reply]
    elif "instruction" in record and "output" in record:
        prompt = _text(record["instruction"], "instruction")
        extra = record.get("input") or ""
        prompt = f"{prompt}\n\n{_text(extra, 'input')}" if extra else prompt
        messages = [{"role": "user", "content": prompt},
                    {"role": "assistant", "content": _text(record["output"], "output")}]
    elif "prompt" in record:
        answer = next((record[k] for k in ("completion", "response", "answer", "chosen") if k in record), None)
        if answer is None:
            raise FormatError("a prompt record needs completion, response or answer")
        messages = [{"role": "user", "content": _text(record["prompt"], "prompt")},
                    {"role": "assistant", "content": _text(answer, "completion")}]
    else:
        keys = ", ".join(sorted(record)[:8]) or "none"
        raise FormatError(f"unknown record layout (keys: {keys}); expected messages, conversations, "
                          "instruction/output or prompt/completion")
    try:
        validate(messages)
    except ChatFormatError as exc:
        raise FormatError(str(exc)) from None
    for i, m in enumerate(messages):
        if m.get("role") == "assistant" and is_cut(finish_of(m)):
            raise CutReply(f"message {i} stopped for length ({finish_of(m)})")
    messages = [dict(m) for m in messages]
    given = record.get("id")
    return Conversation(messages, tools or None, str(given) if given not in (None, "") else "",
                        meta={k: record[k] for k in ("source", "category") if k in record})
