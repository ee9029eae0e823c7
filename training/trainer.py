"""The pre-training loop: sharded init, jitted step, checkpoints, resume, metrics.

``train(config, workdir)`` is the whole engine behind ``afm train``:

1. build the mesh and the model abstractly (no memory), derive each parameter's
   sharding from its logical axes and its muParam LR multiplier from its role;
2. resume from ``workdir/checkpoints`` when a checkpoint exists (params, optimizer
   state, the Grain iterator position), else start from ``init_from`` (the previous
   stage's parameters) or a fresh initialisation made directly in its shardings;
3. run the jitted step (bf16 compute, float32 params and optimizer state) until
   ``steps``, logging loss / grad norm / update RMS / LR / tokens/s / MFU, saving async
   Orbax checkpoints every ``checkpoint.every_steps`` and on SIGTERM, and stopping with
   the last good checkpoint named when the loss or gradient goes NaN/inf;
4. print ``params_sha256: <hex>`` (float32 parameter bytes in sorted path order).

``--steps`` says where to stop, never what the schedule is: the LR schedule's horizon is
the config's ``total_steps``, so N steps and N/2 steps + resume to N are the same run.
"""

from __future__ import annotations

import dataclasses
import math
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from afm.training import muparam
from afm.training.checkpoint import Checkpointer, restore_params_only
from afm.training.config import TrainConfig, get_train_config, model_config
from afm.training.data import make_pipeline
from afm.training.metrics import MetricsWriter, mfu
from afm.training.optimizer import build_optimizer, global_norm
from afm.training.params import ParamLayout, flatten_state, logical_axes, params_sha256
from afm.training.schedules import make_schedule
from afm.training.sharding import batch_spec, global_batch, make_mesh, param_shardings, replicated
from flax import nnx
from jax.sharding import Mesh, NamedSharding


class TrainingDiverged(RuntimeError):
    """Loss or gradient norm became NaN/inf; the message names the last good checkpoint."""


@dataclass
class ModelParts:
    """The model split for a functional training step."""

    graphdef: Any
    rest: Any  # non-parameter state (usually empty)
    layout: ParamLayout
    shapes: dict[str, tuple[int, ...]]
    names: dict[str, tuple[str | None, ...] | None]
    shardings: dict[str, NamedSharding]
    init: Callable[[], dict[str, jax.Array]]


def build_model(mcfg: Any, seed: int, mesh: Mesh) -> ModelParts:
    """Abstract model -> shardings; ``init()`` materialises params already sharded."""
    from afm.model.transformer import Transformer

    def create() -> Any:
        return Transformer(mcfg, rngs=nnx.Rngs(params=seed))

    abstract = nnx.eval_shape(create)
    graphdef, abs_params, abs_rest = nnx.split(abstract, nnx.Param, ...)
    names = logical_axes(abs_params)
    flat_abs, layout = flatten_state(abs_params)
    shapes = {k: tuple(v.shape) for k, v in flat_abs.items()}
    shardings = param_shardings(shapes, names, mesh)

    def init_flat() -> dict[str, jax.Array]:
        _, params, _ = nnx.split(create(), nnx.Param, ...)
        flat, _ = flatten_state(params)
        return {k: v.astype(jnp.float32) for k, v in flat.items()}

    rest = abs_rest
    if jax.tree.leaves(abs_rest):
        rest = jax.jit(lambda: nnx.split(create(), nnx.Param, ...)[2])()
    init = jax.jit(init_flat, out_shardings=shardings)
    return ModelParts(graphdef, rest, layout, shapes, names, shardings, init)


def loss_and_metrics(parts: ModelParts, flat: dict[str, jax.Array], batch: dict[str, jax.Array]):
    """Mean next-token cross-entropy over the unmasked targets."""
    model = nnx.merge(parts.graphdef, parts.layout.unflatten(flat), parts.rest)
    logits = model(batch["inputs"], positions=batch["positions"], segment_ids=batch["segment_ids"])
    logits = logits.astype(jnp.float32)
    logz = jax.nn.logsumexp(logits, axis=-1)
    target_logit = jnp.take_along_axis(logits, batch["targets"][..., None], axis=-1)[..., 0]
    mask = batch["loss_mask"]
    n = jnp.maximum(jnp.sum(mask), 1.0)
    loss = jnp.sum((logz - target_logit) * mask) / n
    return loss, n


