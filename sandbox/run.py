"""The front door of the sandbox: which boundary this host gives (probed once, by running a
real program through it), whether weak isolation was accepted, and :func:`run_python`,
which sends a test to the judge (split) or runs it after the program (not split).

Its own module so the mechanisms below it (``isolation``: the commands; ``process``: one
sandboxed process; ``judge``: a split test) never import each other in a circle."""

from __future__ import annotations

import os
import sys

from afm.once import once
from afm.sandbox import judge
from afm.sandbox.isolation import TOOL_DIRS, Boundary, tool
from afm.sandbox.policy import RunResult, SandboxPolicy, SandboxUnavailable
from afm.sandbox.process import run_in


@once
def kernel_boundary() -> Boundary:
    """Can a program run behind the kernel boundary here? Probed once per process, by running
    a real program through it (a test pretends a host through ``kernel_boundary.results``)."""
    return _probe()


def _probe() -> Boundary:
    user = "root" if os.geteuid() == 0 else "userns"
    if not sys.platform.startswith("linux"):
        return Boundary("weak", "host", f"namespaces are Linux-only (this is {sys.platform})")
    missing = [name for name in ("unshare", "setpriv") if tool(name) is None]
    if missing:
        return Boundary("weak", "host", f"{' and '.join(missing)} (util-linux) not found in {TOOL_DIRS}")
    probe = Boundary("kernel", user)
    result = run_in(probe, "import sys\nassert sys.flags.isolated", SandboxPolicy(timeout_s=30), test=None)
    if result.passed:
        return probe
    why = (result.stderr.strip().splitlines() or [result.reason or result.status])[-1]
    if user == "userns":
        why += " (unprivileged user namespaces may be disabled: sysctl kernel.unprivileged_userns_clone" \
               " or user.max_user_namespaces)"
    return Boundary("weak", "host", why)


def require(policy: SandboxPolicy) -> Boundary:
    """The boundary programs get under ``policy``; refuses when only weak isolation is
    possible and the policy (or :func:`accept_weak_isolation`) did not accept it."""
    found = kernel_boundary()
    if found.kind == "kernel":
        return found
    if policy.allow_weak_isolation or _ACCEPT_WEAK[0]:
        return found
    raise SandboxUnavailable(
        f"cannot isolate model-written programs on this host: {found.reason}. "
        "Pass --allow-weak-sandbox to run them with process limits only.")


_ACCEPT_WEAK = [False]


def accept_weak_isolation(accept: bool = True) -> None:
    """Process-wide: run programs with weak isolation where the kernel one is unavailable
    (what ``--allow-weak-sandbox`` sets)."""
    _ACCEPT_WEAK[0] = accept


def run_python(program: str, policy: SandboxPolicy | None = None, *, test: str | None = None,
               split: bool = True) -> RunResult:
    """Run ``program`` and judge ``test`` (Python source) under ``policy``.

    A test the judge can split (``judge.py``: asserts, loops, helpers; most of HumanEval
    and MBPP) runs in the evaluator against values the program's calls return as plain
    data (``judged == "outside"``); any other test, or ``split=False``, runs after the
    program in its namespace, and the harness's key decides (``judged == "inside"``).
    Passes only when the test ran to the end with every assertion true; an exit of any
    kind is a failure. Raises :class:`SandboxUnavailable` when the host cannot isolate
    and the policy did not accept weak isolation; never raises for what the program does."""
    policy = policy or SandboxPolicy()
    boundary = require(policy)
    if test and split:
        verdict, why = judge.run_split(boundary, program, test, policy)
        if verdict is not None:
            return verdict
        result = run_in(boundary, program, policy, test=test)
        result.split_reason = why
        return result
    return run_in(boundary, program, policy, test=test)


def isolation_layers(policy: SandboxPolicy | None = None) -> tuple[str, ...]:
    """What a program run here gets (for reports and logs), without running one."""
    policy = policy or SandboxPolicy()
    boundary = kernel_boundary()
    if boundary.kind != "kernel" and not (policy.allow_weak_isolation or _ACCEPT_WEAK[0]):
        return ("refused: " + boundary.reason,)
    return boundary.layers(policy)


__all__ = ["accept_weak_isolation", "isolation_layers", "kernel_boundary", "require", "run_python"]
