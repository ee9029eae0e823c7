"""Pluggable generators for synthetic data: our checkpoint, or any OpenAI-compatible server.

Every synthesis pipeline (``afm.synth.math``, ``code``, ``tool``) talks to a
:class:`Generator`: a list of chat requests in, a list of :class:`Generation` out (``n``
samples each). Three kinds:

* :class:`CheckpointGenerator` -- an afm checkpoint through the KV-cache sampler
  (``afm.model.inference.sampling``), prompts rendered with the chat template; for small runs and
  for the report's setting, where AFM generates its own data. A prompt longer than the
  model's window leaves for the reply (``max_seq_len - max_tokens``) is refused
  (``long_prompts="refuse"``, the default: a :class:`GenerationError` naming how many)
  or, with ``long_prompts="cut"``, cut to its last tokens and counted
  (``cut_prompts``, in every synth manifest): never cut without a word.
* :class:`OpenAIGenerator` -- ``POST {base_url}/chat/completions`` on any
  OpenAI-compatible endpoint (vLLM, TGI, llama.cpp server, a hosted API) for real scale:
  a thread pool with a concurrency cap, a requests-per-minute limit (token bucket),
  retries with exponential backoff and jitter on connection errors, timeouts, 408/409/
  429/5xx (``Retry-After`` honoured), and a clean :class:`GenerationError` for requests
  the server refuses.
* anything else: ``module:factory`` returning an object with ``name`` and ``generate``
  (e.g. a deterministic stand-in in tests).

:class:`CachedGenerator` wraps any of them with a :class:`~afm.synth.cache.ResponseCache`:
answered requests are committed one by one and replayed on the next run (resume).
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from afm.console import make_progress
from afm.imports import resolve
from afm.model.text.chat import tool_call_text
from afm.model.text.tokenizer import Tokenizer
from afm.synth.cache import ResponseCache

OnResult = Callable[[int, "Generation"], None]


class GenerationError(RuntimeError):
    """A request that cannot be answered (refused by the server, or retries exhausted)."""


@dataclass(frozen=True)
class GenerationRequest:
    """One chat request: ``n`` samples of the assistant's next message."""

    messages: tuple[dict[str, Any], ...] | list[dict[str, Any]]
    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int = 0
    tools: tuple[dict[str, Any], ...] = ()  # function schemas offered (tool-use data)
    top_logprobs: int = 0  # also return the k likeliest first tokens' log-probs (a judge read by them)
    tag: str = ""  # which pipeline step asked (statistics only; not part of the key)

    def key(self, model: str) -> str:
        """Everything that determines the answer, hashed."""
        data = {k: v for k, v in asdict(self).items() if k != "tag"}
        data["messages"] = list(self.messages)
        data["stop"] = list(self.stop)
        data["tools"] = list(self.tools)
        if not self.tools:
            del data["tools"]
        if not self.top_logprobs:  # keys of requests without it stay what they were
            del data["top_logprobs"]
        blob = json.dumps({"model": model, **data}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Generation:
    """The ``n`` sampled texts of one request, why each ended (``stop`` / ``length``) and,
    when asked for, each sample's first token's most likely alternatives ``{token: logprob}``."""

    texts: list[str]
    finish: list[str] = field(default_factory=list)
    cached: bool = False
    top_logprobs: list[dict[str, float]] | None = None


@runtime_checkable
class Generator(Protocol):
    name: str  # identifies the model in cache keys

    def generate(self, requests: Sequence[GenerationRequest], on_result: OnResult | None = None
                 ) -> list[Generation]: ...


def _cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


LONG_PROMPTS = ("refuse", "cut")  # what a checkpoint generator does with a prompt longer than its window


class CheckpointGenerator:
    """An afm checkpoint as a generator (chat template, KV-cache sampling, batched)."""

    def __init__(self, checkpoint: str, tokenizer: str | None = None, *, batch_size: int = 16,
                 max_seq_len: int | None = None, long_prompts: str = "refuse"):
        from afm.model.checkpoints.checkpoint import load_model

        if long_prompts not in LONG_PROMPTS:
            raise ValueError(f"long_prompts must be one of {', '.join(LONG_PROMPTS)}, got {long_prompts!r}")
        self.long_prompts = long_prompts
        self.cut_prompts = 0  # prompts cut to the window (long_prompts="cut"), over the generator's life

        self.model, self.cfg = load_model(checkpoint, **({"max_seq_len": max_seq_len} if max_seq_len else {}))
        tok_dir = tokenizer or os.path.join(checkpoint, "tokenizer")
        self.tokenizer = Tokenizer.load(tok_dir)
        if self.tokenizer.vocab_size > self.cfg.vocab_size:
            raise GenerationError(f"tokenizer {tok_dir} has more pieces than the model's vocabulary")
        self.batch_size = batch_size
        self.name = f"afm:{os.path.abspath(checkpoint)}"

    def generate(self, requests: Sequence[GenerationRequest], on_result: OnResult | None = None
                 ) -> list[Generation]:
        from afm.model.inference.sampling import sample

        tok = self.tokenizer
        results: list[Generation | None] = [None] * len(requests)
        groups: dict[tuple[float, float, int, int], list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.temperature, r.top_p, r.max_tokens, r.seed), []).append(i)
        limit = self.cfg.max_seq_len
        for (temperature, top_p, max_tokens, seed), members in groups.items():
            rows: list[tuple[int, list[int]]] = []
            room = limit - max_tokens
            if room < 1:
                raise GenerationError(f"max_tokens {max_tokens} leaves no room for a prompt (model window {limit})")
            prompts = {i: tok.encode_chat(list(requests[i].messages), tools=list(requests[i].tools) or None,
                                          add_generation_prompt=True)[0] for i in members}
            long = [i for i in members if len(prompts[i]) > room]
            if long and self.long_prompts == "refuse":
                raise GenerationError(
                    f"{len(long)} of {len(members)} prompts are longer than the {room} tokens the model's window "
                    f"({limit}) leaves beside max_tokens {max_tokens} (the longest: {max(len(prompts[i]) for i in long)}"
                    "); shorten them, lower max_tokens, or pass --long-prompts cut to keep each one's end (counted)")
            self.cut_prompts += len(long)
            for i in members:
                rows += [(i, prompts[i][-room:])] * requests[i].n  # an over-long prompt keeps its end (counted)
            texts: dict[int, list[str]] = {i: [] for i in members}
            finish: dict[int, list[str]] = {i: [] for i in members}
            for lo in range(0, len(rows), self.batch_size):
                chunk = rows[lo: lo + self.batch_size]
                out = sample(self.model, [p for _, p in chunk], max_new_tokens=max_tokens,
                             temperature=temperature, top_p=top_p, seed=seed + lo,
                             stop_tokens=[tok.end_id, tok.eos_id], pad_id=tok.pad_id)
                for (i, _), ids, stopped in zip(chunk, out.tokens, out.stopped):
                    text, hit = _cut_at_stop(tok.decode([t for t in ids if t not in (tok.end_id, tok.eos_id)]),
                                             requests[i].stop)
                    texts[i].append(text)
                    finish[i].append("stop" if stopped or hit else "length")
            tops = self._first_tokens([i for i in members if requests[i].top_logprobs],
                                      {i: p for i, p in rows}, requests)
            for i in members:
                results[i] = Generation(texts[i], finish[i],
                                        top_logprobs=[tops[i]] * len(texts[i]) if i in tops else None)
                if on_result:
                    on_result(i, results[i])
        return [r for r in results if r is not None]

    def _first_tokens(self, asked: list[int], prompts: dict[int, list[int]],
                      requests: Sequence[GenerationRequest]) -> dict[int, dict[str, float]]:
        """The first token's top log-probs of each asked request, the token as its text."""
        from afm.model.inference.sampling import first_token_logprobs

        out: dict[int, dict[str, float]] = {}
        for lo in range(0, len(asked), self.batch_size):
            chunk = asked[lo: lo + self.batch_size]
            k = max(requests[i].top_logprobs for i in chunk)
            for i, pairs in zip(chunk, first_token_logprobs(self.model, [prompts[i] for i in chunk], k,
                                                            self.tokenizer.pad_id)):
                top: dict[str, float] = {}
                for token, lp in pairs[: requests[i].top_logprobs]:
                    top.setdefault(self.tokenizer.decode([token]), lp)  # the likelier of two with one text
                out[i] = top
        return out


