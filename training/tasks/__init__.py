"""One module per training method, each a task of the one trainer: its options, its task
class and its pure loss functions; and :data:`TASKS`, the registry of their short names.

The registry lives here, above the engine (``core/``), because it names the tasks: the
engine takes a task object and never looks one up. :func:`get_task` is what the front door
(``afm.training.runs.train``) and anything else that starts from a config calls. The methods
that train a model by themselves are named in ``registry.py`` (a wrapper such as the adapter
task builds its inner task there); this registry adds the wrappers.
"""

from __future__ import annotations

from typing import Any

from afm.imports import resolve
from afm.training.tasks.registry import METHODS, build_task

TASKS: dict[str, str] = {**METHODS, "adapter": "afm.training.tasks.adapter:AdapterTask"}


def task_class(name: str) -> type:
    """A task class by registered name or ``package.module:Class`` import path."""
    return resolve(name, what="task", registry=TASKS)


def get_task(name: str, config: Any) -> Any:
    """A task object by registered name or import path, checked against the protocol."""
    return build_task(name, config, TASKS)


__all__ = ["TASKS", "get_task", "task_class"]
