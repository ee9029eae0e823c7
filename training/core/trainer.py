"""The training loop: one trainer for every task (pre-training first; see ``afm.training.core.task``).

``train(config, workdir)`` is the engine behind ``afm train``:

1. build the mesh and the :class:`~afm.training.core.engine.Engine` (model and task parameters
   with their shardings, the trainable split, optimizer, jitted steps);
2. resume from ``workdir/checkpoints`` when one exists (parameters, optimizer state, every
   host's data lanes: also on a different number of hosts), else start from ``init_from``
   (the previous stage's parameters) or a fresh initialisation made in its shardings;
3. step until ``steps``: log loss / grad norm / update RMS / LR / tokens/s / MFU, skip bad
   steps (``optimizer.skip``), save async Orbax checkpoints every ``checkpoint.every_steps``
   and when any host is asked to stop (agreed by all hosts), run the evaluation hooks every
   ``eval.every_steps``, trace ``profile_steps`` with the JAX profiler, and stop with the
   last good checkpoint named when training diverges;
4. print ``params_sha256: <hex>`` (float32 parameter bytes in sorted path order).

``--steps`` says where to stop, never what the schedule is: the LR schedule's horizon is
the config's ``total_steps``, so N steps and N/2 steps + resume to N are the same run.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from afm.model.params import params_sha256
from afm.model.sharding import make_mesh
from afm.training.core import muparam
from afm.training.core.checkpoint import Checkpointer, gather_data_state, restore_params_only
from afm.training.core.config import TrainConfig, get_train_config
from afm.training.core.engine import Engine
from afm.training.core.hooks import HookContext, build_hooks, run_hooks
from afm.training.core.metrics import MetricsWriter, mfu
from afm.training.core.optimizer import skipped_updates
from afm.training.core.preemption import StopSignal
from afm.training.core.selection import BestCheckpoint
from afm.training.core.task import Task

from afm import fs


class TrainingDiverged(RuntimeError):
    """Loss or parameters became NaN/inf, or too many steps in a row were skipped; the
    message names the last good checkpoint."""


def gather_params(flat: dict[str, jax.Array]) -> dict[str, np.ndarray]:
    """All parameters as host NumPy arrays (gathered across hosts when multi-host)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return {k: np.asarray(multihost_utils.process_allgather(v, tiled=True)) for k, v in flat.items()}
    return {k: np.asarray(jax.device_get(v)) for k, v in flat.items()}


def parse_profile_steps(text: str) -> tuple[int, int] | None:
    """``"START:END"`` (or one step ``"N"``) -> the steps to trace, inclusive."""
    if not text:
        return None
    try:
        first, _, last = text.partition(":")
        start, end = int(first), int(last or first)
    except ValueError:
        raise ValueError(f"profile_steps must be START:END, got {text!r}") from None
    if start < 1 or end < start:
        raise ValueError(f"profile_steps must satisfy 1 <= START <= END, got {text!r}")
    return start, end


def _console():
    from afm.console import console

    return console


def _resolve_config(config: str | TrainConfig, data, init_from, overrides, profile_steps) -> TrainConfig:
    cfg = get_train_config(config, overrides)
    if data is not None:
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, paths=list(data)))
    if init_from is not None:
        cfg = dataclasses.replace(cfg, init_from=str(init_from))
    if profile_steps is not None:
        cfg = dataclasses.replace(cfg, profile_steps=profile_steps)
    parse_profile_steps(cfg.profile_steps)
    return cfg


