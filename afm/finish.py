"""One rule for every writer of training data: a reply that stopped for length is never a
finished turn.

Every generator says why each reply ended: an OpenAI-compatible server's ``finish_reason``
(``stop``, ``length``, ``tool_calls``, ``content_filter``), Anthropic's ``stop_reason``
(``end_turn``, ``max_tokens``, ``stop_sequence``, ``tool_use``), afm's sampler (a stop
token, or none: ``length``) and its rollouts (``end_of_turn``, ``end_of_text``,
``length``). A reply cut at the token limit ends mid-thought; the chat template then closes
it with the end-of-turn token, so training on it teaches the model to stop mid-sentence
(SFT), or compares an unfinished reply as if it were complete (preference pairs, best-of-n,
iTeC). So every writer of training data (SFT rows, preference pairs, synthetic math, code
and tool data, iTeC, best-of-n) asks :func:`is_cut` of each reply, drops the cut ones and
counts them as ``cut_replies`` in its output's stats; nothing else decides it.

A reply with no reason recorded (a scripted or hand-written one) counts as finished: the
rule needs the generator's word that it was cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Why a generator stops at its token limit, in the spellings of the APIs above.
CUT_REASONS = frozenset({"length", "max_tokens", "max_new_tokens", "model_length"})
# Where a record or a message says why its reply ended.
FINISH_KEYS = ("finish_reason", "stop_reason", "finish")
DROP_REASON = "cut_reply"  # the one reject / drop reason every writer records
STAT = "cut_replies"  # the one name of the count in every output's stats


def is_cut(finish: Any) -> bool:
    """Whether a reply with this stop reason ran out of tokens (never a finished turn)."""
    return isinstance(finish, str) and finish.strip().lower() in CUT_REASONS


@dataclass(frozen=True)
class Reply:
    """A reply and why it ended (``None``: not recorded, e.g. scripted)."""

    text: str
    finish: str | None = None

    @property
    def cut(self) -> bool:
        return is_cut(self.finish)


def finish_of(item: Mapping[str, Any]) -> Any:
    """The stop reason a record or a message carries under any of :data:`FINISH_KEYS`."""
    return next((item[k] for k in FINISH_KEYS if k in item), None)


def cut_in_record(record: Mapping[str, Any], messages: Iterable[Any] = ()) -> bool:
    """Whether a training record holds a cut reply: the record's own stop reason (one
    generated reply per record) or any assistant message's."""
    if is_cut(finish_of(record)):
        return True
    return any(isinstance(m, Mapping) and m.get("role") == "assistant" and is_cut(finish_of(m)) for m in messages)


__all__ = ["CUT_REASONS", "DROP_REASON", "FINISH_KEYS", "STAT", "Reply", "cut_in_record", "finish_of", "is_cut"]
