"""What a sandboxed run may use, what it returns, and the refusal when the host cannot isolate."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from afm.errors import UserError


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits for one program.

    ``allow_weak_isolation``: where the kernel cannot give the program namespaces of its
    own, run it anyway with process-level limits only (instead of refusing).
    ``tripwire``: the in-process audit rules that stop sockets, processes and writes
    outside the working directory early, with a clear message; the kernel is the boundary
    either way (tests switch it off to show that)."""

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 1 << 30
    max_file_bytes: int = 16 << 20
    tmp_bytes: int = 64 << 20
    max_output_bytes: int = 1 << 20
    max_processes: int = 16
    max_open_files: int = 64
    allow_weak_isolation: bool = False
    tripwire: bool = True
    uid_base: int = 200_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"SandboxPolicy.{f.name} must be a positive finite number, got {value}")


@dataclass
class RunResult:
    """``passed`` only when the test ran to the end with every assertion true.

    ``judged``: where the test's verdict was decided: ``outside`` (a split test: the
    evaluator compared the plain values the program's calls returned), ``inside`` (the
    harness in the program's process, after the test returned), ``""`` without a test.
    ``split_reason``: why a test was not split. ``cause``: for split tests, what failed
    (``assertion``, ``error:<Exception>``, ``exited``, ``timeout``, ``output``, ``memory``,
    ``blocked``)."""

    status: str  # passed | failed | timeout | error
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    isolation: tuple[str, ...]
    reason: str = ""  # why it did not pass, in a few words
    judged: str = ""
    split_reason: str = ""
    cause: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


class SandboxUnavailable(UserError):
    """The host cannot isolate programs and weaker isolation was not accepted."""
