"""The conversation between the candidate's process and the referee's (stdlib only;
shipped into both, like ``plain.py``).

Two pipes, one JSON object per line. The referee asks (call this function of the
program, read that attribute, take ``len`` of this object, ...) and the candidate answers
with a value or the exception it raised; while an answer is pending either side may ask
the other in turn (the program calls a ``key=`` function of the test, which calls the
program again, ...), up to ``MAX_NESTING`` levels. Every message first carries the
changes to mirrored containers (``plain.Wire.sync_out``) and last the keys its sender
forgot (``plain.Wire.take_drops``).

* request ``{"q": id, "op": name, "a": [args], "k": [name, value, ...]}``;
* reply ``{"r": id, "v": value}``, ``{"r": id, "e": exception}``, or ``{"r": id, "u": why}``
  when the value cannot be sent within the wire's bounds;
* ``{"ready": true, "names": [...]}`` once, from the candidate, after the program ran
  (``{"ready": false, "e": exception}`` when it raised);
* any message of the candidate's may carry what the program printed since the last one
  (``"po"``, ``"pe"``: stdout, stderr), for a test that captures it; the program's reads of
  stdin are requests (``stdin``) answered from the test's ``sys.stdin``.

Lines are capped (``cap`` bytes) on both sides: a side that would send more answers ``u``
instead, and a side that receives more stops. What a side cannot take (a line over the
cap, a value out of format, a value it refuses, the other side gone) goes to ``fail``,
which does not return: the referee ends the judgement there with its verdict, the
candidate ends.
"""

import _thread
import os

import afm.sandbox.plain as plain

MAX_NESTING = 64
READ_CHUNK = 1 << 20


