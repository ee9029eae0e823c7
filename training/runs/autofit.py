"""``--batch auto`` and ``--remat auto``: the largest per-device batch and the cheapest
remat policy whose *compiled* memory plan fits the device.

Why: a fixed batch of 4 left 50-90 GB of an H200 idle, and the 3B model recomputed
activations it had memory to keep (issue #32); doubling the per-device batch alone gave
OLMo-core 25% at 1B. An estimate (``afm.model.config.estimate_train_memory_gb``) is off by
10-30%, so the choice is made on XLA's own figure: the run's train step is compiled on
abstract inputs for each candidate (``afm.training.runs.memory_plan.plan_config``, on the
run's mesh, so the figure is per device) and its memory analysis compared with the
device's memory times a headroom fraction for the allocator.

Search: remat policies from the cheapest (no recomputation) to the dearest; for each, the
batch is doubled from just above the best found so far while it fits; a policy is kept
when it fits a larger batch than every cheaper one. That is a handful of compiles, not a
grid. With only one of the two on ``auto`` the other stays as configured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from afm.errors import UserError
from afm.training.core.config import model_config
from afm.training.runs.memory_plan import plan_config

# Cheapest recomputation first (afm.model.remat): none keeps everything; dots keeps every
# matmul output; then ever fewer saved names; full keeps only the block input.
REMAT_ORDER = ("none", "dots", "dots_except_mlp", "qkv_attention", "attention", "full")
HEADROOM = 0.9  # of the device's memory: the allocator's fragmentation and XLA's scratch
MAX_PER_DEVICE = 64


@dataclass
class Fit:
    """The choice and every plan compiled to reach it (printed at the start of a run)."""

    batch_per_device: int
    remat: str
    plan_gb: float
    budget_gb: float
    tried: list[tuple[str, int, float | None]] = field(default_factory=list)  # (remat, batch, GiB or None: failed)

    def summary(self) -> str:
        rows = ", ".join(f"{r}x{b}={'fail' if g is None else f'{g:.2f}'}" for r, b, g in self.tried)
        return (f"auto fit: batch {self.batch_per_device} per device, remat {self.remat}: "
                f"{self.plan_gb:.2f} of {self.budget_gb:.2f} GiB (plans tried: {rows})")


def device_budget_gb(explicit_gb: float | None = None, headroom: float = HEADROOM) -> float:
    """Usable memory of one device in GiB: ``explicit_gb`` or the device's own limit
    (``memory_stats()['bytes_limit']``, GPU/TPU), times ``headroom``."""
    if explicit_gb is not None:
        if not explicit_gb > 0:
            raise UserError(f"device memory must be a positive number of GiB, got {explicit_gb}")
        return explicit_gb * headroom
    import jax

    stats = jax.local_devices()[0].memory_stats() or {}
    limit = stats.get("bytes_limit")
    if not limit:
        raise UserError(f"the {jax.default_backend()} device does not report its memory: give it "
                        "(e.g. AFM_DEVICE_MEMORY_GB=80) for --batch auto / --remat auto")
    return limit / 2**30 * headroom


def _with(cfg: Any, per_device: int, width: int, remat: str) -> Any:
    model_overrides = {**cfg.model_overrides, "remat": remat}
    data = dataclasses.replace(cfg.data, global_batch_size=per_device * width)
    return dataclasses.replace(cfg, data=data, model_overrides=model_overrides)


def autofit(
    cfg: Any,
    mesh: Any,
    *,
    batch: bool,
    remat: bool,
    budget_gb: float,
    max_per_device: int = MAX_PER_DEVICE,
    planner: Callable[[Any, Any], float] | None = None,
) -> Fit:
    """The fit for ``cfg`` (a ``TrainConfig``) on ``mesh``; ``batch`` / ``remat`` say
    which of the two are chosen. ``planner(cfg, mesh)`` returns the per-device GiB of a
    config's train step (default: XLA's memory analysis of the compiled step)."""
    if not (batch or remat):
        raise ValueError("autofit: nothing to choose")
    plan = planner or _compiled_gb
    width = int(mesh.shape["data"] * mesh.shape["fsdp"])
    fixed_per_device = max(1, cfg.data.global_batch_size // width)
    if cfg.microbatches > 1 and batch:
        raise UserError("--batch auto chooses the per-device batch without micro-batches: drop microbatches")
    policies = REMAT_ORDER if remat else (_current_remat(cfg),)
    tried: list[tuple[str, int, float | None]] = []

    def fits(policy: str, per_device: int) -> float | None:
        try:
            gb = plan(_with(cfg, per_device, width, policy), mesh)
        except Exception as exc:  # noqa: BLE001 - an out-of-memory compile is "does not fit"
            if "RESOURCE_EXHAUSTED" not in str(exc) and "memory" not in str(exc).lower():
                raise
            gb = None
        tried.append((policy, per_device, gb))
        return gb if gb is not None and gb <= budget_gb else None

    best: tuple[int, str, float] | None = None
    for policy in policies:
        if not batch:
            gb = fits(policy, fixed_per_device)
            if gb is not None:
                best = (fixed_per_device, policy, gb)
                break
            continue
        size = 1 if best is None else best[0] * 2
        while size <= max_per_device:
            gb = fits(policy, size)
            if gb is None:
                break
            best = (size, policy, gb)
            size *= 2
        if best is not None and best[0] >= max_per_device:
            break
    if best is None:
        what = f"batch {fixed_per_device} per device" if not batch else "even 1 sequence per device"
        raise UserError(f"{what} does not fit {budget_gb:.1f} GiB with any remat policy tried "
                        f"({', '.join(policies)}): shard over more devices (mesh.fsdp) or shorten the sequence")
    return Fit(best[0], best[1], best[2], budget_gb, tried)


def _current_remat(cfg: Any) -> str:
    return cfg.model_overrides.get("remat") or model_config(cfg).remat


def _compiled_gb(cfg: Any, mesh: Any) -> float:
    return float(plan_config(cfg, mesh)["total_gb"])


def fit_config(cfg: Any, mesh: Any, *, batch: bool, remat: bool, device_memory_gb: float | None = None,
               planner: Callable[[Any, Any], float] | None = None) -> tuple[Any, Fit]:
    """``cfg`` with the fitted global batch and remat policy, and the :class:`Fit`.
    ``device_memory_gb`` (else ``AFM_DEVICE_MEMORY_GB``, else the device's own limit)."""
    import os

    if device_memory_gb is None and os.environ.get("AFM_DEVICE_MEMORY_GB"):
        raw = os.environ["AFM_DEVICE_MEMORY_GB"]
        try:
            device_memory_gb = float(raw)
        except ValueError:
            raise UserError(f"AFM_DEVICE_MEMORY_GB must be a number of GiB, got {raw!r}") from None
    budget = device_budget_gb(device_memory_gb)
    fit = autofit(cfg, mesh, batch=batch, remat=remat, budget_gb=budget, planner=planner)
    width = int(mesh.shape["data"] * mesh.shape["fsdp"])
    return _with(cfg, fit.batch_per_device if batch else max(1, cfg.data.global_batch_size // width),
                 width, fit.remat), fit


def parse_auto(value: str | None, what: str) -> tuple[bool, str | None]:
    """``"auto"`` -> (True, None); anything else -> (False, value) (checked by the caller)."""
    if value is not None and value.strip().lower() == "auto":
        return True, None
    if value is not None and not value.strip():
        raise UserError(f"--{what}: empty value")
    return False, value
