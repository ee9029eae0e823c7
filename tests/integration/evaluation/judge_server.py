"""A judge behind an OpenAI-compatible ``/v1/chat/completions`` on loopback, for the tests:
the shared chat stand-in (``tests/chat_server.py``) answering by a judge's rules.

It reads the judge prompts afm sends (``afm.evaluation.posttrain.judges.prompts``) and
answers by fixed rules, so every verdict a test expects is known in advance:

* pairwise: the answer containing ``GOOD`` wins (``GREAT``: significantly), else the longer
  one, equal lengths tie -- verdict ``[[A>B]]`` etc.;
* AlpacaEval's weighted annotator (a request with ``logprobs``): the same rule picks model
  ``m`` or ``M``; the reply is that token, and its top log-probs hold it (and ``The``);
* single-answer: ``Rating: [[8]]`` when the response contains ``GOOD``, else ``[[3]]``;
* refusal classes: ``[[2_full_refusal]]`` when the response opens with "I can't", else
  ``[[1_full_compliance]]``; harm: ``[[YES]]`` when the response contains ``Sure``.

And it fails on purpose: a request mentioning ``FAIL-JUDGE`` gets HTTP 500, ``SLOW-JUDGE``
is answered after ``slow_s`` seconds (past the client's timeout), ``NO-VERDICT`` gets a
judgment without a label.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.chat_server import ChatStub, choice, completion, serve_chat


def _between(text: str, start: str, end: str) -> str:
    m = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), text, re.S)
    return m.group(1) if m else ""


def _better(a: str, b: str) -> int:
    """1 when ``a`` wins, -1 when ``b`` does, 0 for a tie (GOOD, else the longer)."""
    score_a, score_b = ("GOOD" in a or "GREAT" in a), ("GOOD" in b or "GREAT" in b)
    if score_a != score_b:
        return 1 if score_a else -1
    return (len(a) > len(b)) - (len(a) < len(b))


def annotator_token(user: str) -> str:
    """AlpacaEval's prompt: the identifier of the better output (``m`` on a tie)."""
    outputs = re.findall(r'"output": """(.*?)"""', user, re.S)
    return "m" if _better(outputs[0], outputs[1]) >= 0 else "M"


def verdict(user: str) -> str:
    """The judgment of the judge prompt ``user``, by the rules above."""
    if "NO-VERDICT" in user:
        return "Both answers have merits; I cannot decide."
    if "<|The Start of Assistant A's Answer|>" in user:
        a = _between(user, "<|The Start of Assistant A's Answer|>", "<|The End of Assistant A's Answer|>")
        b = _between(user, "<|The Start of Assistant B's Answer|>", "<|The End of Assistant B's Answer|>")
        score_a, score_b = ("GOOD" in a or "GREAT" in a), ("GOOD" in b or "GREAT" in b)
        if score_a != score_b:
            strong = "GREAT" in (a if score_a else b)
            label = ("A>>B" if strong else "A>B") if score_a else ("B>>A" if strong else "B>A")
        elif len(a) != len(b):
            label = "A>B" if len(a) > len(b) else "B>A"
        else:
            label = "A=B"
        return f"My own answer first... Comparing both. My final verdict is: [[{label}]]"
    if "[The Start of the Assistant's Response]" in user:
        response = _between(user, "[The Start of the Assistant's Response]", "[The End of the Assistant's Response]")
        return f"Assessment done. Rating: [[{8 if 'GOOD' in response else 3}]]"
    if "CLASS:" in user:
        response = user.split('RESPONSE: "', 1)[1]
        return "[[2_full_refusal]]" if response.startswith("I can't") else "[[1_full_compliance]]"
    if "[BEHAVIOR]" in user:
        return "[[YES]]" if "Sure" in user.split("[RESPONSE]", 1)[1] else "[[NO]]"
    return "no rule for this prompt"


class JudgeStub(ChatStub):
    """The chat stand-in answering every request as the judge: a status, a delay or
    log-probabilities by what the request holds (see the module's docstring)."""

    def __init__(self, slow_s: float = 3.0) -> None:
        super().__init__()
        self.slow_s = slow_s

    def respond(self, body: dict[str, Any]) -> tuple[int, Any]:
        user = body["messages"][-1]["content"]
        if "FAIL-JUDGE" in user:
            return 500, {"error": "judge down"}
        if "SLOW-JUDGE" in user:
            time.sleep(self.slow_s)
        if body.get("logprobs"):
            token = annotator_token(user)
            top = [{"token": token, "logprob": -0.01}, {"token": "The", "logprob": -5.0}]
            logprobs = {"content": [{"token": token, "logprob": -0.01, "top_logprobs": top}]}
            return 200, completion([choice(0, token, "length", logprobs=logprobs)])
        return 200, completion([choice(0, verdict(user))])


@contextmanager
def judge_server(slow_s: float = 3.0) -> Iterator[tuple[JudgeStub, str]]:
    """A running judge on 127.0.0.1 and its base URL (``http://127.0.0.1:PORT/v1``)."""
    stub = JudgeStub(slow_s)
    with serve_chat(stub) as url:
        yield stub, url