def _check_shapes(cfg: TrainConfig, mesh: Any, mcfg: Any) -> None:
    seq_len = cfg.data.seq_len
    if seq_len > mcfg.max_seq_len:
        raise ValueError(f"data.seq_len {seq_len} exceeds the model's max_seq_len {mcfg.max_seq_len}")
    rows = mesh.shape["data"] * mesh.shape["fsdp"]
    g, m = cfg.data.global_batch_size, cfg.microbatches
    if m < 1 or g % m:
        raise ValueError(f"global batch {g} does not split into microbatches={m}")
    if (g // m) % rows:
        raise ValueError(f"a microbatch of {g // m} rows does not split over data x fsdp = {rows}")


def _log_dir(cfg: TrainConfig, workdir: str) -> Path:
    """Metrics and TensorBoard: in the workdir when it is local, else under ``log_dir``."""
    if not fs.is_remote(workdir):
        return Path(workdir)
    return Path(cfg.log_dir or f"afm-logs/{cfg.name}")


def train(
    config: str | TrainConfig,
    workdir: str | Path,
    *,
    steps: int | None = None,
    data: list[str] | None = None,
    init_from: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    profile_steps: str | None = None,
    quiet: bool = False,
    task: Task | None = None,
) -> dict[str, Any]:
    """Train (or resume) a run in ``workdir`` up to ``steps`` (default: ``total_steps``).

    ``task``: the run's task object, when the caller made it (e.g. with a reward already
    in memory); by default the config's ``task`` is built.

    ``data`` (token shard paths/globs) and ``init_from`` (previous stage's workdir or
    checkpoint) override the config. Returns ``first_loss``, ``final_loss``, ``steps``,
    ``params_sha256``, ``checkpoint`` (last saved step dir), evaluation results and run
    statistics.
    """
    from afm.config import print_config
    from afm.console import make_progress, print_summary

    cfg = _resolve_config(config, data, init_from, overrides, profile_steps)
    stop_at = cfg.total_steps if steps is None else int(steps)
    if stop_at < 0:
        raise ValueError(f"steps must be >= 0, got {stop_at}")
    workdir = str(fs.as_path(str(workdir)))
    fs.as_path(workdir).mkdir(parents=True, exist_ok=True)
    if not cfg.data.index_cache:
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, index_cache=f"{workdir}/data-index.json"))
    is_main = jax.process_index() == 0
    console = _console()
    if is_main and not quiet:
        print_config(cfg, f"train: {cfg.name}")

    mesh = make_mesh(cfg.mesh)
    engine = Engine.build(cfg, mesh, task)
    mcfg = engine.model_config
    _check_shapes(cfg, mesh, mcfg)
    task = engine.task
    ckpt = Checkpointer(workdir, keep=cfg.checkpoint.keep, async_save=cfg.checkpoint.async_save)
    process = {"process_index": jax.process_index(), "process_count": jax.process_count()}

    start = ckpt.latest_step()
    if start is not None:
        state, data_state, meta = ckpt.restore(start, engine.abstract_state)
        source = task.make_input(vocab_size=mcfg.vocab_size, state=data_state, **process)
        origin = f"resumed from {ckpt.step_dir(start)}"
        if meta.get("stage") not in (None, cfg.name):
            console.print(f"[yellow]note: checkpoint was written by stage {meta.get('stage')!r}")
        if meta.get("process_count") not in (None, jax.process_count()):
            origin += f" (written by {meta['process_count']} host(s), now {jax.process_count()})"
    else:
        start = 0
        model_params = None
        origin = "fresh initialisation"
        if cfg.init_from:
            like = {k: engine.abstract_state.params.get(k, engine.abstract_state.frozen.get(k)) for k in engine.layout.keys}
            model_params, src = restore_params_only(cfg.init_from, like, engine.layout)
            origin = f"parameters of {src} (previous stage)"
        state = engine.init_state(model_params)
        source = task.make_input(vocab_size=mcfg.vocab_size, state=None, **process)

    from afm.model.config import flops_per_token
    from afm.model.layers import resolve_attention_impl

    backend = resolve_attention_impl(mcfg)
    if is_main and not quiet:
        console.print(f"[bold]start:[/] step {start}, {origin}")
        console.print(
            f"mesh {dict(mesh.shape)}, {jax.device_count()} devices, {jax.process_count()} host(s); "
            f"task {task.name}; attention {backend}; remat {mcfg.remat}; "
            f"microbatches {cfg.microbatches}; data {source.describe().get('lanes', '-')} lanes"
        )
        for k, v in muparam.describe(engine.multipliers, engine.shapes).items():
            console.print(f"muParam {k}: {v}")
        if engine.frozen:
            console.print(f"frozen: {len(engine.frozen)} tensors (no gradient, no optimizer state)")

    hooks = build_hooks(HookContext(cfg, engine, workdir, dict(cfg.eval.options)))
    selector = (BestCheckpoint(workdir, cfg.eval.select_metric, cfg.eval.select_mode, write=is_main)
                if cfg.eval.select_metric else None)
    profile = parse_profile_steps(cfg.profile_steps)
    fpt = flops_per_token(mcfg, cfg.data.seq_len)
    tokens_per_step = cfg.data.global_batch_size * cfg.data.seq_len
    writer = MetricsWriter(_log_dir(cfg, workdir), enabled=is_main)
    last_saved: int | None = start if start > 0 else None
    first_loss: float | None = None
    final_loss: float | None = None
    last_metrics: dict[str, float] = {}
    evals: dict[str, float] = {}
    step = start
    t_mark, step_mark = time.perf_counter(), start
    t_begin = time.perf_counter()
    # the optimizer's running count (restored on resume), so "skipped since the last log" is exact
    skipped_total, consecutive_skips = float(jax.device_get(skipped_updates(state.opt_state))), 0
    tracing = False

    def save(at: int) -> None:
        nonlocal last_saved
        meta = {
            "step": at, "stage": cfg.name, "task": task.name, "model": dataclasses.asdict(mcfg),
            "task_options": dict(cfg.task_options), "total_steps": cfg.total_steps,
            "seq_len": cfg.data.seq_len, "process_count": jax.process_count(),
        }
        ckpt.save(at, state, gather_data_state(source.state()), meta)
        last_saved = at

    def diverged(why: str, at: int) -> None:
        ckpt.wait()
        where = str(ckpt.step_dir(last_saved)) if last_saved is not None else "none (no checkpoint was saved)"
        raise TrainingDiverged(f"{cfg.name}: {why} at step {at}; last good checkpoint: {where}")

    def evaluate(at: int) -> dict[str, float]:
        results = run_hooks(hooks, at, engine.view(state))
        if selector is not None:
            selector.update(at, results, lambda path: export(path, at))
        return results

    def export(path: str | Path, at: int) -> str:
        """What the task hands on (``task.export``), from the current parameters; host 0
        writes (parameters gathered first when there are several hosts)."""
        params = engine.all_params(state)
        if jax.process_count() > 1:
            params = gather_params(params)
        if not is_main:
            return str(path)
        exported = dataclasses.replace(mcfg, max_segments=0)  # a run-time setting of this run
        return str(task.export(Path(path), params, exported, {"steps": at, "stage": cfg.name}))

    if hooks and cfg.eval.at_start and start == 0:  # the starting point, for before/after
        evals = evaluate(0)
        writer.write(0, evals)
    try:
        with StopSignal(cfg.preemption_check_every) as stop, make_progress() as progress:
            bar = progress.add_task(f"train {cfg.name}", total=max(stop_at - start, 0), rate="")
            while step < stop_at:
                if profile and step + 1 == profile[0] and is_main:
                    jax.profiler.start_trace(str(_log_dir(cfg, workdir) / "profile"))
                    tracing = True
                step_metrics = task.before_step(step, engine.view(state))  # rollouts, for online RL
                batch = engine.global_batch(next(source))
                state, metrics_dev = engine.train_step(state, batch, step)
                step += 1
                if tracing and step == profile[1]:
                    jax.block_until_ready(metrics_dev)
                    jax.profiler.stop_trace()
                    tracing = False
                stopping = stop.agreed(step)
                save_now = step % cfg.checkpoint.every_steps == 0 or step == stop_at or stopping
                eval_now = bool(hooks) and (
                    (cfg.eval.every_steps and step % cfg.eval.every_steps == 0)
                    or (cfg.eval.at_end and step == stop_at)
                )
                log_now = (save_now or eval_now or bool(step_metrics) or step == start + 1
                           or step % cfg.log_every == 0)
                if log_now:
                    metrics = {k: float(v) for k, v in jax.device_get(metrics_dev).items()}
                    # Skips are counted by the optimizer; between two logged steps "all
                    # skipped" extends the run of consecutive skips, anything else ends it.
                    new_skips = metrics["skipped_total"] - skipped_total
                    skipped_total = metrics.pop("skipped_total")
                    all_skipped = new_skips >= step - step_mark
                    consecutive_skips = consecutive_skips + (step - step_mark) if all_skipped else 0
                    if not math.isfinite(metrics["param_norm"]):
                        diverged(f"non-finite parameters (param_norm={metrics['param_norm']})", step)
                    if not cfg.optimizer.skip.enabled and not (
                        math.isfinite(metrics["loss"]) and math.isfinite(metrics["grad_norm"])
                    ):
                        diverged(f"non-finite loss={metrics['loss']} grad_norm={metrics['grad_norm']}", step)
                    if consecutive_skips > cfg.optimizer.skip.max_consecutive:
                        diverged(f"{consecutive_skips} steps in a row skipped (bad gradients)", step)
                    now = time.perf_counter()
                    tps = tokens_per_step * (step - step_mark) / max(now - t_mark, 1e-9)
                    t_mark, step_mark = now, step
                    metrics |= step_metrics | {
                        "tokens_per_s": tps,
                        "mfu": mfu(tps, fpt, jax.device_count(), cfg.peak_tflops_per_device),
                        "skipped_steps": skipped_total,
                    }
                    if first_loss is None and step == start + 1:
                        first_loss = metrics["loss"]
                    final_loss = metrics["loss"]
                    last_metrics = metrics
                    if eval_now:
                        evals = evaluate(step)
                        metrics |= evals
                    writer.write(step, metrics)
                    progress.update(
                        bar, rate=f"loss {metrics['loss']:.4f} lr {metrics['lr']:.2e} {tps:,.0f} tok/s"
                    )
                if save_now:
                    save(step)
                progress.update(bar, advance=1)
                if stopping:
                    console.print(f"[yellow]stop requested: checkpoint saved at step {step} on every host, exiting")
                    break
    finally:
        if tracing:
            jax.profiler.stop_trace()
        ckpt.close()
        writer.close()
        source.close()

    model_dir = ""
    # Single-host, local only: the exporters rewrite the directory from every process.
    if cfg.export_model and jax.process_count() == 1 and not fs.is_remote(workdir):
        model_dir = export(Path(workdir) / task.artifact, step)
    sha = params_sha256(gather_params(engine.all_params(state)))
    result = {
        "stage": cfg.name,
        "task": task.name,
        "first_loss": first_loss,
        "final_loss": final_loss,
        "steps": step,
        "start_step": start,
        "params_sha256": sha,
        "checkpoint": str(ckpt.step_dir(last_saved)) if last_saved is not None else "",
        "workdir": workdir,
        "model_checkpoint": model_dir,
        "tokens": (step - start) * tokens_per_step,
        "seconds": time.perf_counter() - t_begin,
        "preempted": bool(stop.stopping),
        "attention": backend,
        "skipped_steps": skipped_total,
        "mixture": source.describe().get("mixture", {}),
        **({"best_step": selector.best_step, "best_value": selector.best} if selector else {}),
        **evals,
        **{k: last_metrics[k] for k in ("grad_norm", "update_rms", "lr", "tokens_per_s", "mfu") if k in last_metrics},
    }
    if is_main and not quiet:
        print_summary(
            f"train {cfg.name}",
            {k: v for k, v in result.items() if k not in ("mixture",) and v is not None},
        )
    return result
