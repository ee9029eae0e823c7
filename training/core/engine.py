"""Everything compiled for a run: parameters and their shardings, the optimizer, the steps.

``Engine.build(cfg, mesh, task)`` turns a :class:`~afm.training.core.config.TrainConfig` and a task
into:

* the model built abstractly (no memory), its parameters as a flat ``{path: array}``
  dict plus the task's extra parameters, each with a sharding from its logical axes;
* the trainable / frozen split (``task.is_trainable``), muParam LR multipliers for the
  trainable ones, and the optimizer over exactly those;
* the jitted train step (``afm.training.core.step``, microbatch accumulation, skip-step) and
  eval step, traced under the activation sharding rules so the model's ``constrain``
  hints map onto this mesh.

The trainer (``afm.training.core.trainer``) and the throughput benchmark both use it, so the
benchmark times the exact step a run executes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from afm.model.distributed.partitioning import activation_sharding
from afm.model.distributed.sharding import (
    ACTIVATION_RULES,
    batch_spec,
    make_mesh,
    param_shardings,
    replicated,
)
from afm.model.params import ParamLayout
from afm.model.parts import ModelParts
from afm.training.core import muparam
from afm.training.core.checkpoint import restore_params_only
from afm.training.core.config import TrainConfig, model_config
from afm.training.core.hooks import ModelView
from afm.training.core.optimizer import build_optimizer
from afm.training.core.schedules import make_schedule
from afm.training.core.step import TrainState, make_eval_step, make_train_step
from afm.training.core.task import Field, LossOutput, ParamSpec, Task, compiler_options

Params = dict[str, jax.Array]


def _opt_shardings(abstract_opt: Any, shardings: dict[str, NamedSharding], mesh: Mesh) -> Any:
    """Optimizer moments take their parameter's sharding; counters are replicated."""

    def pick(path: tuple[Any, ...], leaf: Any) -> NamedSharding:
        for key in reversed(path):
            name = getattr(key, "key", None)
            if isinstance(name, str) and name in shardings:
                return shardings[name]
        return replicated(mesh)

    return jax.tree_util.tree_map_with_path(pick, abstract_opt)


def _with_sharding(tree: Any, shardings: Any) -> Any:
    return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), tree, shardings)


