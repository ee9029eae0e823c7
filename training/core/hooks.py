"""Evaluation during training: a small callable protocol, run every ``eval.every_steps``.

A hook is anything with a ``name`` and ``__call__(step, view) -> dict[str, float]``::

    class EvalHook(Protocol):
        name: str
        def __call__(self, step: int, view: ModelView) -> dict[str, float]: ...

``view.model`` is the ``afm.model.transformer.Transformer`` with the run's current
(sharded) parameters: call it (``model(tokens, positions=..., segment_ids=...)``), hand it
to ``afm.model.inference.sampling.sample``, or score with ``afm.model.inference.scoring``. ``view.params`` is
the flat ``{path: array}`` dict of every parameter (task extras included). Hooks run on
every host (their jitted computations are collective); only host 0 logs what they return,
as ``eval/<hook name>/<key>`` in the console, TensorBoard and ``metrics.jsonl``.

Configured in ``TrainConfig.eval``: the built-in :class:`HeldOutLoss` (when
``eval.heldout`` names token shards), plus any ``eval.hooks`` given as
``"package.module:factory"``; a factory is called with a :class:`HookContext` and returns
a hook. That is how the evaluation package plugs its benchmark task groups in without
the trainer knowing about them::

    eval:
      every_steps: 1000
      heldout: ["gs://b/heldout/*.parquet"]
      hooks: ["afm.evaluation.hook:benchmarks"]
      options: {groups: [mmlu, gsm8k]}
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import jax
import numpy as np

from afm.imports import resolve


@dataclass
class EvalConfig:
    every_steps: int = 0  # 0: only at the end (when at_end)
    at_end: bool = True
    at_start: bool = False  # also before the first step of a fresh run (the starting point)
    heldout: list[str] = field(default_factory=list)  # token shards for the held-out loss
    heldout_batches: int = 4  # global batches of held-out data per evaluation
    hooks: list[str] = field(default_factory=list)  # "package.module:factory"
    options: dict[str, Any] = field(default_factory=dict)  # for the factories
    # Best-checkpoint selection (afm.training.core.selection): a result key such as
    # "eval/heldout/loss"; every improvement writes workdir/best and best.json.
    select_metric: str = ""
    select_mode: str = "max"  # max | min


@dataclass(frozen=True)
class ModelView:
    """What a hook sees: the current parameters (shared, not copied) and the model over
    them, built on first use. ``build_model(params)`` builds the (task-wrapped) model over
    any flat parameter dict: a task's frozen copy, for instance."""

    params: dict[str, jax.Array]
    model_config: Any
    mesh: Any
    build_model: Callable[[dict[str, jax.Array]], Any] | None = None

    @functools.cached_property
    def model(self) -> Any:
        if self.build_model is None:
            raise ValueError("this view has parameters only (no model builder)")
        return self.build_model(self.params)


@runtime_checkable
class EvalHook(Protocol):
    name: str

    def __call__(self, step: int, view: ModelView) -> dict[str, float]: ...


@dataclass(frozen=True)
class HookContext:
    """What a hook factory gets: the run's config, its engine, workdir and options."""

    config: Any
    engine: Any
    workdir: str
    options: dict[str, Any]


class HeldOutLoss:
    """The task's loss (and metrics) on the first ``batches`` global batches of held-out
    shards, read from the same fixed start every time so evaluations are comparable."""

    name = "heldout"

    def __init__(self, engine: Any, paths: list[str], batches: int):
        self.engine = engine
        self.paths = list(paths)
        self.batches = batches

    def __call__(self, step: int, view: ModelView) -> dict[str, float]:
        source = self.engine.task.make_eval_input(
            self.paths, vocab_size=self.engine.model_config.vocab_size,
            process_index=jax.process_index(), process_count=jax.process_count(),
        )
        total: Any = None
        try:
            for _ in range(self.batches):
                sums = self.engine.eval_sums(view.params, self.engine.global_batch(next(source)))
                total = sums if total is None else jax.tree.map(np.add, total, jax.device_get(sums))
                total = jax.device_get(total)
        finally:
            source.close()
        out = {"loss": float(total.loss[0] / max(total.loss[1], 1e-9))}
        out |= {k: float(s / max(w, 1e-9)) for k, (s, w) in total.metrics.items()}
        return out


def build_hooks(context: HookContext) -> list[EvalHook]:
    """The hooks ``context.config.eval`` asks for, checked against the protocol."""
    cfg: EvalConfig = context.config.eval
    hooks: list[EvalHook] = []
    if cfg.heldout:
        hooks.append(HeldOutLoss(context.engine, cfg.heldout, cfg.heldout_batches))
    for target in cfg.hooks:
        hook = resolve(target, what="eval hook")(context)
        if not isinstance(hook, EvalHook):
            raise TypeError(f"eval hook {target!r} returned {hook!r}, not a (step, view) -> dict callable with a name")
        hooks.append(hook)
    return hooks


def run_hooks(hooks: list[EvalHook], step: int, view: ModelView) -> dict[str, float]:
    """Every hook's results as ``eval/<name>/<key>``."""
    out: dict[str, float] = {}
    for hook in hooks:
        for key, value in hook(step, view).items():
            out[f"eval/{hook.name}/{key}"] = float(value)
    return out
