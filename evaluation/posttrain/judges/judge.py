"""A judge: who grades a post-trained model's replies, and how its failures are kept apart.

A judge is a synth generator (``afm.synth.generators``): an OpenAI-compatible endpoint
(``openai:URL`` with ``--judge-model``; the client with its concurrency cap, rate limit,
retries, timeouts and ``Retry-After`` handling) or a local afm checkpoint
(``checkpoint:PATH``; its judgments capped at half its window, and a prompt that does not
fit beside them failed rather than cut, since a judge prompt without its beginning has lost
its instructions), optionally behind the response cache, so a re-run replays every
judgment already made. A reward model written by ``afm rm train`` (``rm:PATH``) can stand in
for pairwise grading; it scores each answer instead of writing a verdict and is reported
as such.

Every request a judge cannot answer (refused, timed out, retries exhausted) comes back as a
:class:`JudgeReply` with ``error`` set instead of raising: the task reports how many
judgments failed and scores only the rest, so a failure is never counted as a win (nor as
a safe reply). An endpoint judge is asked one request at a time on a thread pool (its
concurrency cap), so one failure costs one judgment, not the batch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from afm.errors import UserError
from afm.synth.generators import GenerationError, GenerationRequest, Generator, make_generator

JUDGE_SPECS = "openai:URL (with --judge-model), checkpoint:PATH or rm:PATH"


class JudgeError(UserError):
    """A judge that cannot be set up (bad spec, missing model name, unreadable checkpoint)."""


@dataclass(frozen=True)
class JudgeReply:
    """The judge's text for one request, or why there is none."""

    text: str | None
    error: str | None = None
    cached: bool = False
    top_logprobs: dict[str, float] | None = None  # the first token's alternatives, when asked for

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None


@dataclass
class JudgeSettings:
    spec: str
    model: str | None = None  # the endpoint's model name (openai:URL)
    cache: str | None = None  # SQLite response cache path
    max_concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 3
    max_tokens: int = 1024
    temperature: float = 0.0
    tokenizer: str | None = None  # for checkpoint:PATH / rm:PATH


class Judge:
    """A generator that writes judgments; :meth:`ask` never raises for one bad request."""

    kind = "model"

    def __init__(self, generator: Generator, *, name: str, per_request: bool, max_concurrency: int = 8,
                 max_tokens: int = 1024, temperature: float = 0.0,
                 too_long: Callable[[Sequence[dict[str, Any]], int], str | None] | None = None):
        self.generator = generator
        self.name = name
        self.per_request = per_request
        self.max_concurrency = max(1, max_concurrency)
        self.max_tokens = max_tokens
        self.temperature = temperature
        # (messages, max_tokens) -> why the prompt does not fit the judge's window, or None
        self.too_long = too_long

    def describe(self) -> dict[str, Any]:
        return {"judge": self.name, "kind": self.kind, "max_tokens": self.max_tokens}

    def request(self, messages: Sequence[dict[str, Any]], max_tokens: int | None = None, *,
                top_logprobs: int = 0, temperature: float | None = None) -> GenerationRequest:
        return GenerationRequest(tuple(messages), max_tokens=min(max_tokens or self.max_tokens, self.max_tokens),
                                 temperature=self.temperature if temperature is None else temperature,
                                 top_logprobs=top_logprobs, tag="judge")

    def ask(self, conversations: Sequence[Sequence[dict[str, Any]]], max_tokens: int | None = None,
            **options: Any) -> list[JudgeReply]:
        if self.too_long is not None:  # a cut judge prompt loses its instructions: fail it instead
            why = [self.too_long(c, max_tokens or self.max_tokens) for c in conversations]
            keep = [i for i, w in enumerate(why) if w is None]
            asked = iter(self._ask([conversations[i] for i in keep], max_tokens, **options))
            return [JudgeReply(None, w) if w is not None else next(asked) for w in why]
        return self._ask(conversations, max_tokens, **options)

    def ask_logprobs(self, conversations: Sequence[Sequence[dict[str, Any]]], *, top_logprobs: int,
                     max_tokens: int = 1, temperature: float = 1.0) -> list[JudgeReply]:
        """Each request's first reply token's ``top_logprobs`` likeliest alternatives
        (``{token: logprob}``): a judge read by its log-probabilities (AlpacaEval's weighted
        annotator). A reply without them is a failure, never a preference."""
        replies = self.ask(conversations, max_tokens, top_logprobs=top_logprobs, temperature=temperature)
        return [r if not r.ok or r.top_logprobs else
                JudgeReply(r.text, "the judge returned no log-probabilities (does the server support logprobs?)",
                           r.cached) for r in replies]

    def _ask(self, conversations: Sequence[Sequence[dict[str, Any]]], max_tokens: int | None,
             **options: Any) -> list[JudgeReply]:
        requests = [self.request(c, max_tokens, **options) for c in conversations]
        if not requests:
            return []

        def reply(g: Any) -> JudgeReply:
            return JudgeReply(g.texts[0], cached=g.cached, top_logprobs=(g.top_logprobs or [None])[0])

        if not self.per_request:
            try:
                gens = self.generator.generate(requests)
            except GenerationError as exc:
                return [JudgeReply(None, f"{type(exc).__name__}: {exc}") for _ in requests]
            return [reply(g) for g in gens]

        def one(r: GenerationRequest) -> JudgeReply:
            try:
                (g,) = self.generator.generate([r])
            except GenerationError as exc:
                return JudgeReply(None, str(exc))
            return reply(g)

        with ThreadPoolExecutor(self.max_concurrency) as pool:
            return list(pool.map(one, requests))


