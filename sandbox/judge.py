"""A test, judged: the program in one sandboxed process, the test in another, the verdict
from the second.

``run_test`` starts two processes behind the same boundary, each with its own limits,
cgroup, uid and private ``/tmp``: the *candidate's* (``harness.py``: the program, nothing
else) and the *referee's* (``referee.py``: the test, run by the real interpreter, with no
code of the program), joined by two pipes the evaluator creates and never reads. The
referee asks, the candidate answers in plain data (``plain.py``, ``channel.py``), and the
referee writes its verdict on a third pipe, to the evaluator: one capped JSON line,
the only thing the evaluator reads besides the output tails. So:

* no verdict is decided in a process the program's code runs in, and nothing the
  program returns can move its judgement into its own process: there is no fallback;
* the test's semantics are CPython's (identity, aliasing, changes made through
  arguments, subclasses, the standard library's containers, generators, exceptions,
  floats, one set order); where the program's own code would decide (its ``__eq__``, its
  arithmetic, a context manager swallowing the test's exception), or a value is over the
  wire's bounds, the test is ``unjudgeable``: a counted failure;
* nothing the program or the test does can stall, swell or crash the evaluator: what it
  does is copy bytes under caps and wait on a wall clock; the decoding, the hashing and the
  test's own expressions happen in the referee's process, bounded in time, memory and
  output, and killed at the deadline.
"""

from __future__ import annotations

import json
import os
import time

from afm.sandbox.isolation import Boundary
from afm.sandbox.policy import RunResult, SandboxPolicy
from afm.sandbox.process import CANDIDATE, Sandboxed, hash_seed, pump

VERDICT_CAP = 4096
REFEREE = (*CANDIDATE, "referee")


def run_test(boundary: Boundary, program: str, test: str, policy: SandboxPolicy) -> RunResult:
    """Judge ``test`` against ``program`` (see the module docstring)."""
    seed = hash_seed(policy)
    candidate = Sandboxed(boundary, policy, seed=seed)
    referee = Sandboxed(boundary, policy, channel_cap=VERDICT_CAP, seed=seed)
    to_referee_r, to_referee_w = os.pipe()
    to_candidate_r, to_candidate_w = os.pipe()
    try:
        common = {"max_message_bytes": policy.max_message_bytes}
        started = candidate.start({**common, "program": program, "serve": True, "to_referee": to_referee_w,
                                   "from_referee": to_candidate_r}, "harness", CANDIDATE,
                                  pass_fds=(to_referee_w, to_candidate_r)) \
            and referee.start({**common, "test": test, "to_candidate": to_candidate_w,
                               "from_candidate": to_referee_r}, "referee", REFEREE,
                              pass_fds=(to_candidate_w, to_referee_r), channel_key="verdict_fd")
    finally:
        for fd in (to_referee_r, to_referee_w, to_candidate_r, to_candidate_w):
            os.close(fd)
    try:
        if not started:
            why = candidate.start_error or referee.start_error
            return RunResult("error", None, "", why, time.perf_counter() - candidate.started, candidate.layers(),
                             "could not start", judged="outside", cause="setup")

        def decided() -> bool:
            return not referee.open or (b"\n" in referee.channel and referee.exited())

        ended = pump([candidate, referee], deadline=candidate.deadline, until=decided)
    finally:
        candidate.end()
        referee.end()
    return _result(ended, candidate, referee)


def _verdict(referee: Sandboxed) -> dict:
    line = bytes(referee.channel).partition(b"\n")[0]
    try:
        found = json.loads(line)
    except ValueError:
        return {}
    return found if isinstance(found, dict) and found.get("verdict") in ("passed", "failed", "unjudgeable") else {}


def _result(ended: str, candidate: Sandboxed, referee: Sandboxed) -> RunResult:
    verdict = _verdict(referee)
    status, judged = "failed", "outside"
    cause, reason = str(verdict.get("cause", ""))[:100], str(verdict.get("reason", ""))[:1000]
    if ended == "stopped":
        status, reason, cause = "error", "the evaluator was interrupted", "stopped"
    elif ended == "timeout":
        status, reason, cause = "timeout", "over the wall-clock limit", "timeout"
    elif ended == "output":
        reason, cause = "over the output limit", "output"
    elif verdict.get("verdict") == "passed":
        status, reason, cause = "passed", "", ""
    elif verdict.get("verdict") == "unjudgeable":
        judged, reason = "unjudgeable", f"unjudgeable: {reason}"
    elif verdict:  # failed: when the program's process ended, say why as the evaluator saw it
        if cause == "ended":
            cause = "exited"
            if candidate.memory_exceeded:
                reason, cause = "over the run's memory limit", "memory"
            elif candidate.setup_failed():
                status, reason, cause = "error", "sandbox setup failed", "setup"
            elif candidate.killed_by_cpu():
                status, reason, cause = "timeout", "over the CPU limit", "timeout"
    elif referee.setup_failed() or candidate.setup_failed():
        status, reason, cause = "error", "sandbox setup failed", "setup"
    elif referee.killed_by_cpu():
        status, reason, cause = "timeout", "over the CPU limit (judging the test)", "timeout"
    else:
        judged, cause = "unjudgeable", "unjudgeable"
        why = "over its memory limit" if referee.memory_exceeded else f"with status {referee.rc}"
        reason = f"unjudgeable: the referee ended without a verdict ({why})"
    stdout = candidate.out.text() + referee.out.text()
    stderr = candidate.err.text() + (f"\n--- the test ---\n{referee.err.text()}" if referee.err.text() else "")
    seconds = max(candidate.seconds(), referee.seconds())
    requests = verdict.get("requests") if type(verdict.get("requests")) is int else 0
    return RunResult(status, candidate.rc, stdout, stderr, seconds, candidate.layers(), reason, judged=judged,
                     cause=cause, requests=requests)
