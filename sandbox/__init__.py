"""Run model-written Python behind a kernel boundary, with a verdict it cannot forge.

* ``policy``    — :class:`SandboxPolicy` (limits), :class:`RunResult`, :class:`SandboxUnavailable`.
* ``isolation`` — which boundary this host gives (probed once) and the commands that set it up.
* ``cgroup``    — one control group per run where the host allows, else why bounds are per process.
* ``launcher``  — runs first inside the new namespaces: joins the cgroup, builds the private root.
* ``reaper``    — runs first with weak isolation: joins the cgroup, reaps what the program detached.
* ``harness``   — inside: serves a split test's calls, or runs program then test (the keeper's key).
* ``plain``     — the plain-data format values cross the wall in, strictly decoded here.
* ``judge``     — a split test interpreted in the evaluator; only the program's side in the sandbox.
* ``process``   — one sandboxed process: orders in, capped output out, wall clock on the whole tree.
* ``run``       — the front door: the boundary probed once, :func:`run_python` (split or not).

Threat model and measured behaviour: ``docs/evaluation.md`` (section "The code sandbox").
"""

from afm.sandbox.isolation import Boundary
from afm.sandbox.policy import RunResult, SandboxPolicy, SandboxUnavailable
from afm.sandbox.run import (
           accept_weak_isolation,
           isolation_layers,
           kernel_boundary,
           require,
           run_python,
)

__all__ = ["Boundary", "RunResult", "SandboxPolicy", "SandboxUnavailable", "accept_weak_isolation",
           "isolation_layers", "kernel_boundary", "require", "run_python"]
