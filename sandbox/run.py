"""The front door of the sandbox: which boundary this host gives (probed once, by running
a real program through it), whether weak isolation was accepted, and :func:`run_python`.

Its own module so the mechanisms below it (``isolation``: the commands; ``process``: one
sandboxed process; ``judge``: a test in two) never import each other in a circle."""

from __future__ import annotations

import os
import sys

from afm.once import once
from afm.sandbox.cleanup import watch_interrupts
from afm.sandbox.isolation import TOOL_DIRS, Boundary, tool
from afm.sandbox.judge import run_test
from afm.sandbox.policy import RunResult, SandboxPolicy, SandboxUnavailable
from afm.sandbox.process import run_program


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
    result = run_program(probe, "import sys\nassert sys.flags.no_site and sys.flags.safe_path", SandboxPolicy(timeout_s=30))
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
    watch_interrupts()
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


def run_python(program: str, policy: SandboxPolicy | None = None, *, test: str | None = None) -> RunResult:
    """Run ``program`` and judge ``test`` (Python source) under ``policy``.

    With a test, the program runs in one sandboxed process and the test in another, the
    referee's, which decides the verdict (``judge.py``): ``judged == "outside"``, or
    ``"unjudgeable"`` (a failure) where the program's own code would have to decide. It
    passes only when the test ran to the end with every assertion true; an exit of any
    kind is a failure. Without a test, it passes when the program ran to its end. Raises
    :class:`SandboxUnavailable` when the host cannot isolate and the policy did not
    accept weak isolation; never raises for what the program or the test does."""
    policy = policy or SandboxPolicy()
    boundary = require(policy)
    if test is None:
        return run_program(boundary, program, policy)
    return run_test(boundary, program, test, policy)


def isolation_layers(policy: SandboxPolicy | None = None) -> tuple[str, ...]:
    """What a program run here gets (for reports and logs), without running one."""
    policy = policy or SandboxPolicy()
    boundary = kernel_boundary()
    if boundary.kind != "kernel" and not (policy.allow_weak_isolation or _ACCEPT_WEAK[0]):
        return ("refused: " + boundary.reason,)
    return boundary.layers(policy)


__all__ = ["accept_weak_isolation", "isolation_layers", "kernel_boundary", "require", "run_python"]
