"""Run model-written Python behind a kernel boundary, and judge its tests where it cannot reach.

* ``policy``    — :class:`SandboxPolicy` (limits), :class:`RunResult`, :class:`SandboxUnavailable`.
* ``cgroup``    — one control group per run where the host allows, else why bounds are per process.
* ``isolation`` — which boundary this host gives and the commands that set it up; the boot code.
* ``cleanup``   — runs die with their evaluator: the janitor, the sweep, Ctrl-C.
* ``process``   — sandboxed processes from outside: orders in, capped output out, the wall clock.
* ``judge``     — a test: the program's process and the referee's, the referee's verdict.
* ``run``       — the front door: the boundary probed once, :func:`run_python`.
* inside the sandbox: ``plain`` (the wire), ``channel`` (requests and answers), ``harness``
  (every process's start, the program's process), ``referee`` (the test and its verdict);
  ``launcher``, ``reaper`` and ``janitor`` are scripts.

Threat model and measured behaviour: ``docs/evaluation.md`` (section "The code sandbox").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The names are looked up on first use (PEP 562), not imported here: the modules that run
# inside the sandbox (plain, channel, harness, referee) are ``afm.sandbox.*`` too, and an
# eager front door would load the evaluator's side (the boundary probe, cgroups, the
# process layer) into every sandboxed process and tie each module to all the others.
_EXPORTS = {
    "Boundary": "afm.sandbox.isolation",
    "RunResult": "afm.sandbox.policy",
    "SandboxPolicy": "afm.sandbox.policy",
    "SandboxUnavailable": "afm.sandbox.policy",
    "accept_weak_isolation": "afm.sandbox.run",
    "isolation_layers": "afm.sandbox.run",
    "kernel_boundary": "afm.sandbox.run",
    "require": "afm.sandbox.run",
    "run_python": "afm.sandbox.run",
}

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'afm.sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
