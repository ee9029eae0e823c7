"""The OpenAI-compatible client against a stand-in server this test starts on loopback
(``tests/chat_server.py``): answers, retries (503, 429 + Retry-After, dropped connections), refusals,
the concurrency cap, the rate limit, and the cache that makes an interrupted run resume."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from afm.synth.cache import ResponseCache
from afm.synth.generators import (
    CachedGenerator,
    GenerationError,
    GenerationRequest,
    OpenAIGenerator,
    make_generator,
    retry_after_seconds,
)
from tests.chat_server import ChatStub, serve_chat


@pytest.fixture()
def server():
    stub = ChatStub()
    with serve_chat(stub) as url:
        yield stub, url


def req(text: str, n: int = 1) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": text},), n=n, max_tokens=16, seed=1)


def client(url: str, **kw: Any) -> OpenAIGenerator:
    return OpenAIGenerator(url, "stub-model", api_key="k", backoff_s=0.01, max_backoff_s=0.05, timeout_s=5, **kw)


def test_answers_in_request_order_with_n_samples(server) -> None:
    stub, url = server
    out = client(url).generate([req("a", n=3), req("b")])
    assert out[0].texts == ["echo a #0", "echo a #1", "echo a #2"] and out[1].texts == ["echo b #0"]
    sent = stub.requests[0]
    assert sent["model"] == "stub-model" and sent["n"] in (1, 3) and sent["max_tokens"] == 16


def test_retries_transient_failures(server) -> None:
    stub, url = server
    stub.fail = [503, 429, "drop"]
    gen = client(url, max_concurrency=1)
    assert gen.generate([req("x")])[0].texts == ["echo x #0"]
    assert len(stub.requests) == 4 and gen.retries == 3


def test_refusal_is_not_retried_and_exhaustion_is_an_error(server) -> None:
    stub, url = server
    with pytest.raises(GenerationError, match="refused.*400"):
        client(url).generate([req("FORBIDDEN words")])
    assert len(stub.requests) == 1
    stub.fail = [503] * 10
    with pytest.raises(GenerationError, match="3 attempts"):
        client(url, max_retries=2).generate([req("y")])


def test_concurrency_cap_and_rate_limit(server) -> None:
    stub, url = server
    stub.delay = 0.1
    client(url, max_concurrency=3).generate([req(str(i)) for i in range(9)])
    assert stub.max_active == 3
    stub.delay = 0.0
    start = time.perf_counter()
    client(url, max_concurrency=4, requests_per_minute=600).generate([req(str(i)) for i in range(6)])
    assert time.perf_counter() - start >= 0.4  # 10/s: 5 waits of 0.1 s after the first


def test_cache_resumes_an_interrupted_run(server, tmp_path: Path) -> None:
    stub, url = server
    requests = [req(f"q{i}") for i in range(6)] + [req("FORBIDDEN")]
    cache = ResponseCache(tmp_path / "cache.sqlite")
    gen = CachedGenerator(client(url, max_concurrency=1), cache)
    with pytest.raises(GenerationError):  # the last request stops the first run
        gen.generate(requests)
    assert len(cache) == 6 and len(stub.requests) == 7
    stub.requests.clear()
    again = CachedGenerator(client(url), ResponseCache(tmp_path / "cache.sqlite"))
    out = again.generate(requests[:6] + [req("q6")])
    assert [r["messages"][0]["content"] for r in stub.requests] == ["q6"]  # only the new one is sent
    assert [g.cached for g in out] == [True] * 6 + [False]
    assert out[3].texts == ["echo q3 #0"]


def test_specs_and_headers() -> None:
    assert retry_after_seconds("2") == 2.0 and retry_after_seconds(None) is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    with pytest.raises(ValueError, match="--model"):
        make_generator("openai:http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="expected checkpoint"):
        make_generator("nonsense")
    with pytest.raises(ValueError, match="http"):
        OpenAIGenerator("localhost:8000", "m")
    key_a = req("a").key("m1")
    assert key_a == req("a").key("m1") and key_a != req("a").key("m2")
    assert key_a != GenerationRequest(messages=({"role": "user", "content": "a"},), max_tokens=16, seed=2).key("m1")


def test_a_checkpoint_generator_refuses_or_cuts_and_counts_a_prompt_longer_than_its_window(tmp_path: Path) -> None:
    """A prompt longer than the window leaves beside max_tokens is never cut silently:
    refused by default (one error naming how many and the option), or, with
    ``long_prompts="cut"``, cut to its end and counted; prompts that fit are untouched."""
    from flax import nnx

    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.config import get_config
    from afm.model.transformer import Transformer
    from afm.synth.generators import CheckpointGenerator, GenerationError, GenerationRequest
    from tests.paths import CHAT_TOKENIZER

    save_params(Transformer(get_config("tiny").replace(vocab_size=640, max_seq_len=64), rngs=nnx.Rngs(0)),
                tmp_path / "m")
    long = GenerationRequest([{"role": "user", "content": "word " * 200}], max_tokens=4)
    short = GenerationRequest([{"role": "user", "content": "hi"}], max_tokens=4)
    refuse = CheckpointGenerator(str(tmp_path / "m"), str(CHAT_TOKENIZER))
    with pytest.raises(GenerationError, match=r"1 of 2 prompts .*--long-prompts cut"):
        refuse.generate([short, long])
    assert len(refuse.generate([short])[0].texts) == 1 and refuse.cut_prompts == 0
    cut = CheckpointGenerator(str(tmp_path / "m"), str(CHAT_TOKENIZER), long_prompts="cut")
    out = cut.generate([short, long])
    assert len(out) == 2 and cut.cut_prompts == 1
    with pytest.raises(ValueError, match="long_prompts"):
        CheckpointGenerator(str(tmp_path / "m"), str(CHAT_TOKENIZER), long_prompts="drop")
