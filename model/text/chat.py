"""The chat format: one definition, rendered to token ids here and to Jinja for Hugging Face.

A conversation is a list of OpenAI-style messages (``role`` in system / user / assistant /
tool, ``content`` a string; an assistant message may carry ``tool_calls``), optionally with
a list of tool definitions (JSON schemas). It is laid out as::

    <s>                                          once, first
    <|system|>SYSTEM[\\n\\n]# Tools ...<|end|>     only when tools are given: the first system
                                                 message (if any) followed by the tool list
    <|role|>CONTENT<|end|>                       every (other) message, in order
    <|assistant|>CONTENT<tool_call>{...}</tool_call><|end|>      an assistant turn with calls
    <|assistant|>                                with ``add_generation_prompt``

The role and end markers are control tokens that user text can never produce, so a message
cannot forge a role switch. An SFT loss trains on assistant turns only: each assistant
message's content, its tool calls and its closing ``<|end|>`` (the model must learn to
stop); the role token before it is part of the prompt. Every assistant turn of a
multi-turn conversation is trained with the whole conversation before it as its prompt
(report §4.2, footnote 3).

:func:`encode_chat` turns a conversation into ids and that mask. :data:`CHAT_TEMPLATE` is
the same layout as a Jinja chat template for ``transformers`` (written by
``afm export hf``), with the assistant parts inside ``{% generation %}`` blocks, so that
``apply_chat_template(messages, tools=..., return_assistant_tokens_mask=True)`` on the
exported tokenizer gives exactly our ids and mask (tested in ``tests/slow/model``).

One deliberate difference: a message whose text contains a control token's spelling (the
seven characters ``<|end|>``) renders to plain text pieces here, while ``transformers``
matches added tokens inside any text and would emit the control token. Reject or escape
such text before training if you render with both.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

ROLES = ("system", "user", "assistant", "tool")
END = "<|end|>"
TOOLS_HEADER = (
    "# Tools\n"
    "You can call the functions below. To call one, write "
    '<tool_call>{"name": NAME, "arguments": {...}}</tool_call>; '
    "its result comes back in a tool message."
)
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"


class ChatFormatError(ValueError):
    """A conversation that cannot be rendered (unknown role, content not a string, ...)."""


class ChatTokenizer(Protocol):
    """What rendering needs from a tokenizer (``afm.model.text.tokenizer.Tokenizer`` has it)."""

    bos_id: int
    end_id: int

    def encode(self, text: str) -> list[int]: ...

    def role_id(self, role: str) -> int: ...


@dataclass(frozen=True)
class Piece:
    """One part of a rendered conversation: a control token or a run of text, and whether
    it belongs to an assistant reply (is trained on)."""

    text: str
    control: bool = False
    trained: bool = False


def tool_call_text(call: dict[str, Any]) -> str:
    """``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` for an OpenAI-style call
    (``{"type": "function", "function": {...}}``) or a bare ``{"name", "arguments"}``.
    String arguments are kept verbatim (OpenAI sends them as JSON text); anything else is
    written with ``json.dumps(..., ensure_ascii=False)``, which is what the template's
    ``tojson`` filter does in ``transformers``."""
    if not isinstance(call, dict):
        raise ChatFormatError(f"a tool call must be an object, got {type(call).__name__}")
    fn = call.get("function", call)
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise ChatFormatError(f"a tool call needs a function name: {call!r}")
    args = fn.get("arguments", {})
    args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    name = json.dumps(fn["name"], ensure_ascii=False)
    return f'{TOOL_CALL_OPEN}{{"name": {name}, "arguments": {args_text}}}{TOOL_CALL_CLOSE}'


def _content(message: dict[str, Any], index: int) -> str:
    content = message.get("content")
    if content is None and message.get("role") == "assistant" and message.get("tool_calls"):
        return ""
    if not isinstance(content, str):
        raise ChatFormatError(
            f"message {index}: content must be a string, got {type(content).__name__}"
        )
    return content


def validate(messages: Sequence[dict[str, Any]]) -> None:
    """Raise :class:`ChatFormatError` naming the first message that cannot be rendered."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ChatFormatError("a conversation must be a list of messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ChatFormatError(f"message {i}: expected an object, got {type(m).__name__}")
        if m.get("role") not in ROLES:
            raise ChatFormatError(f"message {i}: unknown role {m.get('role')!r}; known: {ROLES}")
        _content(m, i)
        calls = m.get("tool_calls")
        if calls and m["role"] != "assistant":
            raise ChatFormatError(f"message {i}: only assistant messages carry tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise ChatFormatError(f"message {i}: tool_calls must be a list")
        for call in calls or []:
            tool_call_text(call)


def pieces(
    messages: Sequence[dict[str, Any]],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    add_generation_prompt: bool = False,
) -> list[Piece]:
    """The conversation as control tokens and text runs (see the module docstring)."""
    validate(messages)
    out = [Piece("<s>", control=True)]
    rest = list(messages)
    if tools:
        system = ""
        if rest and rest[0]["role"] == "system":
            system = _content(rest[0], 0) + "\n\n"
            rest = rest[1:]
        listing = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
        out += [Piece("<|system|>", control=True), Piece(system + TOOLS_HEADER + listing),
                Piece(END, control=True)]
    for i, m in enumerate(rest):
        role = m["role"]
        assistant = role == "assistant"
        text = _content(m, i) + "".join(tool_call_text(c) for c in m.get("tool_calls") or [])
        out += [Piece(f"<|{role}|>", control=True), Piece(text, trained=assistant),
                Piece(END, control=True, trained=assistant)]
    if add_generation_prompt:
        out.append(Piece("<|assistant|>", control=True))
    return out


def render_text(messages: Sequence[dict[str, Any]], **kwargs: Any) -> str:
    """The conversation as one string (what the Jinja template renders)."""
    return "".join(p.text for p in pieces(messages, **kwargs))


def encode_chat(
    tokenizer: ChatTokenizer,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    add_generation_prompt: bool = False,
) -> tuple[list[int], list[bool]]:
    """Token ids of the conversation and, per id, whether an SFT loss trains on it.

    Text runs are encoded one at a time, exactly as ``transformers`` encodes the text
    between two added tokens, so the ids equal ``apply_chat_template``'s."""
    ids: list[int] = []
    mask: list[bool] = []
    for p in pieces(messages, tools=tools, add_generation_prompt=add_generation_prompt):
        if p.control:
            if p.text == "<s>":
                new = [tokenizer.bos_id]
            elif p.text == END:
                new = [tokenizer.end_id]
            else:
                new = [tokenizer.role_id(p.text[2:-2])]
        else:
            new = tokenizer.encode(p.text) if p.text else []
        ids += new
        mask += [p.trained] * len(new)
    return ids, mask


def _jinja_string(text: str) -> str:
    """A Jinja string literal for ``text`` (JSON escapes are valid Jinja escapes)."""
    return json.dumps(text)


def _template() -> str:
    """The Jinja rendering of :func:`pieces`. Written without literal whitespace between
    tags, so ``trim_blocks``/``lstrip_blocks`` (on in ``transformers``) change nothing."""
    role_check = (
        "{% if message['role'] not in ['system', 'user', 'assistant', 'tool'] %}"
        "{{ raise_exception('unknown chat role: ' + message['role']) }}{% endif %}"
    )
    call = (
        "{% for call in message['tool_calls'] %}"
        "{% if call['function'] is defined %}{% set fn = call['function'] %}{% else %}{% set fn = call %}{% endif %}"
        f"{TOOL_CALL_OPEN}"
        '{{ \'{"name": \' }}{{ fn[\'name\'] | tojson }}{{ \', "arguments": \' }}'
        "{% if fn['arguments'] is string %}{{ fn['arguments'] }}"
        "{% elif fn['arguments'] is defined %}{{ fn['arguments'] | tojson }}{% else %}{{ '{}' }}{% endif %}"
        f"{{{{ '}}' }}}}{TOOL_CALL_CLOSE}"
        "{% endfor %}"
    )
    return (
        "{{ bos_token }}"
        "{% set ns = namespace(skip_first=false) %}"
        "{% if tools %}<|system|>"
        "{% if messages and messages[0]['role'] == 'system' %}"
        "{{ messages[0]['content'] }}{{ '\\n\\n' }}{% set ns.skip_first = true %}{% endif %}"
        f"{{{{ {_jinja_string(TOOLS_HEADER)} }}}}"
        "{% for tool in tools %}{{ '\\n' }}{{ tool | tojson }}{% endfor %}"
        f"{END}{{% endif %}}"
        "{% for message in messages %}"
        "{% if not (loop.first and ns.skip_first) %}"
        f"{role_check}"
        "<|{{ message['role'] }}|>"
        "{% if message['role'] == 'assistant' %}{% generation %}"
        "{% if message['content'] is string %}{{ message['content'] }}{% endif %}"
        "{% if message['tool_calls'] is defined and message['tool_calls'] %}"
        f"{call}"
        "{% endif %}"
        f"{END}{{% endgeneration %}}"
        f"{{% else %}}{{{{ message['content'] }}}}{END}{{% endif %}}"
        "{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )


CHAT_TEMPLATE = _template()
