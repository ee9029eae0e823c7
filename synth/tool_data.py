"""``afm synth tool``: function-calling data from a library of tool schemas (report
§4.1.2, Tool use).

* **Single calls** -- per tool, ``queries_per_tool`` user requests that need it; for each,
  the generator is shown the oracle tool mixed with ``distractors`` similar tools (word
  overlap of name + description: harder tool selection, as the report does) and asked to
  answer. Kept when the reply calls the oracle tool with arguments that validate against
  its JSON schema (``jsonschema``); otherwise dropped with the reason (no call, wrong
  tool, invalid JSON, schema violation).
* **Parallel calls** -- two single-call requests for different tools joined into one
  request; kept when the reply makes both calls, each valid.
* **Intent detection** -- requests that need no tool (``no_tool_prompts``), asked with
  tools available; kept when the reply calls nothing (this data teaches the model not to
  over-trigger tools).

A reply that stopped for length is never a finished turn (``afm.finish``): it is dropped
as ``cut_reply`` before any check and counted in the manifest's ``cut_replies``.

The kept conversations carry ``tools`` and the assistant's ``tool_calls`` in the chat
format (``afm.model.text.chat``), ready for ``afm sft prepare``. Calls are read from the
reply as the template writes them (``<tool_call>{"name": ..., "arguments": ...}
</tool_call>``), or from a bare JSON object with ``name`` and ``arguments``.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from afm.model.text.chat import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from afm.synth import prompts
from afm.synth.code_data import first_json_list
from afm.synth.generators import GenerationRequest
from afm.synth.run import SynthRun


@dataclass
class ToolConfig:
    queries_per_tool: int = 4
    distractors: int = 3
    parallel: int = 10  # parallel-call examples to build
    temperature: float = 0.7
    max_tokens: int = 384
    seed: int = 0


def fn(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool)


def check_library(tools: list[Any]) -> list[dict[str, Any]]:
    """Tools as OpenAI function schemas; a bad one is an error naming it."""
    from jsonschema import Draft202012Validator

    out, names = [], set()
    for i, t in enumerate(tools):
        f = fn(t) if isinstance(t, dict) else None
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise ValueError(f"tool {i}: expected {{'type': 'function', 'function': {{'name', 'parameters'}}}}")
        if f["name"] in names:
            raise ValueError(f"tool {f['name']!r} is defined twice")
        Draft202012Validator.check_schema(f.get("parameters", {"type": "object"}))
        names.add(f["name"])
        out.append({"type": "function", "function": f})
    return out


def _words(tool: dict[str, Any]) -> set[str]:
    f = fn(tool)
    return set(re.findall(r"[a-z]+", (f["name"].replace("_", " ") + " " + f.get("description", "")).lower()))


def distractors_for(oracle: dict[str, Any], library: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The ``k`` tools most similar to ``oracle`` (Jaccard of name + description words)."""
    base = _words(oracle)
    others = [t for t in library if fn(t)["name"] != fn(oracle)["name"]]
    others.sort(key=lambda t: (-len(base & _words(t)) / max(len(base | _words(t)), 1), fn(t)["name"]))
    return others[:k]


def parse_calls(text: str) -> list[dict[str, Any]] | None:
    """Tool calls in a reply; [] when it makes none; None when a call is malformed JSON."""
    calls = []
    blocks = re.findall(re.escape(TOOL_CALL_OPEN) + r"(.*?)" + re.escape(TOOL_CALL_CLOSE), text, re.S)
    if not blocks:
        stripped = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
        if stripped.startswith("{") and '"name"' in stripped:
            blocks = [stripped]
    for block in blocks:
        try:
            call = json.loads(block)
        except ValueError:
            return None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return None
        args = call.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return None
        calls.append({"name": call["name"], "arguments": args})
    return calls


def check_call(call: dict[str, Any], tool: dict[str, Any]) -> str | None:
    """None when the call names ``tool`` with valid arguments, else the reason."""
    from jsonschema import Draft202012Validator

    if call["name"] != fn(tool)["name"]:
        return "wrong_tool"
    errors = sorted(Draft202012Validator(fn(tool).get("parameters", {"type": "object"})).iter_errors(call["arguments"]),
                    key=lambda e: list(e.path))
    return f"invalid_arguments: {errors[0].message}" if errors else None


def _conversation(cid: str, tools: list[dict[str, Any]], user: str, calls: list[dict[str, Any]] | None,
                  reply: str, kind: str) -> dict[str, Any]:
    assistant: dict[str, Any] = {"role": "assistant", "content": reply}
    if calls:
        assistant = {"role": "assistant", "content": None,
                     "tool_calls": [{"type": "function", "function": c} for c in calls]}
    return {"id": cid, "source": "synthetic-tool", "tools": tools,
            "messages": [{"role": "user", "content": user}, assistant], "meta": {"kind": kind}}


