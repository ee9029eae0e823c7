"""One XLA CPU device per core for inference on a CPU host (``afm eval``, ``afm bench eval``).

Why: XLA:CPU runs one device's program with little parallelism inside a small model's ops
(most of them are too small to split), so one device leaves the other cores mostly idle.
With a device per core the evaluation engine splits each batch over them (its mesh is
data-parallel over every device) and the programs run side by side. Measured with
``afm bench eval``'s items on the tiny model, a quiet 2-core box: log-likelihood
978-1,135 -> 1,319-1,326 requests/s, generation 178-208 -> 263-293.

The count must be set before JAX starts its backends; when they are up already (another
benchmark ran first in the same process), when ``XLA_FLAGS`` names a device count (the
tests), or when ``AFM_CPU_DEVICES`` says otherwise, it is left alone. On a GPU or TPU host
it only shapes the unused host platform.
"""

from __future__ import annotations

import os

from afm.errors import UserError

ENV = "AFM_CPU_DEVICES"


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def use_cpu_cores() -> int | None:
    """Ask JAX for one CPU device per core (or ``AFM_CPU_DEVICES``); the count set, or None
    when it was left alone."""
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return None
    value = os.environ.get(ENV)
    if value is not None:
        if not value.strip().isdigit() or int(value) < 1:
            raise UserError(f"{ENV} must be a positive whole number, got {value!r}")
        n = int(value)
    else:
        n = cores()
    import jax

    if jax.config.jax_num_cpu_devices == n:
        return n
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:  # the backends are up already: too late for this process
        return None
    return n