class Channel:
    """One side of the conversation: ``handler(op, args, kwargs)`` answers the other
    side's requests; ``fail(kind, detail)`` is called (and never returns) when the
    conversation cannot go on: ``closed``, ``garbled``, ``too-large``, ``refused``."""

    def __init__(self, read_fd: int, write_fd: int, wire: plain.Wire, handler, fail, cap: int,
                 strict: bool = False, outbound=None, inbound=None) -> None:
        self.read_fd, self.write_fd, self.wire, self.handler, self.fail = read_fd, write_fd, wire, handler, fail
        self.cap = cap
        self.strict = strict  # a value this side cannot send ends the conversation (the referee)
        self.outbound = outbound  # () -> fields every message carries (the program's printed text)
        self.inbound = inbound  # (message) -> None, for those fields
        self.buffer = bytearray()
        self.scanned = 0
        self.next_id = 1
        self.nesting = 0
        self.thread = _thread.get_ident()
        self.requests = 0
        self.broken = ""  # why the conversation is out of step (an answer never taken)

    # -- lines ---------------------------------------------------------------------------
    def _line(self) -> bytes:
        while True:
            end = self.buffer.find(b"\n", self.scanned)
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                self.scanned = 0
                return line
            self.scanned = len(self.buffer)
            if len(self.buffer) > self.cap:
                self.fail("too-large", f"a message over {self.cap} bytes")
            try:
                chunk = os.read(self.read_fd, READ_CHUNK)
            except OSError as exc:
                if exc.errno is None:  # raised by a signal handler (TimeoutError, say), not by the read
                    raise
                self.fail("closed", f"reading: {exc.strerror}")
            if not chunk:
                self.fail("closed", "the other side ended")
            self.buffer += chunk

    def _write(self, message: dict) -> bool:
        """False when the line would be over the cap (nothing written)."""
        try:
            line = plain.dumps(message) + b"\n"
        except (ValueError, TypeError, RecursionError) as exc:
            self.fail("garbled", f"cannot write a message: {exc}")
        if len(line) > self.cap:
            return False
        view = memoryview(line)
        try:
            while view:
                view = view[os.write(self.write_fd, view):]
        except OSError as exc:
            if exc.errno is None:  # raised by a signal handler, not by the write: out of step now
                self.broken = "the test interrupted a message to the program (a signal, a timeout)"
                raise
            self.fail("closed", f"writing: {exc.strerror}")
        return True

    # -- messages ------------------------------------------------------------------------
    def send(self, head: dict, payload) -> None:
        """``head`` plus what ``payload()`` encodes, with the changes before it and the
        forgotten keys after it. A payload over the wire's bounds becomes ``u``."""
        wire = self.wire
        sync = wire.sync_out()
        try:
            body = payload()
        except Exception as exc:  # noqa: BLE001 - TooLarge, RecursionError, a class that cannot be read
            if self.strict:
                self.fail("too-large", f"cannot send a value: {type(exc).__name__}: {exc}"[:300])
            body = {"u": f"{type(exc).__name__}: {exc}"[:300]}
        wire.prune()
        message = {**head, "s": sync, **body, "x": wire.take_drops(), **(self.outbound() if self.outbound else {})}
        if not self._write(message):
            if self.strict or "u" in body or "q" in head or "ready" in head:
                self.fail("too-large", f"a message over {self.cap} bytes")
            message = {**head, "s": sync, "u": f"a value over {self.cap} bytes", "x": message["x"]}
            self._write(message)

    def receive(self) -> dict:
        """The next message, its values decoded (changes applied first)."""
        line = self._line()
        try:
            message = plain.loads(line)
            if type(message) is not dict:
                raise plain.WireError("a message is an object")
            self.wire.apply_sync(message.get("s", []))
            if "q" in message:
                args = message.get("a")
                if type(message.get("op")) is not str or type(args) is not list:
                    raise plain.WireError("a request needs op and a")
                message["a"] = [self.wire.dec(a, 1) for a in args]
                flat = message.get("k", [])
                if type(flat) is not list or len(flat) % 2 or not all(type(k) is str for k in flat[0::2]):
                    raise plain.WireError("keyword arguments need name, value pairs")
                message["k"] = {k: self.wire.dec(v, 1) for k, v in zip(flat[0::2], flat[1::2])}
            elif "v" in message:
                message["v"] = self.wire.dec(message["v"])
            elif "e" in message:
                exc = self.wire.dec(message["e"])
                if not isinstance(exc, BaseException):
                    raise plain.WireError("an answer's exception is not one")
                message["e"] = exc
            self.wire.apply_drops(message.get("x", []))
            if self.inbound is not None:
                self.inbound(message)
            return message
        except plain.Refused as exc:
            self.fail("refused", str(exc))
        except RecursionError:
            self.fail("refused", "a value nested too deeply to take in")
        except MemoryError:
            self.fail("refused", "a value too large to take in")
        except (plain.WireError, ValueError, TypeError, KeyError, AttributeError) as exc:
            self.fail("garbled", f"{type(exc).__name__}: {exc}"[:300])

    # -- requests and answers ------------------------------------------------------------
    def request(self, op: str, args: tuple = (), kwargs: dict | None = None):
        """Ask the other side; its value, or its exception raised here."""
        if _thread.get_ident() != self.thread:
            if self.strict:
                self.fail("refused", "the test uses the program from a second thread")
            raise RuntimeError("sandbox: the other process's objects are usable from the main thread only")
        if self.broken:
            self.fail("refused", self.broken)
        if self.nesting >= MAX_NESTING:
            self.fail("refused", f"calls between the test and the program nested over {MAX_NESTING} levels")
        rid = self.next_id
        self.next_id += 1
        self.requests += 1

        def payload() -> dict:
            out = {"op": op, "a": [self.wire.enc(a, 1) for a in args]}
            if kwargs:
                out["k"] = [x for k, v in kwargs.items() for x in (k, self.wire.enc(v, 1))]
            return out

        self.send({"q": rid}, payload)
        self.nesting += 1
        answered = False
        try:
            while True:
                message = self.receive()
                if "q" in message:
                    self.answer(message)
                    continue
                if message.get("r") != rid:
                    self.fail("garbled", "an answer to a question not asked")
                if "u" in message:
                    self.fail("too-large", f"the other side cannot send its value: {str(message['u'])[:300]}")
                answered = True
                if "e" in message:
                    raise message["e"]
                if "v" not in message:
                    self.fail("garbled", "an answer without a value")
                return message["v"]
        finally:
            self.nesting -= 1
            if not answered:  # interrupted while waiting (a signal handler raised): out of step now
                self.broken = "the test interrupted a call of the program (a signal, a timeout) and went on"

    def answer(self, message: dict) -> None:
        """Run one request of the other side and send its answer."""
        rid, op, args, kwargs = message["q"], message["op"], message["a"], message["k"]
        del message
        try:
            value = self.handler(op, args, kwargs)
        except BaseException as exc:  # noqa: BLE001 - the exception is the answer
            error = BaseException.with_traceback(exc, None)
            del exc, args, kwargs  # the arguments: the program may hold them, or not
            self.send({"r": rid}, lambda: {"e": self.wire.enc_exception(error, 1)})
            return
        del args, kwargs
        self.send({"r": rid}, lambda: {"v": self.wire.enc(value)})

    def serve(self) -> None:
        """Answer requests until the other side ends (then ``fail("closed", ...)``)."""
        while True:
            message = self.receive()
            if "q" not in message:
                self.fail("garbled", "an answer to a question not asked")
            self.answer(message)