def _opt_shardings(abstract_opt: Any, shardings: dict[str, NamedSharding], mesh: Mesh) -> Any:
    """Optimizer moments take their parameter's sharding; counters are replicated."""

    def pick(path: tuple[Any, ...], leaf: Any) -> NamedSharding:
        for key in reversed(path):
            name = getattr(key, "key", None)
            if isinstance(name, str) and name in shardings:
                return shardings[name]
        return replicated(mesh)

    return jax.tree_util.tree_map_with_path(pick, abstract_opt)


def make_train_step(parts: ModelParts, opt: optax.GradientTransformation, peak_lr: float, schedule, in_shardings, out_shardings):
    def step(flat, opt_state, batch):
        (loss, ntok), grads = jax.value_and_grad(
            lambda p: loss_and_metrics(parts, p, batch), has_aux=True
        )(flat)
        count = opt_state.count
        updates, opt_state = opt.update(grads, opt_state, flat)
        new_flat = optax.apply_updates(flat, updates)
        n_params = sum(x.size for x in jax.tree.leaves(updates))
        metrics = {
            "loss": loss,
            "grad_norm": global_norm(grads),
            "update_rms": global_norm(updates) / math.sqrt(n_params),
            "param_norm": global_norm(new_flat),
            "lr": peak_lr * schedule(count),
            "loss_tokens": ntok,
        }
        return new_flat, opt_state, metrics

    return jax.jit(step, in_shardings=in_shardings, out_shardings=out_shardings, donate_argnums=(0, 1))


BATCH_KEYS = ("inputs", "targets", "loss_mask", "segment_ids", "positions")


@dataclass
class StepBundle:
    """Everything compiled for one run: model parts, optimizer, shardings, the step."""

    parts: ModelParts
    opt: optax.GradientTransformation
    multipliers: dict[str, float]
    abstract_params: dict[str, jax.ShapeDtypeStruct]
    abstract_opt: Any
    opt_shardings: Any
    bspec: Any
    step_fn: Callable[..., Any]


def build_step(cfg: TrainConfig, mcfg: Any, mesh: Mesh) -> StepBundle:
    """Model, muParam multipliers, optimizer, shardings and the jitted train step."""
    seq_len = cfg.data.seq_len
    parts = build_model(mcfg, cfg.seed, mesh)
    multipliers = (
        muparam.lr_multipliers(parts.shapes, parts.names, width=mcfg.dim, base_width=mcfg.base_width)
        if cfg.optimizer.muparam
        else {k: 1.0 for k in parts.shapes}
    )
    schedule = make_schedule(cfg.schedule, cfg.total_steps)
    opt = build_optimizer(cfg.optimizer, schedule, multipliers)

    abstract_params = {
        k: jax.ShapeDtypeStruct(s, jnp.float32, sharding=parts.shardings[k]) for k, s in parts.shapes.items()
    }
    abstract_opt = jax.eval_shape(opt.init, abstract_params)
    opt_shardings = _opt_shardings(abstract_opt, parts.shardings, mesh)
    abstract_opt = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract_opt, opt_shardings
    )
    bspec = batch_spec(mesh, seq_len)
    bsharding = NamedSharding(mesh, bspec)
    step_fn = make_train_step(
        parts, opt, cfg.optimizer.learning_rate, schedule,
        in_shardings=(parts.shardings, opt_shardings, {k: bsharding for k in BATCH_KEYS}),
        out_shardings=(parts.shardings, opt_shardings, replicated(mesh)),
    )

    return StepBundle(parts, opt, multipliers, abstract_params, abstract_opt, opt_shardings, bspec, step_fn)


