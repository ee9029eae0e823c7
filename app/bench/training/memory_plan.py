"""XLA's per-device memory plan of a task's train step at any model size, from abstract
shapes only (no parameter is materialised), on any backend, CPU included.

``plan("dpo", "afm-on-device", seq_len=2048, shape=ON_DEVICE["dpo"])`` compiles the run's
train step on abstract inputs and reads its memory analysis
(``afm.training.runs.memory_plan.plan_config``, which ``--batch auto`` uses too): what the
step needs on one device, before any allocator overhead.

Each task's batch is what the README states for the on-device model (:data:`ON_DEVICE`):
pairs, responses or rows per optimiser step, split into micro-batches so the activations
of one micro-batch at a time are live.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GIB = 2**30


@dataclass(frozen=True)
class TaskShape:
    """The per-step work a task's plan is computed for."""

    batch: int  # rows (SFT), pairs (RM, DPO) or responses (MDLOO) per optimiser step
    microbatches: int
    remat: str = "full"
    scan_layers: bool = True  # one compiled block under lax.scan: buffers are reused across layers
    options: tuple[tuple[str, Any], ...] = ()


# The on-device model's post-training steps at sequence 2048 (README "Memory at the
# on-device size"): one micro-batch of 1 row / pair / response at a time, every layer
# rematerialised, the layers scanned.
ON_DEVICE = {
    "sft": TaskShape(batch=16, microbatches=16),
    "reward_model": TaskShape(batch=16, microbatches=16),
    # the reference's log-probs computed before training (afm dpo --reference precomputed):
    # a frozen copy in the step (the default on smaller models) plans 85 GiB here
    "dpo": TaskShape(batch=16, microbatches=16, options=(("reference", "precomputed"),)),
    "ipo": TaskShape(batch=16, microbatches=16, options=(("reference", "precomputed"),)),
    "mdloo": TaskShape(batch=16, microbatches=16, options=(("prompts_per_iteration", 4), ("k", 4))),
}
ALIASES = {"rm": "reward_model"}


def task_shape(task: str) -> tuple[str, TaskShape]:
    """The task's registered name and its post-training shape; a one-line error for a task
    without one."""
    from afm.errors import UserError

    name = ALIASES.get(task, task)
    if name not in ON_DEVICE:
        raise UserError(f"no memory plan for task {task!r}; tasks with one: {', '.join([*ON_DEVICE, *ALIASES])}")
    return name, ON_DEVICE[name]


def plan(task: str, model: str, *, seq_len: int, shape: TaskShape, overrides: list[str] | None = None) -> dict[str, Any]:
    """The compiled train step's memory plan for one device (GiB), and the compile time."""
    import jax

    from afm.model.config import param_counts
    from afm.model.distributed.sharding import MeshConfig, make_mesh
    from afm.training.core.config import TrainConfig, get_train_config
    from afm.training.runs.memory_plan import plan_config

    sets = [f"data.seq_len={seq_len}", f"data.global_batch_size={shape.batch}", f"microbatches={shape.microbatches}",
            f"model_overrides.max_seq_len={seq_len}", f"model_overrides.remat={shape.remat}",
            f"model_overrides.scan_layers={str(shape.scan_layers).lower()}", "model_overrides.dtype=bfloat16",
            *[f"task_options.{k}={v}" for k, v in shape.options],
            *(overrides or [])]
    cfg = get_train_config(TrainConfig(name=f"plan-{task}", model=model, task=task), sets)
    mesh = make_mesh(MeshConfig(data=1, fsdp=1), devices=jax.devices()[:1])  # one device's plan
    out = plan_config(cfg, mesh)
    return {"task": task, "model": model, "params": param_counts(out.pop("model_config"))["total"],
            "seq_len": seq_len, "batch": shape.batch, "microbatches": shape.microbatches, "remat": shape.remat,
            "scan_layers": shape.scan_layers, "options": dict(shape.options), **out}


__all__ = ["ALIASES", "ON_DEVICE", "TaskShape", "plan", "task_shape"]