class RateLimiter:
    """At most ``per_minute`` acquisitions per minute, smoothly (a token bucket)."""

    def __init__(self, per_minute: float | None):
        self.rate = (per_minute or 0) / 60.0
        self.tokens = 1.0
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def acquire(self) -> None:
        if self.rate <= 0:
            return
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(max(1.0, self.rate), self.tokens + (now - self.last) * self.rate)
                self.last = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                wait = (1 - self.tokens) / self.rate
            time.sleep(wait)


RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header (seconds or an HTTP date) in seconds, or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAIGenerator:
    """``/chat/completions`` of an OpenAI-compatible server; see the module docstring."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, max_concurrency: int = 8,
                 requests_per_minute: float | None = None, max_retries: int = 6, timeout_s: float = 120.0,
                 backoff_s: float = 1.0, max_backoff_s: float = 60.0, extra_body: dict[str, Any] | None = None):
        import httpx

        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{self.base_url}:{model}"
        key = api_key if api_key is not None else os.environ.get("AFM_SYNTH_API_KEY", os.environ.get("OPENAI_API_KEY"))
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(timeout=timeout_s, headers=headers,
                                   limits=httpx.Limits(max_connections=max_concurrency))
        self.max_concurrency = max(1, max_concurrency)
        self.limiter = RateLimiter(requests_per_minute)
        self.max_retries = max_retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.extra_body = dict(extra_body or {})
        self.retries = 0  # statistics: retried attempts over the generator's life

    def _payload(self, r: GenerationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": list(r.messages), "n": r.n,
                                "temperature": r.temperature, "top_p": r.top_p, "max_tokens": r.max_tokens,
                                "seed": r.seed, **self.extra_body}
        if r.stop:
            body["stop"] = list(r.stop)
        if r.tools:
            body["tools"] = list(r.tools)
        if r.top_logprobs:
            body["logprobs"], body["top_logprobs"] = True, r.top_logprobs
        return body

    def _one(self, r: GenerationRequest) -> Generation:
        import httpx

        url = f"{self.base_url}/chat/completions"
        last = ""
        for attempt in range(self.max_retries + 1):
            self.limiter.acquire()
            wait: float | None = None
            try:
                resp = self.client.post(url, json=self._payload(r))
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 200:
                    return self._parse(resp, r)
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code not in RETRY_STATUS:
                    raise GenerationError(f"{url} refused the request ({last})")
                wait = retry_after_seconds(resp.headers.get("retry-after"))
            if attempt == self.max_retries:
                break
            self.retries += 1
            if wait is None:
                wait = min(self.max_backoff_s, self.backoff_s * 2 ** attempt) * (0.5 + random.random() / 2)
            time.sleep(min(wait, self.max_backoff_s))
        raise GenerationError(f"{url}: no answer after {self.max_retries + 1} attempts ({last})")

    @staticmethod
    def _parse(resp: Any, r: GenerationRequest) -> Generation:
        try:
            data = resp.json()
            choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
            # Tool calls come back as structured fields; written the way the chat template
            # writes them, so every generator's replies read the same.
            texts = [(c["message"].get("content") or "")
                     + "".join(tool_call_text(t) for t in c["message"].get("tool_calls") or [])
                     for c in choices]
            finish = [c.get("finish_reason") or "stop" for c in choices]
            tops = None
            if r.top_logprobs:  # the first token's alternatives; none returned: an empty dict
                tops = []
                for c in choices:
                    content = ((c.get("logprobs") or {}).get("content") or [{}])
                    tops.append({t["token"]: float(t["logprob"]) for t in content[0].get("top_logprobs") or []})
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise GenerationError(f"malformed chat completion response ({exc}): {resp.text[:300]}") from None
        if len(texts) != r.n:
            raise GenerationError(f"asked for n={r.n} samples, the server returned {len(texts)}")
        return Generation(texts, finish, top_logprobs=tops)

    def generate(self, requests: Sequence[GenerationRequest], on_result: OnResult | None = None
                 ) -> list[Generation]:
        results: list[Generation | None] = [None] * len(requests)
        with ThreadPoolExecutor(self.max_concurrency) as pool:
            futures = {pool.submit(self._one, r): i for i, r in enumerate(requests)}
            try:
                for fut in as_completed(futures):
                    i = futures[fut]
                    results[i] = fut.result()
                    if on_result:
                        on_result(i, results[i])  # type: ignore[arg-type]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
        return [r for r in results if r is not None]

    def close(self) -> None:
        self.client.close()


class CachedGenerator:
    """Any generator plus a persistent cache: answered requests are replayed, new ones
    are committed as they complete (so an interrupted run resumes where it stopped)."""

    def __init__(self, inner: Generator, cache: ResponseCache):
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.generated = 0

    def generate(self, requests: Sequence[GenerationRequest], on_result: OnResult | None = None
                 ) -> list[Generation]:
        results: list[Generation | None] = [None] * len(requests)
        keys = [r.key(self.name) for r in requests]
        missing = []
        for i, key in enumerate(keys):
            hit = self.cache.get(key)
            if hit is not None:
                results[i] = Generation(hit["texts"], hit["finish"], cached=True, top_logprobs=hit.get("top_logprobs"))
                if on_result:
                    on_result(i, results[i])  # type: ignore[arg-type]
            else:
                missing.append(i)

        def store(j: int, gen: Generation) -> None:
            i = missing[j]
            entry: dict[str, Any] = {"texts": gen.texts, "finish": gen.finish}
            if gen.top_logprobs is not None:
                entry["top_logprobs"] = gen.top_logprobs
            self.cache.put(keys[i], entry)
            self.generated += 1
            results[i] = gen
            if on_result:
                on_result(i, gen)

        if missing:
            self.inner.generate([requests[i] for i in missing], on_result=store)
        return [r for r in results if r is not None]


def make_generator(spec: str, *, model: str | None = None, tokenizer: str | None = None,
                   cache: str | None = None, **options: Any) -> Generator:
    """A generator from a command-line spec:

    * ``checkpoint:PATH`` (``--tokenizer`` or ``PATH/tokenizer``; ``long_prompts``: refuse or
      cut a prompt longer than the model's window),
    * ``openai:URL`` with ``model`` (e.g. ``openai:http://localhost:8000/v1``),
    * ``module:factory`` -- ``factory(**options)`` returns a generator.

    With ``cache`` (a file path) it is wrapped in :class:`CachedGenerator`."""
    kind, _, rest = spec.partition(":")
    gen: Any
    if kind == "checkpoint" and rest:
        gen = CheckpointGenerator(rest, tokenizer, **{k: v for k, v in options.items()
                                                       if k in ("batch_size", "max_seq_len", "long_prompts")})
    elif kind == "openai" and rest:
        if not model:
            raise ValueError("openai:URL needs --model (the name the server knows the model by)")
        gen = OpenAIGenerator(rest, model, **{k: v for k, v in options.items() if k in (
            "api_key", "max_concurrency", "requests_per_minute", "max_retries", "timeout_s", "backoff_s",
            "max_backoff_s", "extra_body")})
    elif rest and ":" not in rest and kind:
        gen = resolve(spec, what="generator")(**{k: v for k, v in options.items() if k != "long_prompts"})
    else:
        raise ValueError(f"generator {spec!r}: expected checkpoint:PATH, openai:URL or module:factory")
    if not isinstance(gen, Generator):
        raise TypeError(f"generator {spec!r} has no name/generate")
    return CachedGenerator(gen, ResponseCache(cache)) if cache else gen


def generate_texts(gen: Generator, requests: Sequence[GenerationRequest], *, label: str = "generate",
                   progress: bool = True) -> list[Generation]:
    """Run ``requests`` with a progress bar (requests done / total)."""

    if not requests:
        return []
    if not progress:
        return gen.generate(requests)
    with make_progress() as bar:
        task = bar.add_task(label, total=len(requests), rate="")
        return gen.generate(requests, on_result=lambda i, g: bar.advance(task))
