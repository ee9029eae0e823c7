"""Prompt conversations for sampling (online RL, iTeC rounds, best-of-n): one reader."""

from __future__ import annotations

import json
from typing import Any


def read_prompts(path: str, limit: int | None = None) -> list[list[dict[str, Any]]]:
    """Prompt conversations from JSONL: ``messages`` (assistant turns at the end are dropped,
    so an SFT file works) or a plain ``prompt`` string. Bad lines raise with their number."""
    out: list[list[dict[str, Any]]] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
            if isinstance(row, dict) and isinstance(row.get("messages"), list):
                msgs = list(row["messages"])
                while msgs and msgs[-1].get("role") == "assistant":
                    msgs.pop()
            elif isinstance(row, dict) and isinstance(row.get("prompt"), str):
                msgs = [{"role": "user", "content": row["prompt"]}]
            else:
                raise ValueError(f"{path}:{n}: expected an object with 'messages' or 'prompt'")
            if not msgs:
                raise ValueError(f"{path}:{n}: the prompt conversation is empty")
            out.append(msgs)
            if limit and len(out) >= limit:
                break
    if not out:
        raise ValueError(f"{path}: no prompts")
    return out


__all__ = ["read_prompts"]