@dataclass
class Engine:
    cfg: TrainConfig
    task: Task
    model_config: Any
    mesh: Mesh
    parts: ModelParts
    shapes: dict[str, tuple[int, ...]]
    names: dict[str, tuple[str | None, ...] | None]
    shardings: dict[str, NamedSharding]
    trainable: list[str]
    frozen: list[str]
    multipliers: dict[str, float]
    optimizer: optax.GradientTransformation
    schedule: Callable[[jax.Array], jax.Array]
    abstract_state: TrainState
    state_shardings: TrainState
    batch_shardings: dict[str, NamedSharding]
    extras: dict[str, ParamSpec]
    _train_step: Callable[..., Any]
    _eval_step: Callable[..., Any]
    build_model: Callable[[Params], Any]  # flat parameters -> the (task-wrapped) model

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def build(cls, cfg: TrainConfig, mesh: Mesh, task: Task) -> Engine:
        """The run compiled for ``task`` (the engine never looks a task up by name:
        ``afm.training.tasks.get_task`` does, above it)."""
        mcfg = task.configure_model(model_config(cfg))
        parts = ModelParts.build(mcfg, cfg.seed)
        shapes, names = dict(parts.shapes), dict(parts.names)
        dtypes: dict[str, Any] = dict(parts.dtypes)
        extras = task.extra_params(mcfg)
        clash = set(extras) & set(shapes)
        if clash:
            raise ValueError(f"task {task.name!r}: extra parameters reuse model paths {sorted(clash)}")
        abs_model = {k: jax.ShapeDtypeStruct(s, dtypes[k]) for k, s in shapes.items()}
        for key, spec in extras.items():
            out = jax.eval_shape(spec.init, jax.random.key(0), abs_model)
            if tuple(out.shape) != tuple(spec.shape):
                raise ValueError(f"task param {key}: init gives {out.shape}, spec says {spec.shape}")
            shapes[key], names[key], dtypes[key] = tuple(spec.shape), tuple(spec.axes), out.dtype
        shardings = param_shardings(shapes, names, mesh)
        trainable = sorted(k for k in shapes if (extras[k].trainable if k in extras else task.is_trainable(k)))
        frozen = sorted(set(shapes) - set(trainable))
        if not trainable:
            raise ValueError(f"task {task.name!r} trains no parameter")
        stored = [k for k in trainable if not jnp.issubdtype(dtypes[k], jnp.floating)]
        if stored:
            raise ValueError(f"task {task.name!r} would train integer storage ({stored[0]}, ...): a palettized "
                             "model is frozen; train LoRA adapters on it (afm adapter train)")

        multipliers = (
            muparam.lr_multipliers(
                {k: shapes[k] for k in trainable}, names, width=mcfg.dim, base_width=mcfg.base_width
            )
            if cfg.optimizer.muparam
            else {k: 1.0 for k in trainable}
        )
        schedule = make_schedule(cfg.schedule, cfg.total_steps)
        optimizer = build_optimizer(cfg.optimizer, schedule, multipliers)

        def abstract_params(keys: list[str]) -> Params:
            return {k: jax.ShapeDtypeStruct(shapes[k], dtypes[k], sharding=shardings[k]) for k in keys}

        abs_train, abs_frozen = abstract_params(trainable), abstract_params(frozen)
        abs_opt = jax.eval_shape(optimizer.init, abs_train)
        opt_shardings = _opt_shardings(abs_opt, shardings, mesh)
        state_shardings = TrainState(
            {k: shardings[k] for k in trainable}, {k: shardings[k] for k in frozen}, opt_shardings
        )
        abstract_state = TrainState(abs_train, abs_frozen, _with_sharding(abs_opt, opt_shardings))

        fields = task.batch_fields()
        seq_spec = batch_spec(mesh, cfg.data.seq_len)

        def field_sharding(shape: tuple[str | int, ...]) -> NamedSharding:
            dims = [seq_spec[0] if d == "batch" else seq_spec[1] if d == "seq" else None for d in shape]
            return NamedSharding(mesh, PartitionSpec(*dims))

        batch_shardings = {k: field_sharding(f.shape) for k, f in fields.items()}

        def build_model(params: Params) -> Any:  # the task may wrap the model (LoRA adapters)
            return task.wrap_model(parts.build_model(params), params)

        train = make_train_step(
            task, optimizer, build_model, mcfg, microbatches=cfg.microbatches,
            peak_lr=cfg.optimizer.learning_rate, schedule=schedule, seed=cfg.seed,
        )
        evaluate = make_eval_step(task, build_model, mcfg)
        rep = replicated(mesh)
        options = compiler_options(task)  # a task compared with a frozen copy rounds exactly
        train_jit = jax.jit(
            train, in_shardings=(state_shardings, batch_shardings, rep),
            out_shardings=(state_shardings, rep), donate_argnums=(0,), compiler_options=options,
        )
        eval_jit = jax.jit(evaluate, in_shardings=(shardings, batch_shardings), out_shardings=rep,
                           compiler_options=options)
        return cls(
            cfg=cfg, task=task, model_config=mcfg, mesh=mesh, parts=parts,
            shapes=shapes, names=names, shardings=shardings,
            trainable=trainable, frozen=frozen, multipliers=multipliers, optimizer=optimizer,
            schedule=schedule, abstract_state=abstract_state, state_shardings=state_shardings,
            batch_shardings=batch_shardings, extras=extras,
            _train_step=train_jit, _eval_step=eval_jit, build_model=build_model,
        )

    # -- state ---------------------------------------------------------------------------------
    def init_state(self, model_params: Params | None = None) -> TrainState:
        """A fresh state: ``model_params`` (e.g. the previous stage's) or a new init, the
        task's extra parameters from their inits, a fresh optimizer state."""
        layout = self.parts.layout
        if model_params is None:
            model_params = self.parts.init({k: self.shardings[k] for k in layout.keys})
        params = dict(model_params)
        extras = self.extras
        if extras:
            model_only = {k: params[k] for k in layout.keys}
            like = {k: self.abstract_state.frozen.get(k, self.abstract_state.params.get(k)) for k in extras}
            restored = self.task.restore_extra_params(like)
            unknown = set(restored) - set(extras)
            if unknown:
                raise ValueError(f"task {self.task.name!r} restored unknown parameters {sorted(unknown)[:3]}")
            params.update(restored)
            for i, (key, spec) in enumerate(sorted(extras.items())):
                if key in restored:
                    continue
                init = jax.jit(spec.init, out_shardings=self.shardings[key])
                params[key] = init(jax.random.fold_in(jax.random.key(self.cfg.seed), 1000 + i), model_only)
        trainable = {k: params[k] for k in self.trainable}
        frozen = {k: params[k] for k in self.frozen}
        opt_state = jax.jit(self.optimizer.init, out_shardings=self.state_shardings.opt_state)(trainable)
        return TrainState(trainable, frozen, opt_state)

    def all_params(self, state: TrainState) -> Params:
        return {**state.params, **state.frozen}

    @property
    def layout(self) -> ParamLayout:
        return self.parts.layout

    def model(self, state: TrainState) -> Any:
        """The ``Transformer`` with the state's current parameters (shared, not copied)."""
        return self.build_model(self.all_params(state))

    def view(self, state: TrainState) -> ModelView:
        """What hooks and ``task.before_step`` see: every current parameter, and the model
        over them (built when first asked for)."""
        return ModelView(self.all_params(state), self.model_config, self.mesh, self.build_model)

    def abstract_params(self, keys: Any = None) -> Params:
        """Abstract arrays (shape, dtype, sharding) of ``keys`` (default: every parameter)."""
        every = {**self.abstract_state.params, **self.abstract_state.frozen}
        return every if keys is None else {k: every[k] for k in keys}

    @classmethod
    def from_checkpoint(cls, cfg: TrainConfig, checkpoint: str, task: Task, mesh: Mesh | None = None, *,
                        whole_run: bool = False) -> tuple[Engine, Params]:
        """The run's engine and a checkpoint's parameters read into its shardings: the one
        way to put a trained model back on devices for a run's task. ``checkpoint`` is any
        checkpoint ``restore_params_only`` reads (a run's workdir or step directory, or an
        ``afm.model`` checkpoint); ``whole_run``: every parameter of the run (task extras
        included: a reward head, adapters), else the model's own."""

        engine = cls.build(cfg, mesh if mesh is not None else make_mesh(cfg.mesh), task)
        like = engine.abstract_params(None if whole_run else engine.layout.keys)
        params, _ = restore_params_only(str(checkpoint), like, None if whole_run else engine.layout)
        return engine, params

    # -- steps ---------------------------------------------------------------------------------
    def global_batch(self, host_batch: dict[str, np.ndarray]) -> dict[str, jax.Array]:
        """This host's rows -> global arrays (``make_array_from_process_local_data``)."""
        missing = set(self.batch_shardings) - set(host_batch)
        if missing:
            raise ValueError(f"batch lacks fields {sorted(missing)} the task {self.task.name!r} needs")
        return {
            k: jax.make_array_from_process_local_data(s, np.asarray(host_batch[k]))
            for k, s in self.batch_shardings.items()
        }

    def train_step(self, state: TrainState, batch: dict[str, jax.Array], step: int) -> tuple[TrainState, dict[str, jax.Array]]:
        with activation_sharding(self.mesh, ACTIVATION_RULES):
            return self._train_step(state, batch, jnp.asarray(step, jnp.int32))

    def eval_sums(self, params: Params, batch: dict[str, jax.Array]) -> LossOutput:
        """The task's loss sums on ``batch`` for ``params`` (every parameter)."""
        with activation_sharding(self.mesh, ACTIVATION_RULES):
            return self._eval_step(params, batch)

    def batch_shape(self, field: Field) -> tuple[int, ...]:
        """A field's global shape for this run (``batch`` = global batch, ``seq`` = seq_len)."""
        sizes = {"batch": self.cfg.data.global_batch_size, "seq": self.cfg.data.seq_len}
        return tuple(sizes[d] if isinstance(d, str) else int(d) for d in field.shape)

    def lower_train_step(self) -> Any:
        """The lowered train step on abstract inputs (memory analysis, HLO dumps)."""
        batch = {
            k: jax.ShapeDtypeStruct(self.batch_shape(f), np.dtype(f.dtype), sharding=self.batch_shardings[k])
            for k, f in self.task.batch_fields().items()
        }
        with activation_sharding(self.mesh, ACTIVATION_RULES):
            return self._train_step.lower(self.abstract_state, batch, jax.ShapeDtypeStruct((), jnp.int32))
