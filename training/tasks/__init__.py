"""One module per training method, each a task of the one trainer: its options, its task
class and its pure loss functions; and :data:`TASKS`, the registry of their short names.

The registry lives here, above the engine (``core/``), because it names the tasks: the
engine takes a task object and never looks one up. :func:`get_task` is what the front door
(``afm.training.runs.train``) and anything else that starts from a config calls.
"""

from __future__ import annotations

from typing import Any

TASKS: dict[str, str] = {
    "pretrain": "afm.training.tasks.pretrain:PretrainTask",
    "prune": "afm.training.tasks.prune:PruneTask",
    "distill": "afm.training.tasks.distill:DistillTask",
    "sft": "afm.training.tasks.sft:SftTask",
    "adapter": "afm.training.tasks.adapter:AdapterTask",
    "reward_model": "afm.training.tasks.reward_model:RewardModelTask",
    "dpo": "afm.training.tasks.dpo:DpoTask",
    "ipo": "afm.training.tasks.dpo:IpoTask",
    "mdloo": "afm.training.tasks.mdloo:MdlooTask",
}


def task_class(name: str) -> type:
    """A task class by registered name or ``package.module:Class`` import path."""
    from afm.imports import resolve

    return resolve(name, what="task", registry=TASKS)


def get_task(name: str, config: Any) -> Any:
    """A task object by registered name or import path, checked against the protocol."""
    from afm.training.core.task import Task

    task = task_class(name)(config)
    if not isinstance(task, Task):
        raise TypeError(f"{TASKS.get(name, name)} does not implement the Task protocol (afm.training.core.task)")
    return task


__all__ = ["TASKS", "get_task", "task_class"]
