"""What a sandboxed run may use, what it returns, and the refusal when the host cannot isolate."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from afm.errors import UserError

MAX_HASH_SEED = (1 << 32) - 1


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits for one program (and, for a test, for the referee's process too).

    ``allow_weak_isolation``: where the kernel cannot give the program namespaces of its
    own, run it anyway with process-level limits only (instead of refusing).
    ``tripwire``: the in-process audit rules that stop sockets, processes and writes
    outside the working directory early, with a clear message; the kernel is the boundary
    either way (tests switch it off to show that).
    ``max_message_bytes``: the largest message the program and the referee may send each
    other (a value over it makes the test unjudgeable).
    ``hash_seed``: ``PYTHONHASHSEED`` of both processes of a test (one random seed per run
    when None): the program and the test see one set order, as one process would."""

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 1 << 30
    max_file_bytes: int = 16 << 20
    tmp_bytes: int = 64 << 20
    max_output_bytes: int = 1 << 20
    max_processes: int = 16
    max_open_files: int = 64
    max_message_bytes: int = 16 << 20
    allow_weak_isolation: bool = False
    tripwire: bool = True
    uid_base: int = 200_000
    hash_seed: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "hash_seed":
                if value is not None and (type(value) is not int or not 0 <= value <= MAX_HASH_SEED):
                    raise ValueError(f"SandboxPolicy.hash_seed must be an int in 0..{MAX_HASH_SEED} or None, "
                                     f"got {value!r}")
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"SandboxPolicy.{f.name} must be a positive finite number, got {value}")


@dataclass
class RunResult:
    """``passed`` only when the test ran to the end with every assertion true (without a
    test: when the program ran to its end).

    ``judged``: for a test, ``outside`` when its verdict was decided outside the program's
    process (by the referee, or by the evaluator from what it saw: a timeout, an exit),
    ``unjudgeable`` when the referee refused to judge it (a failure, counted by every
    caller); ``""`` without a test. ``cause``: what failed (``assertion``,
    ``error:<Exception>``, ``exited``, ``timeout``, ``output``, ``memory``, ``blocked``,
    ``garbled``, ``unjudgeable``, ``setup``). ``requests``: how many requests the referee
    made of the program."""

    status: str  # passed | failed | timeout | error
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    isolation: tuple[str, ...]
    reason: str = ""  # why it did not pass, in a few words
    judged: str = ""
    cause: str = ""
    requests: int = 0

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def unjudgeable(self) -> bool:
        return self.judged == "unjudgeable"


class SandboxUnavailable(UserError):
    """The host cannot isolate programs and weaker isolation was not accepted."""