def synth_tool(run: SynthRun, library: list[Any], no_tool_prompts: list[str], cfg: ToolConfig) -> dict[str, Any]:
    library = check_library(library)
    rng = random.Random(cfg.seed)
    reqs = [GenerationRequest(tuple(prompts.tool_queries(t, cfg.queries_per_tool)), temperature=cfg.temperature,
                              max_tokens=cfg.max_tokens, seed=cfg.seed, tag="tool/queries") for t in library]
    queries: list[tuple[dict[str, Any], str]] = []
    for tool, gen in zip(library, run.ask(reqs, "queries")):
        items = first_json_list(gen.texts[0]) or []
        good = [q.strip() for q in items if isinstance(q, str) and q.strip()]
        if not good:
            run.drop("queries", "no_queries", fn(tool)["name"], reply=gen.texts[0][:300])
        queries += [(tool, q) for q in dict.fromkeys(good)][: cfg.queries_per_tool]
    # Single calls, among distractors.
    offers = []
    for tool, _ in queries:
        offered = [tool] + distractors_for(tool, library, cfg.distractors)
        rng.shuffle(offered)
        offers.append(offered)
    replies = run.ask([GenerationRequest(tuple([{"role": "user", "content": q}]), temperature=0.2,
                                         max_tokens=cfg.max_tokens, seed=cfg.seed, tools=tuple(o), tag="tool/call")
                       for (_, q), o in zip(queries, offers)], "single calls")
    singles: list[tuple[dict[str, Any], str, dict[str, Any]]] = []
    for (tool, q), offered, gen in zip(queries, offers, replies):
        for reply in run.finished("single", gen, q):  # a reply cut at max_tokens never trains
            _judge_call(run, "single", [tool], q, offered, reply, singles)
    # Parallel calls: two requests for different tools in one message.
    pairs = [(a, b) for a in singles for b in singles if fn(a[0])["name"] < fn(b[0])["name"]]
    rng.shuffle(pairs)
    pairs = pairs[: cfg.parallel]
    if pairs:
        texts = [f"{a[1]} Also, {b[1][0].lower()}{b[1][1:]}" for a, b in pairs]
        offered_all = [[a[0], b[0]] + distractors_for(a[0], library, max(cfg.distractors - 1, 0)) for a, b in pairs]
        for o in offered_all:
            rng.shuffle(o)
        replies = run.ask([GenerationRequest(tuple([{"role": "user", "content": t}]), temperature=0.2,
                                             max_tokens=cfg.max_tokens, seed=cfg.seed, tools=tuple(o),
                                             tag="tool/parallel")
                           for t, o in zip(texts, offered_all)], "parallel calls")
        for (a, b), text, offered, gen in zip(pairs, texts, offered_all, replies):
            for reply in run.finished("parallel", gen, text):
                _judge_call(run, "parallel", [a[0], b[0]], text, offered, reply, None)
    # Intent detection: no tool needed.
    if no_tool_prompts:
        offered_neg = [rng.sample(library, min(len(library), cfg.distractors + 1)) for _ in no_tool_prompts]
        replies = run.ask([GenerationRequest(tuple(prompts.no_tool_reply(p)), temperature=0.2,
                                             max_tokens=cfg.max_tokens, seed=cfg.seed, tools=tuple(o),
                                             tag="tool/none")
                           for p, o in zip(no_tool_prompts, offered_neg)], "no-tool replies")
        for i, (p, offered, gen) in enumerate(zip(no_tool_prompts, offered_neg, replies)):
            for reply in run.finished("no_tool", gen, p):
                calls = parse_calls(reply)
                if calls:
                    run.drop("no_tool", "called_a_tool", p, calls=calls)
                elif not reply.strip():
                    run.drop("no_tool", "empty_reply", p)
                else:
                    run.keep("no_tool", _conversation(f"none/{i}", offered, p, None, reply.strip(), "no_tool"))
    return {"config": vars(cfg), "tools": len(library)}


def _judge_call(run: SynthRun, kind: str, oracles: list[dict[str, Any]], question: str,
                offered: list[dict[str, Any]], reply: str, accepted: list | None) -> None:
    calls = parse_calls(reply)
    names = [fn(t)["name"] for t in oracles]
    if calls is None:
        run.drop(kind, "malformed_call", question, reply=reply[:300])
        return
    if not calls:
        run.drop(kind, "no_call", question, expected=names)
        return
    if len(calls) != len(oracles):
        run.drop(kind, "wrong_number_of_calls", question, expected=names, got=[c["name"] for c in calls])
        return
    by_name = {fn(t)["name"]: t for t in oracles}
    for call in calls:
        tool = by_name.get(call["name"])
        why = "wrong_tool" if tool is None else check_call(call, tool)
        if why:
            run.drop(kind, why.split(":")[0], question, detail=why, call=call, expected=names)
            return
    cid = f"{kind}/{'+'.join(names)}/{len(run.kept)}"
    run.keep(kind, _conversation(cid, offered, question, calls, "", kind))
    if accepted is not None:
        accepted.append((oracles[0], question, calls[0]))