def gather_params(flat: dict[str, jax.Array]) -> dict[str, np.ndarray]:
    """All parameters as host NumPy arrays (gathered across hosts when multi-host)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return {k: np.asarray(multihost_utils.process_allgather(v, tiled=True)) for k, v in flat.items()}
    return {k: np.asarray(jax.device_get(v)) for k, v in flat.items()}


class _StopFlag:
    """SIGTERM (TPU preemption, scheduler kill) -> save a checkpoint and exit cleanly."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> _StopFlag:
        try:
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not the main thread: no handler, run still works
            self._previous = None
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def _console():
    from afm.console import console

    return console


def train(
    config: str | TrainConfig,
    workdir: Path,
    *,
    steps: int | None = None,
    data: list[str] | None = None,
    init_from: Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    quiet: bool = False,
) -> dict[str, Any]:
    """Train (or resume) a stage in ``workdir`` up to ``steps`` (default: ``total_steps``).

    ``data`` (token shard paths/globs) and ``init_from`` (previous stage's workdir or
    checkpoint) override the config. Returns ``first_loss``, ``final_loss``, ``steps``,
    ``params_sha256``, ``checkpoint`` (last saved step dir) and run statistics.
    """
    from afm.config import print_config
    from afm.console import make_progress, print_summary

    cfg = get_train_config(config, overrides)
    if data is not None:
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, paths=list(data)))
    if init_from is not None:
        cfg = dataclasses.replace(cfg, init_from=str(init_from))
    if not cfg.data.paths:
        raise ValueError(f"{cfg.name}: no token shards given (set data.paths or pass --data)")
    stop_at = cfg.total_steps if steps is None else int(steps)
    if stop_at < 0:
        raise ValueError(f"steps must be >= 0, got {stop_at}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    is_main = jax.process_index() == 0
    console = _console()
    if is_main and not quiet:
        print_config(cfg, f"train: {cfg.name}")

    mcfg = model_config(cfg)
    mesh = make_mesh(cfg.mesh)
    seq_len = cfg.data.seq_len
    if seq_len > mcfg.max_seq_len:
        raise ValueError(f"data.seq_len {seq_len} exceeds the model's max_seq_len {mcfg.max_seq_len}")
    batch_rows = mesh.shape["data"] * mesh.shape["fsdp"]
    if cfg.data.global_batch_size % batch_rows:
        raise ValueError(
            f"global batch {cfg.data.global_batch_size} does not split over data x fsdp = {batch_rows}"
        )

    bundle = build_step(cfg, mcfg, mesh)
    parts, opt, multipliers = bundle.parts, bundle.opt, bundle.multipliers
    abstract_params, abstract_opt = bundle.abstract_params, bundle.abstract_opt
    opt_shardings, bspec, step_fn = bundle.opt_shardings, bundle.bspec, bundle.step_fn
    batch_keys = BATCH_KEYS

    pipeline = make_pipeline(
        cfg.data, vocab_size=mcfg.vocab_size,
        process_index=jax.process_index(), process_count=jax.process_count(),
    )
    ckpt = Checkpointer(workdir, keep=cfg.checkpoint.keep, async_save=cfg.checkpoint.async_save)
    start = ckpt.latest_step()
    origin = "fresh initialisation"
    if start is not None:
        flat, opt_state, data_state, meta = ckpt.restore(start, abstract_params, abstract_opt)
        pipeline.load_state_json(data_state)
        origin = f"resumed from {ckpt.step_dir(start)}"
        if meta.get("stage") not in (None, cfg.name):
            console.print(f"[yellow]note: checkpoint was written by stage {meta.get('stage')!r}")
    else:
        start = 0
        if cfg.init_from:
            flat, src = restore_params_only(cfg.init_from, abstract_params, parts.layout)
            origin = f"parameters of {src} (previous stage)"
        else:
            flat = parts.init()
        opt_state = jax.jit(opt.init, out_shardings=opt_shardings)(flat)
    if is_main and not quiet:
        console.print(f"[bold]start:[/] step {start}, {origin}")
        console.print(f"mesh {dict(mesh.shape)}, {jax.device_count()} devices, {jax.process_count()} host(s)")
        for k, v in muparam.describe(multipliers, parts.shapes).items():
            console.print(f"muParam {k}: {v}")

    from afm.model.config import flops_per_token

    fpt = flops_per_token(mcfg, seq_len)
    tokens_per_step = cfg.data.global_batch_size * seq_len
    writer = MetricsWriter(workdir, enabled=is_main)
    last_saved: int | None = start if start > 0 else None
    first_loss: float | None = None
    final_loss: float | None = None
    last_metrics: dict[str, float] = {}
    step = start
    t_mark, step_mark = time.perf_counter(), start
    t_begin = time.perf_counter()

    def save(at: int) -> None:
        nonlocal last_saved
        meta = {"step": at, "stage": cfg.name, "model": dataclasses.asdict(mcfg), "seq_len": seq_len}
        ckpt.save(at, flat, opt_state, pipeline.state_json(), meta)
        last_saved = at

    def diverged(metrics: dict[str, float], at: int) -> None:
        ckpt.wait()
        where = str(ckpt.step_dir(last_saved)) if last_saved is not None else "none (no checkpoint was saved)"
        raise TrainingDiverged(
            f"{cfg.name}: non-finite loss={metrics['loss']} grad_norm={metrics['grad_norm']} "
            f"at step {at}; last good checkpoint: {where}"
        )

    try:
        with _StopFlag() as stop, make_progress() as progress:
            task = progress.add_task(f"train {cfg.name}", total=max(stop_at - start, 0), rate="")
            while step < stop_at:
                host_batch = next(pipeline)
                batch = global_batch({k: host_batch[k] for k in batch_keys}, mesh, bspec)
                flat, opt_state, metrics_dev = step_fn(flat, opt_state, batch)
                step += 1
                # Read the flag once: a SIGTERM arriving later is handled next step.
                stopping = stop.requested
                save_now = step % cfg.checkpoint.every_steps == 0 or step == stop_at or stopping
                log_now = save_now or step == start + 1 or step % cfg.log_every == 0
                if log_now:
                    metrics = {k: float(v) for k, v in jax.device_get(metrics_dev).items()}
                    if not (math.isfinite(metrics["loss"]) and math.isfinite(metrics["grad_norm"])):
                        diverged(metrics, step)
                    now = time.perf_counter()
                    tps = tokens_per_step * (step - step_mark) / max(now - t_mark, 1e-9)
                    t_mark, step_mark = now, step
                    metrics["tokens_per_s"] = tps
                    metrics["mfu"] = mfu(tps, fpt, jax.device_count(), cfg.peak_tflops_per_device)
                    if first_loss is None and step == start + 1:
                        first_loss = metrics["loss"]
                    final_loss = metrics["loss"]
                    last_metrics = metrics
                    writer.write(step, metrics)
                    progress.update(
                        task, rate=f"loss {metrics['loss']:.4f} lr {metrics['lr']:.2e} {tps:,.0f} tok/s"
                    )
                if save_now:
                    save(step)
                progress.update(task, advance=1)
                if stopping:
                    console.print(f"[yellow]SIGTERM: checkpoint saved at step {step}, exiting")
                    break
    finally:
        ckpt.close()
        writer.close()
    model_dir = ""
    # Single-host only: save_params rewrites the directory from every process it runs in.
    if cfg.export_model and jax.process_count() == 1:
        from afm.model.checkpoint import save_params

        model_dir = str(save_params(parts.layout.unflatten(flat), workdir / "model", mcfg, overwrite=True))
    sha = params_sha256(gather_params(flat))
    elapsed = time.perf_counter() - t_begin
    result = {
        "stage": cfg.name,
        "first_loss": first_loss,
        "final_loss": final_loss,
        "steps": step,
        "start_step": start,
        "params_sha256": sha,
        "checkpoint": str(ckpt.step_dir(last_saved)) if last_saved is not None else "",
        "workdir": str(workdir),
        "model_checkpoint": model_dir,
        "tokens": (step - start) * tokens_per_step,
        "seconds": elapsed,
        "preempted": bool(stop.requested),
        "mixture": pipeline.weights,
        **{k: last_metrics[k] for k in ("grad_norm", "update_rms", "lr", "tokens_per_s", "mfu") if k in last_metrics},
    }
    if is_main and not quiet:
        print_summary(
            f"train {cfg.name}",
            {k: v for k, v in result.items() if k not in ("mixture",) and v is not None},
        )
    return result