class RewardJudge:
    """A reward model as a pairwise judge: the answer with the higher reward wins (equal
    rewards tie). It writes no verdict text, so it grades pairs only, and results say so."""

    kind = "reward model"

    def __init__(self, scorer: Any, name: str):
        self.scorer = scorer
        self.name = name

    def describe(self) -> dict[str, Any]:
        return {"judge": self.name, "kind": self.kind}

    @property
    def reason(self) -> str:
        """Why the last call left rewards NaN (the scorer's ``last_reasons``), or ''."""
        reasons = getattr(self.scorer, "last_reasons", None) or {}
        return "; ".join(f"{k}: {v}" for k, v in reasons.items())

    def rewards(self, conversations: Sequence[list[dict[str, Any]]], replies: Sequence[str]) -> list[float]:
        """One reward per reply; NaN where the scorer cannot score it (see :attr:`reason`)."""
        return [float(r) for r in self.scorer(list(conversations), list(replies))]


def check_spec(settings: JudgeSettings) -> tuple[str, str]:
    """``(kind, rest)`` of a well-formed ``--judge``; :class:`JudgeError` otherwise. Cheap:
    the command calls it before any model loads."""
    spec = settings.spec
    kind, _, rest = spec.partition(":")
    if kind not in ("openai", "checkpoint", "rm") or not rest:
        raise JudgeError(f"--judge {spec!r}: expected {JUDGE_SPECS}")
    if kind == "openai" and not rest.startswith(("http://", "https://")):
        raise JudgeError(f"--judge {spec!r}: the URL must start with http:// or https://")
    if kind == "openai" and not settings.model:
        raise JudgeError("--judge openai:URL needs --judge-model (the name the server knows the model by)")
    if kind in ("checkpoint", "rm") and not os.path.isdir(rest):
        raise JudgeError(f"--judge {spec!r}: no directory {rest}")
    return kind, rest


def check_reachable(settings: JudgeSettings, timeout_s: float = 10.0) -> None:
    """An ``openai:URL`` judge must have a server behind it: one GET of ``URL/models`` before
    any model loads (any HTTP answer, even an error status, counts; only no answer fails),
    so a wrong port or a server not started yet is one line, not a run of failed judgments."""
    kind, url = check_spec(settings)
    if kind != "openai":
        return
    import httpx

    try:
        httpx.get(url.rstrip("/") + "/models", timeout=min(timeout_s, settings.timeout_s))
    except (httpx.TimeoutException, httpx.TransportError) as exc:
        raise JudgeError(f"--judge {settings.spec}: no server answers there ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}); start the judge's "
                         "OpenAI-compatible server or fix the URL") from None


def make_judge(settings: JudgeSettings) -> Judge | RewardJudge:
    """A judge from ``--judge`` and its options (see :data:`JUDGE_SPECS`)."""
    spec = settings.spec
    kind, rest = check_spec(settings)
    if kind == "rm":
        return _reward_judge(rest, settings.tokenizer)
    try:
        gen = make_generator(spec, model=settings.model, tokenizer=settings.tokenizer, cache=settings.cache,
                             max_concurrency=settings.max_concurrency, timeout_s=settings.timeout_s,
                             max_retries=settings.max_retries)
    except (ValueError, TypeError) as exc:
        raise JudgeError(f"--judge {spec!r}: {exc}") from None
    name = f"{spec}" + (f" ({settings.model})" if settings.model else "")
    max_tokens, too_long = settings.max_tokens, None
    if kind == "checkpoint":
        max_tokens, too_long = _window_rule(getattr(gen, "inner", gen), settings.max_tokens)
    return Judge(gen, name=name, per_request=kind == "openai", max_concurrency=settings.max_concurrency,
                 max_tokens=max_tokens, temperature=settings.temperature, too_long=too_long)


def _window_rule(model: Any, max_tokens: int) -> tuple[int, Callable[[Sequence[dict[str, Any]], int], str | None]]:
    """A checkpoint judge's judgment length (at most half its window) and the check that a
    prompt fits beside it: the generator would keep only a prompt's end, and a judge prompt
    without its beginning has lost its instructions."""
    window = int(model.cfg.max_seq_len)
    max_tokens = max(1, min(max_tokens, window // 2))

    def too_long(messages: Sequence[dict[str, Any]], new_tokens: int) -> str | None:
        n = len(model.tokenizer.encode_chat(list(messages), add_generation_prompt=True)[0])
        room = window - min(new_tokens, max_tokens)
        return None if n <= room else f"judge prompt of {n} tokens does not fit the judge's window ({room} of {window})"

    return max_tokens, too_long


def _reward_judge(path: str, tokenizer: str | None) -> RewardJudge:
    """``afm rm train``'s output, loaded through its own scorer (training sits below
    evaluation; a host without the training stack says so)."""
    if not os.path.isfile(os.path.join(path, "reward_model.json")):
        raise JudgeError(f"--judge rm:{path}: not a reward model (no reward_model.json)")
    try:
        from afm.training.rl.reward_model import RewardModelScorer
    except ImportError as exc:
        raise JudgeError(f"--judge rm:{path}: this installation has no reward-model scorer ({exc})") from None
    return RewardJudge(RewardModelScorer(path, tokenizer), name=f"rm:{path}")
