"""The short names of the training methods and the one way a task is built from a name.

:data:`METHODS` names every task that trains a model by itself; a task that wraps another
(the adapter task trains LoRA around an inner task) builds its inner task here, by name,
without naming itself: the wrapper sits above this module, so no two task modules import
each other. The package's :data:`~afm.training.tasks.TASKS` adds the wrappers.
"""

from __future__ import annotations

from typing import Any

from afm.imports import resolve
from afm.training.core.task import Task

METHODS: dict[str, str] = {
    "pretrain": "afm.training.tasks.pretrain:PretrainTask",
    "context_gain": "afm.training.tasks.context_gain:ContextGainTask",
    "prune": "afm.training.tasks.prune:PruneTask",
    "distill": "afm.training.tasks.distill:DistillTask",
    "sft": "afm.training.tasks.sft:SftTask",
    "reward_model": "afm.training.tasks.reward_model:RewardModelTask",
    "dpo": "afm.training.tasks.dpo:DpoTask",
    "ipo": "afm.training.tasks.dpo:IpoTask",
    "mdloo": "afm.training.tasks.mdloo:MdlooTask",
}


def build_task(name: str, config: Any, registry: dict[str, str] | None = None) -> Any:
    """A task object by registered name (in ``registry``, :data:`METHODS` by default) or
    ``package.module:Class`` import path, checked against the protocol."""
    registry = METHODS if registry is None else registry
    task = resolve(name, what="task", registry=registry)(config)
    if not isinstance(task, Task):
        raise TypeError(f"{registry.get(name, name)} does not implement the Task protocol (afm.training.core.task)")
    return task


__all__ = ["METHODS", "build_task"]
