"""Run model-written Python behind a kernel boundary, with a verdict it cannot forge.

* ``policy``    — :class:`SandboxPolicy` (limits), :class:`RunResult`, :class:`SandboxUnavailable`.
* ``isolation`` — which boundary this host gives (probed once) and the command that sets it up.
* ``launcher``  — runs first inside the new namespaces: builds the private root, drops privileges.
* ``harness``   — runs the program and its test, reports a pass through the verdict pipe.
* ``process``   — :func:`run_python`: orders in, capped output out, wall clock on the whole tree.

Threat model and measured behaviour: ``docs/evaluation.md`` (section "The code sandbox").
"""

from afm.sandbox.isolation import (
    Boundary,
    accept_weak_isolation,
    kernel_boundary,
    require,
)
from afm.sandbox.policy import RunResult, SandboxPolicy, SandboxUnavailable
from afm.sandbox.process import run_python


def isolation_layers(policy: SandboxPolicy | None = None) -> tuple[str, ...]:
    """What a program run here gets (for reports and logs), without running one."""
    policy = policy or SandboxPolicy()
    boundary = kernel_boundary()
    if boundary.kind != "kernel" and not (policy.allow_weak_isolation or _weak_accepted()):
        return ("refused: " + boundary.reason,)
    return boundary.layers(policy)


def _weak_accepted() -> bool:
    from afm.sandbox import isolation

    return isolation._ACCEPT_WEAK[0]


__all__ = ["Boundary", "RunResult", "SandboxPolicy", "SandboxUnavailable", "accept_weak_isolation",
           "isolation_layers", "kernel_boundary", "require", "run_python"]
