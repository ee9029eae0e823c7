"""Prompt conversations for sampling (online RL, iTeC rounds, best-of-n): one reader."""

from __future__ import annotations

import json
from typing import Any

from afm.errors import UserError
from afm.model.text.chat import ChatFormatError, validate


class PromptsError(UserError):
    """A prompts file that cannot be read: the file, the line and what is wrong, in one line."""


def _conversation(row: Any) -> list[dict[str, Any]] | None:
    """A row's prompt conversation: ``messages`` (assistant turns at the end dropped, so
    an SFT file works), or ``prompt`` as a string (one user turn) or a conversation."""
    if not isinstance(row, dict):
        return None
    value = row.get("messages", row.get("prompt"))
    if isinstance(value, str) and "messages" not in row:
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        return None
    msgs = list(value)
    while msgs and isinstance(msgs[-1], dict) and msgs[-1].get("role") == "assistant":
        msgs.pop()
    return msgs


def read_prompts(path: str, limit: int | None = None) -> list[list[dict[str, Any]]]:
    """Prompt conversations from JSONL: ``messages`` or ``prompt`` (a string or a
    conversation); trailing assistant turns are dropped. A line that is not JSON, not such
    an object, or not a valid conversation is a :class:`PromptsError` naming the file and
    the line (never a traceback)."""
    out: list[list[dict[str, Any]]] = []
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise PromptsError(f"prompts {path}: {exc.strerror or exc}") from None
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PromptsError(f"{path}:{n}: not JSON ({exc.msg})") from None
            msgs = _conversation(row)
            if msgs is None:
                raise PromptsError(f"{path}:{n}: expected an object with 'messages' (a conversation) or 'prompt' "
                                   "(a string or a conversation)")
            if not msgs:
                raise PromptsError(f"{path}:{n}: the prompt conversation is empty")
            try:
                validate(msgs)
            except ChatFormatError as exc:
                raise PromptsError(f"{path}:{n}: {exc}") from None
            out.append(msgs)
            if limit and len(out) >= limit:
                break
    if not out:
        raise PromptsError(f"{path}: no prompts")
    return out


__all__ = ["PromptsError", "read_prompts"]
