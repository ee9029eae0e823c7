"""Training configs: one typed ``TrainConfig`` and the named pre-training stages.

Stages (SPEC 3 table). Token budgets become step counts with the batch shown:

=====================  ======  ==========  ======  ========  =======  ==============
stage                  seq     batch       LR      wd        warm-up  decay to
=====================  ======  ==========  ======  ========  =======  ==============
core                   4096    4096 seqs   0.01    3.16e-4   5000     0.005 x peak
continued              8192    4096 seqs   3e-4    1e-5      1000     0.001 x peak
context-lengthening    32768   1024 seqs   3e-4    1e-5      1000     0.001 x peak
=====================  ======  ==========  ======  ========  =======  ==============

Each later stage starts from the previous stage's checkpoint (``init_from``: parameters
only; optimizer state, step and data position start fresh). ``context-lengthening``
raises the RoPE base from 500,000 to 6,315,089. The mixture weights are our choice (the
report gives only their direction: continued has more math and code, less bulk web, and
adds licensed data; context lengthening adds synthetic long-context Q&A).

The ``tiny-*`` stages are the same recipe shrunk to the ``tiny`` model, for tests and
the demo (seconds on a CPU). Their muParam base width is the tiny width itself (the tiny
model is its own LR proxy), so their LR is a proxy-width LR: 0.1 for tiny-core (the LR
sweep of ``tests/slow/training`` puts the optimum of 60-80-step runs at 0.25-0.5; 0.1 is
the stable side of it) and 0.003 for the later tiny stages (the SPEC's 0.01 -> 3e-4 ratio).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afm.model.sharding import MeshConfig
from afm.training.core.hooks import EvalConfig
from afm.training.core.optimizer import OptimizerConfig
from afm.training.core.schedules import ScheduleConfig
from afm.training.data.shards import DataConfig

from afm.config import ConfigError, load_config


@dataclass
class CheckpointConfig:
    every_steps: int = 1000
    keep: int = 3
    async_save: bool = True


@dataclass
class TrainConfig:
    """Everything one training run needs; printed at the start of every run."""

    name: str = "custom"
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
    export_model: bool = True  # write workdir/model (afm.model.checkpoint format) at the end
    profile_steps: str = ""  # "START:END": a jax.profiler trace of these steps (workdir/profile)
    preemption_check_every: int = 1  # steps between the hosts' agreement on a stop signal
    log_dir: str = ""  # metrics/TensorBoard when the workdir is remote (default: ./afm-logs/NAME)


CORE_MIX = {"web": 0.80, "code": 0.10, "math": 0.05, "licensed": 0.05}
CONTINUED_MIX = {"web": 0.35, "code": 0.30, "math": 0.20, "licensed": 0.15}
CONTEXT_MIX = {"web": 0.25, "code": 0.21, "math": 0.14, "licensed": 0.10, "synthetic": 0.30}
ROPE_BASE_LONG = 6_315_089.0


def _stage(**kw: Any) -> dict[str, Any]:
    return kw


STAGES: dict[str, dict[str, Any]] = {
    "core": _stage(
        name="core", model="afm-server", next_stage="continued",
        data={"seq_len": 4096, "global_batch_size": 4096, "weights": CORE_MIX},
        optimizer={"learning_rate": 0.01, "weight_decay": 3.16e-4},
        schedule={"warmup_steps": 5000, "final_fraction": 0.005},
        mesh={"data": 1, "fsdp": -1},
        total_steps=375_500,  # 6.3T tokens / (4096 x 4096)
        checkpoint={"every_steps": 1000},
    ),
    "continued": _stage(
        name="continued", model="afm-server", next_stage="context-lengthening",
        model_overrides={"max_seq_len": 8192},
        data={"seq_len": 8192, "global_batch_size": 4096, "weights": CONTINUED_MIX},
        optimizer={"learning_rate": 3e-4, "weight_decay": 1e-5},
        schedule={"warmup_steps": 1000, "final_fraction": 0.001},
        mesh={"data": 1, "fsdp": -1},
        total_steps=29_800,  # 1T tokens / (4096 x 8192)
        checkpoint={"every_steps": 500},
    ),
    "context-lengthening": _stage(
        name="context-lengthening", model="afm-server",
        model_overrides={"max_seq_len": 32768, "rope_base": ROPE_BASE_LONG},
        data={"seq_len": 32768, "global_batch_size": 1024, "weights": CONTEXT_MIX},
        optimizer={"learning_rate": 3e-4, "weight_decay": 1e-5},
        schedule={"warmup_steps": 1000, "final_fraction": 0.001},
        mesh={"data": 1, "fsdp": -1, "sequence": 4},
        total_steps=2_980,  # 100B tokens / (1024 x 32768)
        checkpoint={"every_steps": 250},
    ),
}

_TINY_MODEL = {"base_width": 64}  # the tiny model is its own muParam proxy
STAGES.update(
    {
        "tiny-core": _stage(
            name="tiny-core", model="tiny", next_stage="tiny-continued",
            model_overrides=_TINY_MODEL,
            data={"seq_len": 64, "global_batch_size": 8, "weights": CORE_MIX},
            optimizer={"learning_rate": 0.1, "weight_decay": 3.16e-4},
            schedule={"warmup_steps": 5, "final_fraction": 0.005},
            total_steps=60, log_every=5, checkpoint={"every_steps": 20, "keep": 2},
        ),
        "tiny-continued": _stage(
            name="tiny-continued", model="tiny", next_stage="tiny-context",
            model_overrides=_TINY_MODEL,
            data={"seq_len": 128, "global_batch_size": 8, "weights": CONTINUED_MIX},
            optimizer={"learning_rate": 0.003, "weight_decay": 1e-5},
            schedule={"warmup_steps": 2, "final_fraction": 0.001},
            total_steps=20, log_every=5, checkpoint={"every_steps": 10, "keep": 2},
        ),
        "tiny-context": _stage(
            name="tiny-context", model="tiny",
            model_overrides={**_TINY_MODEL, "rope_base": ROPE_BASE_LONG},
            data={"seq_len": 256, "global_batch_size": 8, "weights": CONTEXT_MIX},
            optimizer={"learning_rate": 0.003, "weight_decay": 1e-5},
            schedule={"warmup_steps": 2, "final_fraction": 0.001},
            total_steps=10, log_every=5, checkpoint={"every_steps": 10, "keep": 2},
        ),
    }
)


# LoRA adapters on a frozen base (report §5; ``afm.training.tasks.adapter``, ``afm adapter
# train``). Our choices, not published: AdamW (Appendix A's betas), no weight decay, no
# muParam multipliers (adapters are low-rank side paths, not width-scaled matrices).
# ``recovery``: the accuracy-recovery adapter of a quantized base, ~10B tokens (the
# report's figure, 0.15% of pre-training) of pre- + post-training data; rank 16 (the suite
# is 8/16/32: --set task_options.rank=8).
_ADAPTER_OPT = {"name": "adamw", "b1": 0.9, "b2": 0.95, "weight_decay": 0.0, "muparam": False}
STAGES.update(
    {
        "recovery": _stage(
            name="recovery", task="adapter", task_options={"rank": 16, "alpha": 32},
            data={"seq_len": 4096, "global_batch_size": 512, "weights": {**CONTINUED_MIX, "instruct": 0.25}},
            optimizer={**_ADAPTER_OPT, "learning_rate": 1e-4},
            schedule={"warmup_steps": 100, "final_fraction": 0.1},
            mesh={"data": 1, "fsdp": -1},
            total_steps=4_800,  # 10B tokens / (512 x 4096)
            checkpoint={"every_steps": 500},
        ),
        "tiny-recovery": _stage(
            name="tiny-recovery", task="adapter", task_options={"rank": 16, "alpha": 32},
            data={"seq_len": 128, "global_batch_size": 8},
            optimizer={**_ADAPTER_OPT, "learning_rate": 3e-3},
            schedule={"warmup_steps": 5, "final_fraction": 0.1},
            total_steps=60, log_every=5, checkpoint={"every_steps": 30, "keep": 1},
        ),
    }
)

# -- AFM-on-device: pruned from a 6.4B teacher, then distilled (SPEC 3.2, report §3.2.1) ---
# The report keeps every hyper-parameter of AFM-server except the batch size, which it does
# not give for the on-device model; 1024 x 4096 tokens is our choice. Mask learning runs on
# the core mixture for 188B tokens; core pre-training distils (0.9 teacher top-1 + 0.1 label)
# for 6.3T tokens; continued pre-training does not distil.
ON_DEVICE_BATCH = 1024
PRUNE_HOOKS = {"every_steps": 1000, "hooks": ["afm.training.tasks.prune:mask_hook"]}
STAGES.update(
    {
        "teacher-core": _stage(
            name="teacher-core", model="afm-teacher-6.4b", next_stage="on-device-prune",
            data={"seq_len": 4096, "global_batch_size": 4096, "weights": CORE_MIX},
            optimizer={"learning_rate": 0.01, "weight_decay": 3.16e-4},
            schedule={"warmup_steps": 5000, "final_fraction": 0.005},
            mesh={"data": 1, "fsdp": -1},
            total_steps=375_500,  # the server's core recipe: 6.3T tokens / (4096 x 4096)
            checkpoint={"every_steps": 1000},
        ),
        "on-device-prune": _stage(
            name="on-device-prune", model="afm-teacher-6.4b", task="prune", next_stage="on-device-core",
            task_options={"target_ffn_dim": 8064, "temperature_start": 0.5, "temperature_end": 0.005},
            data={"seq_len": 4096, "global_batch_size": ON_DEVICE_BATCH, "weights": CORE_MIX},
            optimizer={"learning_rate": 0.01, "weight_decay": 0.0},
            schedule={"warmup_steps": 1000, "final_fraction": 0.005},
            mesh={"data": 1, "fsdp": -1},
            total_steps=44_830,  # 188B tokens / (1024 x 4096)
            checkpoint={"every_steps": 1000}, eval=PRUNE_HOOKS,
        ),
        "on-device-core": _stage(
            name="on-device-core", model="afm-on-device", task="distill", next_stage="on-device-continued",
            task_options={"teacher_weight": 0.9, "label_weight": 0.1},
            data={"seq_len": 4096, "global_batch_size": ON_DEVICE_BATCH, "weights": CORE_MIX},
            optimizer={"learning_rate": 0.01, "weight_decay": 3.16e-4},
            schedule={"warmup_steps": 5000, "final_fraction": 0.005},
            mesh={"data": 1, "fsdp": -1},
            total_steps=1_502_000,  # 6.3T tokens / (1024 x 4096)
            checkpoint={"every_steps": 1000},
        ),
        "on-device-continued": _stage(
            name="on-device-continued", model="afm-on-device",
            model_overrides={"max_seq_len": 8192},
            data={"seq_len": 8192, "global_batch_size": ON_DEVICE_BATCH // 2, "weights": CONTINUED_MIX},
            optimizer={"learning_rate": 3e-4, "weight_decay": 1e-5},
            schedule={"warmup_steps": 1000, "final_fraction": 0.001},
            mesh={"data": 1, "fsdp": -1},
            total_steps=238_400,  # 1T tokens / (512 x 8192), no distillation (report §3.2.2)
            checkpoint={"every_steps": 500},
        ),
        # The same recipe on tiny models, for tests and the demo.
        "tiny-teacher-core": _stage(
            name="tiny-teacher-core", model="tiny-teacher", next_stage="tiny-prune",
            model_overrides=_TINY_MODEL,
            data={"seq_len": 64, "global_batch_size": 8, "weights": CORE_MIX},
            optimizer={"learning_rate": 0.1, "weight_decay": 3.16e-4},
            schedule={"warmup_steps": 5, "final_fraction": 0.005},
            total_steps=60, log_every=5, checkpoint={"every_steps": 20, "keep": 2},
        ),
        "tiny-prune": _stage(
            name="tiny-prune", model="tiny-teacher", task="prune", next_stage="tiny-distill-core",
            model_overrides=_TINY_MODEL,
            task_options={"target_ffn_dim": 192, "temperature_start": 0.5, "temperature_end": 0.005},
            data={"seq_len": 64, "global_batch_size": 8, "weights": CORE_MIX},
            optimizer={"learning_rate": 0.05, "weight_decay": 0.0},
            schedule={"warmup_steps": 2, "final_fraction": 0.1},
            total_steps=40, log_every=5, checkpoint={"every_steps": 20, "keep": 2},
            eval={"every_steps": 10, "hooks": ["afm.training.tasks.prune:mask_hook"]},
        ),
        "tiny-distill-core": _stage(
            name="tiny-distill-core", model="tiny", task="distill", next_stage="tiny-continued",
            model_overrides=_TINY_MODEL,
            task_options={"teacher_weight": 0.9, "label_weight": 0.1},
            data={"seq_len": 64, "global_batch_size": 8, "weights": CORE_MIX},
            optimizer={"learning_rate": 0.1, "weight_decay": 3.16e-4},
            schedule={"warmup_steps": 5, "final_fraction": 0.005},
            total_steps=60, log_every=5, checkpoint={"every_steps": 20, "keep": 2},
        ),
    }
)


def get_train_config(
    name_or_file: str | Path | TrainConfig, overrides: list[str] | tuple[str, ...] = ()
) -> TrainConfig:
    """A named stage, or a YAML file (which may say ``base: <stage>``), plus overrides."""
    if isinstance(name_or_file, TrainConfig):
        return load_config(TrainConfig, {}, overrides, base=name_or_file)
    key = str(name_or_file)
    if key in STAGES:
        return load_config(TrainConfig, STAGES[key], overrides)
    path = Path(key)
    if not path.exists():
        raise ConfigError(
            f"unknown training config {key!r}: not a stage ({', '.join(STAGES)}) nor a file"
        )
    import yaml

    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    base_name = data.pop("base", None)
    if base_name and base_name not in STAGES:
        raise ConfigError(f"{path}: base {base_name!r} is not a stage ({', '.join(STAGES)})")
    base = load_config(TrainConfig, STAGES[base_name]) if base_name else None
    return load_config(TrainConfig, data, overrides, base=base)


def model_config(cfg: TrainConfig) -> Any:
    """The ``afm.model`` config of this run, with the stage's overrides and seq len."""
    from afm.model.config import get_config

    overrides = dict(cfg.model_overrides)
    base = get_config(cfg.model)
    overrides.setdefault("max_seq_len", max(base.max_seq_len, cfg.data.seq_len))
    return dataclasses.replace(base, **overrides)
