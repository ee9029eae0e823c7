"""The adapter task: LoRA adapters trained on a frozen base, around any other task.

Report §5: every feature is a LoRA adapter on one frozen base; the base is palettized
(``afm quantize``) and an *accuracy-recovery* adapter, trained on pre- and post-training
data on the frozen quantized base, gives back most of what quantization took. Feature
adapters then start from the recovery adapter.

On the one trainer (``afm.training.core.task``):

* the base is ``init_from`` (an ``afm.model`` checkpoint, dense or palettized); the
  model config is the base's (``configure_model``), so a palettized base is built with
  its palettes and its forward pass dequantizes on the fly;
* the adapters are the task's ``extra_params`` (``lora/<weight path>/a`` and ``/b``), the
  only trainable parameters: the base gets no gradient and no optimizer state;
* ``wrap_model`` attaches them to the model every loss, eval hook and export sees;
* batches, inputs and the loss are the *inner* task's (``pretrain`` by default: next-token
  loss on a mixture of token shards, which is how the recovery adapters train; any
  registered task, e.g. SFT, for feature adapters).

Options (``task_options``): ``rank`` (16), ``alpha`` (2 x rank), ``targets`` (all seven
projections), ``layers`` (all), ``init_adapter`` (an adapter directory to start from,
e.g. the recovery adapter; same rank and targets), ``inner`` and ``inner_options``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afm.config import ConfigError
from afm.model.checkpoints.adapter_io import load_adapter, save_adapter
from afm.model.checkpoints.checkpoint import load_config
from afm.model.on_device import lora
from afm.training.core.checkpoint import is_model_checkpoint
from afm.training.core.task import Field, LossContext, LossOutput, ParamSpec, TaskBase
from afm.training.tasks.registry import build_task

PREFIX = "lora"
# ModelConfig fields a run may set on top of the base's (shapes and storage come from the base).
RUN_TIME = ("dtype", "remat", "attention_impl", "max_seq_len", "rope_base", "scan_layers", "dropout")


@dataclass
class AdapterOptions:
    """``task_options`` of the adapter task: the LoRA shape, where it starts, and the task it
    wraps (``inner``, with its own ``inner_options``)."""

    rank: int = 16
    alpha: float | None = None  # None: 2 x rank (the one scale rule, alpha / rank = 2)
    targets: list[str] | str | None = None  # None: every target (comma-separated also works)
    layers: list[int] | None = None  # None: every layer
    init_adapter: str = ""  # start from this adapter (same rank and targets)
    inner: str = "pretrain"
    inner_options: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        if self.rank < 1:
            raise ConfigError(f"task_options.rank must be >= 1, got {self.rank}")
        if self.inner == "adapter":
            raise ConfigError("adapter task: the inner task cannot be another adapter task")


def lora_config_from_options(options: AdapterOptions) -> lora.LoraConfig:
    """The one LoRA scale rule: ``alpha`` is 2 x rank unless the options set it, so
    ``afm adapter train --rank 8`` and ``--set task_options.rank=8`` train the same adapter
    (scale alpha / rank = 2)."""
    targets = options.targets or lora.ALL_TARGETS
    if isinstance(targets, str):
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    return lora.LoraConfig(
        rank=options.rank, alpha=float(options.alpha if options.alpha is not None else 2 * options.rank),
        targets=tuple(targets), layers=None if options.layers is None else tuple(int(i) for i in options.layers),
    )


class AdapterTask(TaskBase):
    """LoRA on a frozen base around an inner task (see the module docstring)."""

    name = "adapter"
    artifact = "adapter"
    Options = AdapterOptions

    def __init__(self, config: Any):
        super().__init__(config)
        opts = self.options
        self.lora = lora_config_from_options(opts)
        inner_cfg = dataclasses.replace(config, task=opts.inner, task_options=dict(opts.inner_options))
        self.inner = build_task(opts.inner, inner_cfg)
        self.init_adapter = opts.init_adapter or None
        self.base_config = self._base_config()
        self._start: lora.Adapter | None = None

    # -- the base --------------------------------------------------------------------------
    def _base_config(self) -> Any:
        base = self.config.init_from
        if not base:
            raise ValueError("adapter training needs its base model: set init_from (--base)")
        if not is_model_checkpoint(base):
            raise ValueError(f"adapter base {base} is not a model checkpoint (config.json + params/: a "
                             "training run's model/ folder, or an `afm quantize` output)")
        return load_config(base)

    def configure_model(self, model_config: Any) -> Any:
        """The base's config; of the run's settings only run-time fields apply."""
        overrides = {k: v for k, v in self.config.model_overrides.items() if k in RUN_TIME}
        cfg = self.base_config.replace(**overrides)
        seq_len = self.config.data.seq_len
        if seq_len > cfg.max_seq_len:
            cfg = cfg.replace(max_seq_len=seq_len)
        return self.inner.configure_model(cfg)

    # -- parameters --------------------------------------------------------------------------
    def _keys(self, path: str) -> tuple[str, str]:
        return f"{PREFIX}/{path}/a", f"{PREFIX}/{path}/b"

    def _starting_adapter(self, model_config: Any) -> lora.Adapter | None:
        if self.init_adapter is None:
            return None
        if self._start is None:
            start, _ = load_adapter(self.init_adapter)
            if start.config.rank != self.lora.rank or start.config.targets != self.lora.targets \
                    or start.config.layers != self.lora.layers:
                raise ValueError(
                    f"init_adapter {self.init_adapter} has rank {start.config.rank} / targets "
                    f"{','.join(start.config.targets)}; this run asks for rank {self.lora.rank} / "
                    f"{','.join(self.lora.targets)}")
            start.check_fits(model_config)
            self._start = start
        return self._start

    def extra_params(self, model_config: Any) -> dict[str, ParamSpec]:
        specs = dict(self.inner.extra_params(model_config))
        start = self._starting_adapter(model_config)
        for path, parts in lora.adapter_shapes(model_config, self.lora).items():
            key_a, key_b = self._keys(path)
            (shape_a, axes_a), (shape_b, axes_b) = parts["a"], parts["b"]
            _, n_in = lora.target_of(path)
            if start is not None:
                a0, b0 = (np.asarray(x, np.float32) for x in start.weights[path])
                init_a = lambda rng, mp, v=a0: jnp.asarray(v)  # noqa: E731 (start from this adapter)
                init_b = lambda rng, mp, v=b0: jnp.asarray(v)  # noqa: E731
            else:
                init_a = lambda rng, mp, s=shape_a, n=n_in: lora.init_a(rng, s, n)  # noqa: E731
                init_b = lambda rng, mp, s=shape_b: jnp.zeros(s, jnp.float32)  # noqa: E731
            specs[key_a] = ParamSpec(shape_a, axes_a, init_a, trainable=True)
            specs[key_b] = ParamSpec(shape_b, axes_b, init_b, trainable=True)
        return specs

    def is_trainable(self, path: str) -> bool:
        return False  # every model parameter is the frozen base

    @property
    def exact_rounding(self) -> bool:  # type: ignore[override]
        """The inner task's (adapters on DPO compare with a frozen reference too)."""
        return bool(getattr(self.inner, "exact_rounding", False))

    def wrap_model(self, model: Any, params: dict[str, jax.Array]) -> Any:
        model = self.inner.wrap_model(model, params)
        weights = {p: (params[self._keys(p)[0]], params[self._keys(p)[1]])
                   for p in self.lora.weight_paths(model.cfg.n_layers)}
        return lora.attach(model, lora.Adapter(self.lora, weights))

    def adapter_from(self, params: dict[str, Any], meta: dict[str, Any] | None = None) -> lora.Adapter:
        """The trained adapter out of a run's flat parameters (host arrays)."""
        weights = {}
        for p in self.lora.weight_paths(self.base_config.n_layers):
            a, b = (np.asarray(jax.device_get(params[k]), np.float32) for k in self._keys(p))
            weights[p] = (a, b)
        return lora.Adapter(self.lora, weights, dict(meta or {}))

    def export(self, directory: Path, params: dict[str, Any], model_config: Any, info: dict[str, Any]) -> Path:
        """A run hands off the adapter (``afm.model.checkpoints.adapter_io``; ``workdir/adapter`` at the
        end), not a copy of the base."""

        meta = {"task": self.inner.name, "data": list(self.config.data.paths),
                "weights": dict(self.config.data.weights), "seq_len": self.config.data.seq_len,
                "init_adapter": self.init_adapter, **info}
        return Path(save_adapter(self.adapter_from(params, meta), directory, base=self.config.init_from,
                                 base_config=self.base_config, overwrite=True))

    # -- everything else is the inner task's ---------------------------------------------------
    def batch_fields(self) -> dict[str, Field]:
        return self.inner.batch_fields()

    def make_input(self, *, vocab_size: int, process_index: int, process_count: int, state: Any = None):
        return self.inner.make_input(vocab_size=vocab_size, process_index=process_index,
                                     process_count=process_count, state=state)

    def make_eval_input(self, paths: list[str], *, vocab_size: int, process_index: int, process_count: int):
        return self.inner.make_eval_input(paths, vocab_size=vocab_size, process_index=process_index,
                                          process_count=process_count)

    def before_step(self, step: int, view: Any) -> dict[str, float]:
        return self.inner.before_step(step, view)

    def loss(self, params: dict[str, jax.Array], batch: dict[str, jax.Array], ctx: LossContext) -> LossOutput:
        return self.inner.loss(params, batch, ctx)
