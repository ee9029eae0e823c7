"""A stand-in chat model behind an OpenAI-compatible ``/v1/chat/completions`` on loopback,
for the tests of every tier: the synth generator client's tests talk to it as a
generator, ``afm quality annotate``'s as a rubric judge, the evaluation judges' tests as
an LLM judge (``tests/integration/evaluation/judge_server.py``). One server, so each
client is tested against the same wire format.

By default it echoes the prompt (``echo <prompt> #<i>`` for each of ``n`` choices); a
judge passes its rules as ``reply``, or overrides :meth:`ChatStub.respond` when it answers
per request in other ways (a status, a delay, log-probabilities). A test changes its
behaviour through the attributes: ``fail`` (per incoming request: a status to answer with
``Retry-After: 0``, or ``"drop"`` to close the connection), ``refuse_word`` (a prompt
holding it is refused with HTTP 400, as content policies do) and ``delay``; it reads back
``requests``, ``prompts`` and ``max_active``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[str, int], str]  # (prompt, index of the choice) -> the assistant's text


def echo(prompt: str, i: int) -> str:
    """The default model: says back what it was asked, numbered per choice."""
    return f"echo {prompt} #{i}"


def choice(index: int, text: str, finish_reason: str = "stop", **extra: Any) -> dict[str, Any]:
    """One choice of a chat completion: the assistant's ``text`` (``extra``: ``logprobs``)."""
    return {"index": index, "message": {"role": "assistant", "content": text},
            "finish_reason": finish_reason, **extra}


def completion(choices: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``chat.completion`` body holding ``choices``."""
    return {"id": "x", "object": "chat.completion", "choices": choices}


class ChatStub:
    """Behaviour of the stand-in, changed by each test; what it was sent, read back."""

    def __init__(self, reply: Reply = echo) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.fail: list[int | str] = []  # per incoming request: status to answer, or "drop"
        self.refuse_word = "FORBIDDEN"
        self.delay = 0.0
        self.active = 0
        self.max_active = 0
        self.lock = threading.Lock()

    @property
    def prompts(self) -> list[str]:
        """The last message of every request received, in arrival order."""
        with self.lock:
            return [r["messages"][-1]["content"] for r in self.requests]

    def respond(self, body: dict[str, Any]) -> tuple[int, Any]:
        """The status and JSON body for a request the scripted ``fail`` let through: a
        refusal when the prompt holds ``refuse_word``, else ``reply`` for each of ``n``
        choices. A stand-in that answers otherwise (the evaluation judge) overrides this."""
        prompt = body["messages"][-1]["content"]
        if self.refuse_word and self.refuse_word in prompt:
            return 400, {"error": {"message": "content policy"}}
        return 200, completion([choice(i, self.reply(prompt, i)) for i in range(body.get("n", 1))])


def _handler(stub: ChatStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with stub.lock:
                stub.requests.append(body)
                action = stub.fail.pop(0) if stub.fail else 200
                stub.active += 1
                stub.max_active = max(stub.max_active, stub.active)
            self._active = True
            try:
                time.sleep(stub.delay)
                self._answer(body, action)
            finally:
                self._done()

        def _answer(self, body: dict[str, Any], action: int | str) -> None:
            if self.path != "/v1/chat/completions":
                return self._send(404, {"error": "no such route"})
            if action == "drop":
                self.connection.close()
                return
            if action != 200:
                return self._send(int(action), {"error": "busy"}, {"Retry-After": "0"})
            self._send(*stub.respond(body))

        def _done(self) -> None:
            """No longer active: before the response leaves (the client may send its next
            request the moment it has this one), and at the latest when the handler ends."""
            with stub.lock:
                if self._active:
                    stub.active -= 1
                    self._active = False

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self._done()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to answer

    return Handler


@contextmanager
def serve_chat(stub: ChatStub) -> Iterator[str]:
    """``stub`` serving on 127.0.0.1 while the block runs; yields its base URL
    (``http://127.0.0.1:PORT/v1``, what ``openai:<url>`` names). Closing does not wait for
    a handler still answering a client that gave up (a deliberately slow reply)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


__all__ = ["ChatStub", "Reply", "choice", "completion", "echo", "serve_chat"]
