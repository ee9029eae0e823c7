"""The checkpoint under evaluation as a synth :class:`~afm.synth.generators.Generator`.

Post-training tasks send chat requests (messages, tool schemas) and read replies, so they
speak the generator interface ``afm synth`` already has; judges are generators too (an
OpenAI-compatible endpoint or another checkpoint), and one request type, one cache and
one reply format serve both. Here the generator is the :class:`InferenceEngine` that
``afm eval`` already loaded (its mesh and dtype, no second copy of the weights): each
request is rendered with the chat template (``afm.model.text.chat`` through the tokenizer, tool
schemas in the system turn), decoded greedily or sampled until ``<|end|>`` or EOS, and the
reply is the text before it, tool calls written as the template writes them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from afm.synth.generators import Generation, GenerationRequest, OnResult


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """``text`` before the first stop string, and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


class EngineGenerator:
    """``generate(requests)`` on a loaded engine with the model's chat template."""

    def __init__(self, engine: Any, tokenizer: Any, name: str):
        self.engine = engine
        self.tok = tokenizer
        self.name = f"afm-eval:{name}"
        self.clamped = False  # some request asked for more new tokens than the window allows

    def prompt_ids(self, request: GenerationRequest, room: int) -> list[int]:
        ids = self.tok.encode_chat(list(request.messages), tools=list(request.tools) or None,
                                   add_generation_prompt=True)[0]
        return ids[-room:]  # keep the end (the question and the assistant marker) of an over-long prompt

    def generate(self, requests: Sequence[GenerationRequest], on_result: OnResult | None = None
                 ) -> list[Generation]:
        window = self.engine.max_length
        groups: dict[tuple[float, float, int, int], list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            groups[(r.temperature, r.top_p, r.max_tokens, r.seed)].append(i)
        results: list[Generation | None] = [None] * len(requests)
        for (temperature, top_p, max_tokens, seed), members in groups.items():
            if max_tokens >= window:
                self.clamped, max_tokens = True, max(1, window // 2)
            rows = [(i, self.prompt_ids(requests[i], window - max_tokens))
                    for i in members for _ in range(requests[i].n)]
            new = self.engine.generate([p for _, p in rows], max_new_tokens=max_tokens,
                                       stop_token_ids=[self.tok.end_id, self.tok.eos_id],
                                       temperature=temperature, top_p=top_p, seed=seed, pad_id=self.tok.pad_id)
            texts: dict[int, list[str]] = defaultdict(list)
            finish: dict[int, list[str]] = defaultdict(list)
            for (i, _), ids in zip(rows, new):
                text, hit = cut_at_stop(self.tok.decode(ids), requests[i].stop)
                texts[i].append(text)
                finish[i].append("stop" if hit or len(ids) < max_tokens else "length")
            for i in members:
                results[i] = Generation(texts[i], finish[i])
                if on_result:
                    on_result(i, results[i])  # type: ignore[arg-type]
        return [r for r in results if r is not None]
