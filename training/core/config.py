"""``TrainConfig``: everything one training run needs, for every task.

A run's config is a named stage of the one registry (:mod:`afm.training.core.stages`, the
YAML tables of ``afm/training/configs/``: pre-training, on-device, adapters, SFT,
preference and RL stages), or a user's YAML file that may start from one (``base:``),
plus ``key.sub=value`` overrides (``--set``). It is printed at the start of every run and
stored in every checkpoint's metadata."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afm.config import ConfigError, check_number, coerce, load_config
from afm.model.config import ModelConfig, get_config
from afm.model.distributed.sharding import MeshConfig
from afm.training.core.hooks import EvalConfig
from afm.training.core.optimizer import OptimizerConfig
from afm.training.core.schedules import ScheduleConfig
from afm.training.core.stages import file_settings, stage_settings, stages
from afm.training.data.shards import DataConfig


@dataclass
class CheckpointConfig:
    every_steps: int = 1000
    keep: int = 3
    async_save: bool = True

    def __post_init__(self) -> None:
        check_number("checkpoint.every_steps", self.every_steps, low=1, integer=True)
        check_number("checkpoint.keep", self.keep, low=1, integer=True)


@dataclass
class TrainConfig:
    """Everything one training run needs; printed at the start of every run."""

    name: str = "custom"
    description: str = ""  # one line: what this stage is (afm train --list-configs)
    task: str = "pretrain"  # afm.training.core.task registry name or "module:Class"
    task_options: dict[str, Any] = field(default_factory=dict)  # the task's own settings
    model: str = "tiny"  # an afm.model.config name
    model_overrides: dict[str, Any] = field(default_factory=dict)  # e.g. rope_base, remat
    data: DataConfig = field(default_factory=DataConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    total_steps: int = 1000  # the schedule's horizon; `--steps` only says where to stop
    microbatches: int = 1  # gradient accumulation: the global batch in this many slices
    loss_chunk: int = 1024  # positions per chunk of float32 logits in the loss
    log_every: int = 10
    seed: int = 0
    init_from: str = ""  # previous stage's workdir or checkpoint step dir
    peak_tflops_per_device: float = 989.0  # H100 SXM dense bf16, for MFU
    next_stage: str = ""  # documentation: which stage continues from this one
    export_model: bool = True  # write workdir/model (afm.model.checkpoints.checkpoint format) at the end
    profile_steps: str = ""  # "START:END": a jax.profiler trace of these steps (workdir/profile)
    preemption_check_every: int = 1  # steps between the hosts' agreement on a stop signal
    log_dir: str = ""  # metrics/TensorBoard when the workdir is remote (default: ./afm-logs/NAME)

    def __post_init__(self) -> None:
        """The run's own numbers (each section checks its own: optimizer, data, ...)."""
        for name in ("total_steps", "microbatches", "loss_chunk", "log_every", "preemption_check_every"):
            check_number(name, getattr(self, name), low=1, integer=True)
        check_number("seed", self.seed, low=0, high=2**32 - 1, integer=True)
        check_number("peak_tflops_per_device", self.peak_tflops_per_device, low=0, low_open=True)


def get_train_config(
    name_or_file: str | Path | TrainConfig,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    task: str | None = None,
) -> TrainConfig:
    """A named stage (any task's: :mod:`afm.training.core.stages`), a YAML file (which may
    say ``base: <stage>``) or a config, plus ``key=value`` overrides. ``task``: the task a
    file that names neither a task nor a base runs (a command's own, e.g. ``sft``)."""

    if isinstance(name_or_file, TrainConfig):
        return load_config(TrainConfig, {}, overrides, base=name_or_file)
    key = str(name_or_file)
    path = Path(key)
    if path.suffix in (".yaml", ".yml") or (path.exists() and path.is_file()):
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        settings = file_settings(path)
    else:
        settings = stage_settings(key)
    if task is not None:
        settings.setdefault("task", task)
    return load_config(TrainConfig, settings, overrides)


def with_task_options(config: TrainConfig, **options: Any) -> TrainConfig:
    """``config`` with ``task_options`` updated (``None`` values leave an option alone)."""
    extra = {k: v for k, v in options.items() if v is not None}
    return dataclasses.replace(config, task_options={**dict(config.task_options or {}), **extra})


def list_configs() -> list[dict[str, str]]:
    """Every named stage: name, task, model, description and the table it is in."""

    return [{"name": s.name, "task": s.task, "model": s.model, "description": s.description,
             "table": s.source} for s in stages().values()]


def model_config(cfg: TrainConfig) -> Any:
    """The ``afm.model`` config of this run, with the stage's overrides and seq len (an
    unknown size, field or impossible value is a ConfigError naming ``model_overrides``)."""
    import typing


    try:
        base = get_config(cfg.model)
    except KeyError as exc:
        raise ConfigError(f"model: {exc.args[0]}") from None
    hints = typing.get_type_hints(ModelConfig)
    overrides = {}
    for key, value in cfg.model_overrides.items():
        if key not in hints:
            raise ConfigError(f"model_overrides.{key}: not a model config field")
        overrides[key] = coerce(value, hints[key], f"model_overrides.{key}")
    overrides.setdefault("max_seq_len", max(base.max_seq_len, cfg.data.seq_len))
    try:
        return dataclasses.replace(base, **overrides)
    except ValueError as exc:  # ModelConfigError (a UserError) or a shape rule
        raise ConfigError(f"model_overrides: {exc}") from None
