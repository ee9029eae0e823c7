"""One trainer, many tasks: what a *task* is and how the engine uses it.

Pre-training, distillation, SFT, reward modelling, DPO/IPO/MDLOO and LoRA fine-tuning
differ in four things only, so a task is an object with these four answers and the
engine (``afm.training.core.engine`` / ``trainer``) does everything else: sharding, microbatch
accumulation, the optimizer, skip-steps, checkpoints, elastic resume, preemption,
evaluation hooks, metrics.

1. **Batch spec** -- :meth:`Task.batch_fields`: the arrays a step receives, their dtype
   and symbolic shape (``"batch"`` is split over the data axes, ``"seq"`` over the
   sequence axis). :meth:`Task.make_input` builds the host-side iterator that yields them
   and whose :class:`~afm.training.data.loader.LoaderState` (a JSON spec plus an ``int64``
   array keyed by lane/host in column 0) goes into every checkpoint.
2. **Loss** -- :meth:`Task.loss` returns *sums and weights*, never means
   (:class:`LossOutput`): the engine adds them over microbatches and hosts and divides
   once, so gradient accumulation equals one large batch whatever the loss normalises
   over (tokens for LM losses, pairs for DPO/reward models, sequences for MDLOO).
3. **Metrics** -- more ``(sum, weight)`` pairs in the same output, reported as ratios.
4. **Parameters** -- :meth:`Task.extra_params` adds task-owned tensors next to the
   model's (a reward head, LoRA adapters, a frozen reference or teacher copy), each with
   logical axes and an init; :meth:`Task.is_trainable` says which parameters train.
   Frozen ones get no gradient and no optimizer state.

The loss gets every parameter (trainable and frozen) as one flat ``{path: array}`` dict
and a :class:`LossContext` whose :meth:`~LossContext.model` turns the ``model/...``-free
model paths into a ``Transformer``; a task may rewrite parameters first (LoRA:
``W + A @ B``) or build a second model from frozen copies (a reference or teacher).

How the planned tasks map onto this (the next issues build them):

======================  ======================================================================
task                    batch / loss / parameters
======================  ======================================================================
pretrain (this module)  packed tokens; next-token cross-entropy (chunked); all trainable
distillation            + ``teacher_targets`` (the teacher's top-1 ids, precomputed or from a
                        frozen ``teacher/...`` copy); CE against them
SFT                     chat-formatted rows with ``loss_mask`` on assistant turns; dropout
                        from ``ctx.rng``; CE
reward model            ``chosen``/``rejected`` token pairs; ``extra_params`` adds a scalar
                        ``reward_head``; Bradley-Terry loss, weight = pairs
DPO / IPO / MDLOO       pairs or k samples per prompt + ``ref_logprobs`` (precomputed, or a
                        frozen ``ref/...`` copy via ``extra_params`` init = copy of the model)
LoRA                    ``extra_params`` = adapters (trainable); ``is_trainable`` false for
                        the base model; ``loss`` applies ``W + scale * A @ B`` then delegates
======================  ======================================================================
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from afm.config import ConfigError, from_dict
from afm.model.checkpoints.checkpoint import save_params
from afm.model.parts import ModelParts
from afm.model.text.tokenizer import Tokenizer
from afm.model.transformer import StackedLayersView, scan_storage
from afm.training.core.hooks import ModelView

Array = jax.Array
Sums = tuple[Array, Array]  # (sum, weight)


@dataclass(frozen=True)
class Field:
    """One array of a batch: numpy dtype and symbolic shape (``"batch"``, ``"seq"`` or ints)."""

    dtype: str
    shape: tuple[str | int, ...] = ("batch", "seq")


@dataclass(frozen=True)
class ParamSpec:
    """A parameter a task adds: shape, logical axes (for sharding and muParam), an init
    ``(rng, model_params) -> array`` and whether it trains."""

    shape: tuple[int, ...]
    axes: tuple[str | None, ...]
    init: Callable[[Array, dict[str, Array]], Array]
    trainable: bool = True


STACKED = "stacked/"  # a frozen copy's pre-stacked layers: PREFIX + STACKED + "attn/wq", [n_layers, ...]
_LAYER = re.compile(r"^layers/(\d+)/(.+)$")


def _stacked_groups(keys: Any) -> dict[str, list[str]]:
    """Per layer sub-path (``attn/wq``), the model keys of every layer in order."""
    groups: dict[str, dict[int, str]] = {}
    for k in keys:
        m = _LAYER.match(k)
        if m:
            groups.setdefault(m.group(2), {})[int(m.group(1))] = k
    return {sub: [by[i] for i in sorted(by)] for sub, by in groups.items()}


def frozen_storage(model: dict[str, Array], model_config: Any, prefix: str) -> dict[str, Array]:
    """A frozen copy of ``model`` (flat model parameters) as :func:`frozen_model_copy`
    stores it: each parameter held as the forward pass holds it
    (``afm.model.transformer.scan_storage``: weight matrices in the compute dtype, norm
    scales in their float32), and, when the model scans its layers, every layer's
    parameters stacked ``[n_layers, ...]`` once under ``prefix + "stacked/<sub-path>"``,
    so no step stacks (copies) them again. The copy computes exactly what the model
    computes: the log-ratio of policy and reference is 0 before the first update."""

    compute = jnp.dtype(model_config.dtype)
    out: dict[str, Array] = {}
    stacked = _stacked_groups(model) if model_config.scan_layers else {}
    in_stack = {k for keys in stacked.values() for k in keys}
    for sub, keys in stacked.items():
        out[prefix + STACKED + sub] = jnp.stack([scan_storage(model[k], compute) for k in keys])
    for k, v in model.items():
        if k not in in_stack:
            out[prefix + k] = scan_storage(v, compute)
    return out


def frozen_model_copy(model_config: Any, prefix: str) -> dict[str, ParamSpec]:
    """A frozen copy of the model's parameters under ``prefix`` (DPO's and MDLOO's
    reference policy), initialised from the start model and stored as
    :func:`frozen_storage` says: half the memory of a float32 copy (5 GiB of the
    on-device model's 10), identical log-probs, and stacked once when the layers are
    scanned. Read it back as a model with :func:`frozen_model`."""

    parts = ModelParts.build(model_config, 0)
    stacked = _stacked_groups(parts.shapes) if model_config.scan_layers else {}
    in_stack = {k for keys in stacked.values() for k in keys}

    def axes(k: str) -> tuple[str | None, ...]:
        return tuple(parts.names.get(k) or (None,) * len(parts.shapes[k]))

    def init_stacked(rng: Array, model: dict[str, Array], sub: str) -> Array:
        return jnp.stack([scan_storage(model[k], jnp.dtype(model_config.dtype)) for k in stacked[sub]])

    def init_one(rng: Array, model: dict[str, Array], key: str) -> Array:
        return scan_storage(model[key], jnp.dtype(model_config.dtype))

    specs = {prefix + STACKED + sub: ParamSpec((len(keys), *parts.shapes[keys[0]]), (None, *axes(keys[0])),
                                                functools.partial(init_stacked, sub=sub), trainable=False)
             for sub, keys in stacked.items()}
    specs |= {prefix + k: ParamSpec(tuple(shape), axes(k), functools.partial(init_one, key=k), trainable=False)
              for k, shape in parts.shapes.items() if k not in in_stack}
    return specs


def frozen_model(build_model: Callable[[dict[str, Array]], Any], params: dict[str, Array], prefix: str) -> Any:
    """The model a frozen copy under ``prefix`` (:func:`frozen_model_copy`) computes, from
    a run's flat parameters, with no gradient: a ``Transformer``, or, for pre-stacked
    layers, a view that hands them to every forward as they are stored."""

    own = {k[len(prefix):]: jax.lax.stop_gradient(v) for k, v in params.items() if k.startswith(prefix)}
    stacked = {k[len(STACKED):]: own.pop(k) for k in list(own) if k.startswith(STACKED)}
    if not stacked:
        return build_model(own)
    # The per-layer entries a Transformer is built from are slices of the stacks; the scan
    # reads the stacks themselves, so the slices are dead code the compiler drops.
    n_layers = next(iter(stacked.values())).shape[0]
    for sub, value in stacked.items():
        for i in range(n_layers):
            own[f"layers/{i}/{sub}"] = value[i]
    return StackedLayersView(build_model(own), stacked)


# XLA's compile options for a program whose model is compared with a frozen copy of itself
# (``TaskBase.exact_rounding``): with excess precision allowed (XLA's default) the compiler
# may skip a bf16 rounding in one forward pass and keep it in the other (which one depends
# on fusion, and a differentiated pass fuses differently from a plain one), so the policy
# and its reference would differ at step 0; with it off every value is rounded where the
# program says, in both passes alike. Set per program, so whatever ``XLA_FLAGS`` says.
EXACT_ROUNDING: dict[str, Any] = {"xla_allow_excess_precision": False}


def compiler_options(task: Any) -> dict[str, Any] | None:
    """The compile options of the programs a task runs (its train and eval steps, its
    side programs): :data:`EXACT_ROUNDING` for a task with ``exact_rounding``, else the
    compiler's defaults."""
    return dict(EXACT_ROUNDING) if task.exact_rounding else None


@dataclass(frozen=True)
class SideProgram:
    """A program a task runs beside its train step while the run's state stays on the
    device (online RL's rollout sampler and its scoring pass), lowered on abstract inputs
    for the run's memory plan. ``resident_bytes``: how much of its arguments is that state
    (the parameters it reads), so the plan does not count them twice."""

    lowered: Any
    resident_bytes: int


@jax.tree_util.register_dataclass
@dataclass
class LossOutput:
    """``loss`` and every metric as ``(sum, weight)``; the reported value is sum / weight."""

    loss: Sums
    metrics: dict[str, Sums] = field(default_factory=dict)


@dataclass(frozen=True)
class LossContext:
    """What a loss may use besides parameters and the batch."""

    build_model: Callable[[dict[str, Array]], Any]
    model_config: Any
    rng: Array  # differs per step and microbatch (dropout, sampling)
    train: bool
    step: Array | None = None  # the step being trained (int32; annealing); None in evaluation

    def model(self, params: dict[str, Array]) -> Any:
        """The ``Transformer`` whose parameters are ``params``' model entries."""
        return self.build_model(params)


@runtime_checkable
class InputSource(Protocol):
    """A host's batch iterator with a checkpointable position."""

    def __next__(self) -> dict[str, np.ndarray]: ...

    def state(self) -> Any: ...

    def describe(self) -> dict[str, Any]: ...  # for the run's log: "lanes", "mixture" when it has them

    def close(self) -> None: ...


def parse_task_options(options_class: type | None, raw: dict[str, Any] | None, task: str = "task") -> Any:
    """The one way ``task_options`` are read: the task's dataclass built from the mapping
    (unknown keys and wrong types are a :class:`~afm.config.ConfigError` naming the key),
    then the dataclass's own ``check()`` when it has one. A task without options takes
    none: any key given is an error."""

    raw = dict(raw or {})
    if options_class is None:
        if raw:
            raise ConfigError(f"the {task} task takes no task_options; got {sorted(raw)}")
        return None
    try:
        options = from_dict(options_class, raw, "task_options")
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{task}: {exc}") from None
    check = getattr(options, "check", None)
    if check is not None:
        check()
    return options


@runtime_checkable
class Task(Protocol):
    """Every hook the engine and the loop call; :class:`TaskBase` gives the defaults.

    Model: :meth:`configure_model`, :meth:`extra_params` (+ :meth:`restore_extra_params`),
    :meth:`is_trainable`, :meth:`wrap_model`. Data: :meth:`batch_fields`,
    :meth:`make_input`, :meth:`make_eval_input`, and :meth:`before_step`, the loop's hook
    before a step draws its batch (online RL samples its rollouts there). Objective:
    :meth:`loss`. Hand-off: :meth:`export` (what a finished run, and its best checkpoint,
    leaves behind). The run around the loop: :meth:`prepare_config` (the run's config as the
    task needs it, before anything is built) and :meth:`finish_run` (what the task adds to
    the run's result), so a stage runs the same whichever command starts it."""

    name: str
    artifact: str  # the name of what export() writes in the workdir at the end ("model", ...)
    options: Any  # the parsed task_options (:func:`parse_task_options`)
    exact_rounding: bool  # compile with EXACT_ROUNDING (a loss comparing the model with a frozen copy)

    @classmethod
    def prepare_config(cls, config: Any, workdir: str) -> Any: ...

    def start_run(self, workdir: str) -> None: ...

    def finish_run(self, workdir: str, result: dict[str, Any]) -> dict[str, Any]: ...

    def configure_model(self, model_config: Any) -> Any: ...

    def extra_params(self, model_config: Any) -> dict[str, ParamSpec]: ...

    def restore_extra_params(self, like: dict[str, Any]) -> dict[str, Array]: ...

    def is_trainable(self, path: str) -> bool: ...

    def wrap_model(self, model: Any, params: dict[str, Array]) -> Any: ...

    def batch_fields(self) -> dict[str, Field]: ...

    def make_input(
        self, *, vocab_size: int, process_index: int, process_count: int, state: Any = None
    ) -> InputSource: ...

    def make_eval_input(
        self, paths: list[str], *, vocab_size: int, process_index: int, process_count: int
    ) -> InputSource: ...

    def before_step(self, step: int, view: ModelView) -> dict[str, float]: ...

    def side_programs(self, engine: Any) -> dict[str, SideProgram]: ...

    def loss(self, params: dict[str, Array], batch: dict[str, Array], ctx: LossContext) -> LossOutput: ...

    def export(self, directory: Path, params: dict[str, Any], model_config: Any, info: dict[str, Any]) -> Path: ...


class TaskBase:
    """Defaults for every hook but ``batch_fields``, ``make_input`` and ``loss``: no extra
    parameters, everything trains, the model config and the model unchanged, nothing
    before a step, the model's parameters as the hand-off, the config as given.

    ``Options`` is the dataclass of the task's ``task_options``; every task parses them the
    one way, :func:`parse_task_options`, into ``self.options``."""

    name = "task"
    artifact = "model"
    Options: type | None = None  # the task_options dataclass (None: the task takes none)
    # True for a task whose loss compares the model with a frozen copy of itself (DPO/IPO,
    # online RL): the engine compiles its programs with EXACT_ROUNDING, so the log-ratio of
    # policy and reference is exactly 0 at step 0 in every precision and layout.
    exact_rounding = False

    def __init__(self, config: Any):
        self.config = config  # the run's TrainConfig
        self.options = parse_task_options(self.Options, config.task_options, self.name)

    @classmethod
    def prepare_config(cls, config: Any, workdir: str) -> Any:
        """The run's config as this task needs it, before the task or anything else is built
        (held-out batch counts, the selection metric, a model shape read from ``init_from``).
        The one front door (``afm.training.runs.train``) calls it for every command, so
        ``afm train --config tiny-sft`` and ``afm sft --config tiny-sft`` run the same stage."""
        return config

    def start_run(self, workdir: str) -> None:
        """A last check once the task is built and given what only the caller has (a reward
        in memory), before anything is compiled: what the run cannot do without is a
        one-line error now, not after the model is built."""

    def finish_run(self, workdir: str, result: dict[str, Any]) -> dict[str, Any]:
        """The run's result with what this task adds once the loop is done (a held-out
        report, a summary file); called by the front door after the last checkpoint."""
        return result

    def configure_model(self, model_config: Any) -> Any:
        """The model config this task trains (e.g. dropout on, a segment cap)."""
        return model_config

    def extra_params(self, model_config: Any) -> dict[str, ParamSpec]:
        """Task-owned tensors next to the model's (heads, adapters, frozen copies)."""
        return {}

    def restore_extra_params(self, like: dict[str, Any]) -> dict[str, Array]:
        """Extra parameters read from storage instead of drawn by their ``init`` (a frozen
        teacher's weights): ``like`` maps each extra path to an abstract array with its
        dtype and sharding; return arrays for the paths this task restores (the engine
        calls this once, for a fresh run; a resumed run reads its own checkpoint)."""
        return {}

    def is_trainable(self, path: str) -> bool:
        """Whether a model parameter trains (extras say so in their ``ParamSpec``)."""
        return True

    def wrap_model(self, model: Any, params: dict[str, Array]) -> Any:
        """The model the loss, eval hooks and exports see, given every parameter: the
        ``Transformer`` itself, or with the task's own parameters attached (LoRA)."""
        return model

    def make_eval_input(
        self, paths: list[str], *, vocab_size: int, process_index: int, process_count: int
    ) -> InputSource:
        raise NotImplementedError(f"task {self.name!r} has no held-out input")

    def before_step(self, step: int, view: ModelView) -> dict[str, float]:
        """Called by the loop before step ``step`` (0-based: the number of steps done)
        draws its batch, with the current model; returns metrics to log with that step.
        Online RL samples its rollouts here; other tasks do nothing."""
        return {}

    def side_programs(self, engine: Any) -> dict[str, SideProgram]:
        """The programs :meth:`before_step` runs, lowered on abstract inputs for the memory
        plan (``afm.training.runs.memory_plan``): the device holds the run's whole state
        while they run, so each must fit beside it. None for a task that runs none."""
        return {}

    def export(self, directory: Path, params: dict[str, Any], model_config: Any, info: dict[str, Any]) -> Path:
        """Write what this run hands on, from every parameter of the run, to ``directory``
        (the trainer calls it at the end with ``workdir/<artifact>`` and for every new best
        checkpoint with ``workdir/best``): by default the model's own parameters as an
        ``afm.model`` checkpoint (task extras such as a frozen reference are left out)."""

        return Path(save_params(self.model_params(params, model_config), directory, model_config,
                                overwrite=True))

    @staticmethod
    def model_params(params: dict[str, Any], model_config: Any) -> Any:
        """The model's own entries of a run's flat parameters, as the model's nested state."""

        layout = ModelParts.layout_of(model_config)
        return layout.unflatten({k: params[k] for k in layout.keys})


def task_tokenizer(task: Any) -> Any:
    """The tokenizer a task reads its text data with (``task_options.tokenizer``), loaded
    once per task; a clear error when the option is missing. Tasks over text (reward
    model, DPO/IPO, MDLOO) declare ``tokenizer = property(task_tokenizer)``."""
    cached = task.__dict__.get("_tokenizer")
    if cached is None:


        if not task.options.tokenizer:
            raise ConfigError(f"the {task.name} task needs task_options.tokenizer (a tokenizer directory)")
        cached = task.__dict__["_tokenizer"] = Tokenizer.load(task.options.tokenizer)
    return cached
