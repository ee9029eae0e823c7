"""The one front door to the trainer: a stage name or file (plus overrides) -> a prepared
config and its task -> the loop -> the task's finish.

Every command that trains (``afm train``, ``afm sft``, ``afm rm train``, ``afm dpo``, ``afm
rl mdloo``, ``afm prune learn``, ``afm adapter train``), the demo and the studies call
:func:`train`, so a stage runs the same whichever of them starts it: the task's
:meth:`~afm.training.core.task.TaskBase.prepare_config` sets up what the stage needs
(held-out batches, the selection metric, a model shape read from ``init_from``) and its
:meth:`~afm.training.core.task.TaskBase.finish_run` adds what the stage reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from afm.config import ConfigError
from afm.console import print_summary
from afm.training.core.config import TrainConfig, get_train_config, model_config, with_task_options
from afm.training.core.trainer import parse_profile_steps, run_loop
from afm.training.tasks import get_task, task_class


def prepare(
    config: str | Path | TrainConfig,
    workdir: str | Path,
    *,
    data: Sequence[str] | None = None,
    heldout: Sequence[str] | None = None,
    init_from: str | Path | None = None,
    overrides: Sequence[str] = (),
    profile_steps: str | None = None,
    task: str | None = None,
    require_task: str | None = None,
    task_options: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """The run's config: the stage (``task``: the task a file that names none runs, a
    command's own), the overrides, ``data`` (``data.paths``), ``heldout``
    (``eval.heldout``), ``init_from`` and ``task_options`` (merged over the stage's; None
    values leave an option alone), then the task's own preparation. ``require_task``: the
    only task the calling command runs (``afm sft`` refuses a pre-training stage)."""

    cfg = get_train_config(config, list(overrides), task=task)
    if require_task is not None and cfg.task != require_task:
        raise ConfigError(f"this command runs the {require_task} task; the config says task={cfg.task!r}")
    if data is not None:
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, paths=list(data)))
    if heldout is not None:
        cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, heldout=list(heldout)))
    if init_from is not None:
        cfg = dataclasses.replace(cfg, init_from=str(init_from))
    if profile_steps is not None:
        cfg = dataclasses.replace(cfg, profile_steps=profile_steps)
    if task_options:
        cfg = with_task_options(cfg, **task_options)
    parse_profile_steps(cfg.profile_steps)
    cfg = task_class(cfg.task).prepare_config(cfg, str(workdir))
    model_config(cfg)  # the model this run would build: an impossible size or number stops here
    return cfg


def train(
    config: str | Path | TrainConfig,
    workdir: str | Path,
    *,
    steps: int | None = None,
    data: Sequence[str] | None = None,
    heldout: Sequence[str] | None = None,
    init_from: str | Path | None = None,
    overrides: Sequence[str] = (),
    profile_steps: str | None = None,
    task: str | None = None,
    require_task: str | None = None,
    task_options: Mapping[str, Any] | None = None,
    configure_task: Callable[[Any], None] | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Train (or resume) the stage in ``workdir`` up to ``steps`` (default: ``total_steps``).

    ``data``, ``heldout``, ``init_from``, ``task``, ``require_task`` and ``task_options`` as
    in :func:`prepare`.
    ``configure_task`` is called with the built task before the loop starts
    (a reward already in memory, a test's program). Returns the loop's result (losses,
    steps, ``params_sha256``, checkpoints, evaluations) with what the task adds.
    """

    cfg = prepare(config, workdir, data=data, heldout=heldout, init_from=init_from, overrides=overrides,
                  profile_steps=profile_steps, task=task, require_task=require_task, task_options=task_options)
    built = get_task(cfg.task, cfg)
    if configure_task is not None:
        configure_task(built)
    built.start_run(str(workdir))
    result = run_loop(cfg, workdir, built, steps=steps, quiet=quiet)
    import jax

    if jax.process_index() == 0:
        result = built.finish_run(str(workdir), result)
        if not quiet:
            rows = {k: v for k, v in result.items() if k != "mixture" and v is not None}
            if isinstance(rows.get("rejects"), dict):  # a pair task's inputs: what each lost and why
                rows["rejects"] = "; ".join(f"{role}: {r['summary']}" for role, r in rows["rejects"].items())
            print_summary(f"train {cfg.name}", rows)
    return result


__all__ = ["prepare", "train"]
