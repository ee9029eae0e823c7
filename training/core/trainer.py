"""The training loop: one trainer for every task (pre-training first; see ``afm.training.core.task``).

``run_loop(cfg, workdir, task)`` is the loop behind every training command (through the
front door, ``afm.training.runs.train``):

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

from afm import fs
from afm.config import print_config
from afm.console import console, make_progress
from afm.model.blocks.layers import resolve_attention_impl
from afm.model.config import flops_per_token, param_counts
from afm.model.distributed.sharding import make_mesh
from afm.model.params import params_sha256
from afm.training.core import muparam
from afm.training.core.checkpoint import Checkpointer, gather_data_state, restore_params_only
from afm.training.core.config import TrainConfig
from afm.training.core.engine import Engine
from afm.training.core.hooks import HookContext, build_hooks, run_hooks
from afm.training.core.metrics import MetricsWriter, mfu
from afm.training.core.optimizer import skipped_updates
from afm.training.core.preemption import StopSignal
from afm.training.core.selection import BestCheckpoint
from afm.training.core.task import Task
from afm.training.data.coverage import coverage, data_warnings


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
    return console


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


def run_loop(cfg: TrainConfig, workdir: str | Path, task: Task, *, steps: int | None = None,
             quiet: bool = False) -> dict[str, Any]:
    """Train (or resume) ``task`` on ``cfg`` in ``workdir`` up to ``steps`` (default:
    ``total_steps``). Returns ``first_loss``, ``final_loss``, ``steps``, ``params_sha256``,
    ``checkpoint`` (last saved step dir), evaluation results and run statistics.

    The loop is given its task; the front door that resolves a config and a task by name
    and lets the task prepare and finish the run is ``afm.training.runs.train``."""
    stop_at = cfg.total_steps if steps is None else int(steps)
    if stop_at < 0:
        raise ValueError(f"steps must be >= 0, got {stop_at}")
    run = Run(cfg, str(workdir), task=task, quiet=quiet)
    try:
        run.loop(stop_at)
    finally:
        run.close()
    return run.finish()


class Run:
    """One training run in a workdir: the engine, its state and input, the checkpointer,
    hooks and metrics, and the loop over them (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, workdir: str, *, task: Task, quiet: bool = False):
        self.workdir = str(fs.as_path(workdir))
        fs.as_path(self.workdir).mkdir(parents=True, exist_ok=True)
        if not cfg.data.index_cache:
            cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, index_cache=f"{self.workdir}/data-index.json"))
        self.cfg, self.quiet = cfg, quiet
        self.is_main = jax.process_index() == 0
        if self.is_main and not quiet:
            print_config(cfg, f"train: {cfg.name}")
        self.mesh = make_mesh(cfg.mesh)
        self.engine = Engine.build(cfg, self.mesh, task)
        self.mcfg = self.engine.model_config
        _check_shapes(cfg, self.mesh, self.mcfg)
        self.task = self.engine.task
        self.ckpt = Checkpointer(self.workdir, keep=cfg.checkpoint.keep, async_save=cfg.checkpoint.async_save)
        self.state, self.source, self.start, origin = self._restore_or_init()
        self.backend = resolve_attention_impl(self.mcfg)
        self._announce(origin)
        self.hooks = build_hooks(HookContext(cfg, self.engine, self.workdir, dict(cfg.eval.options)))
        self.selector = (BestCheckpoint(self.workdir, cfg.eval.select_metric, cfg.eval.select_mode, write=self.is_main)
                         if cfg.eval.select_metric else None)
        self.profile = parse_profile_steps(cfg.profile_steps)
        self.flops_per_token = flops_per_token(self.mcfg, cfg.data.seq_len)
        self.tokens_per_step = cfg.data.global_batch_size * cfg.data.seq_len
        self.writer = MetricsWriter(_log_dir(cfg, self.workdir), enabled=self.is_main)
        self.step = self.start
        self.last_saved: int | None = self.start if self.start > 0 else None
        self.first_loss: float | None = None
        self.final_loss: float | None = None
        self.last_metrics: dict[str, float] = {}
        self.evals: dict[str, float] = {}
        self.t_begin = self.t_mark = time.perf_counter()
        self.step_mark = self.start
        # the optimizer's running count (restored on resume), so "skipped since the last log" is exact
        self.skipped_total = float(jax.device_get(skipped_updates(self.state.opt_state)))
        self.consecutive_skips = 0
        self.tracing = False
        self.stop = StopSignal(cfg.preemption_check_every)

    # -- start ----------------------------------------------------------------------------------
    def _restore_or_init(self) -> tuple[Any, Any, int, str]:
        """The latest checkpoint of the workdir (state and input position), else the
        previous stage's parameters (``init_from``) or a fresh initialisation."""
        engine, cfg = self.engine, self.cfg
        process = {"process_index": jax.process_index(), "process_count": jax.process_count()}
        start = self.ckpt.latest_step()
        if start is not None:
            state, data_state, meta = self.ckpt.restore(start, engine.abstract_state)
            source = self.task.make_input(vocab_size=self.mcfg.vocab_size, state=data_state, **process)
            origin = f"resumed from {self.ckpt.step_dir(start)}"
            if meta.get("stage") not in (None, cfg.name):
                _console().print(f"[yellow]note: checkpoint was written by stage {meta.get('stage')!r}")
            if meta.get("process_count") not in (None, jax.process_count()):
                origin += f" (written by {meta['process_count']} host(s), now {jax.process_count()})"
            return state, source, start, origin
        model_params, origin = None, "fresh initialisation"
        if cfg.init_from:
            model_params, src = restore_params_only(cfg.init_from, engine.abstract_params(engine.layout.keys),
                                                    engine.layout)
            origin = f"parameters of {src} (previous stage)"
        state = engine.init_state(model_params)
        return state, self.task.make_input(vocab_size=self.mcfg.vocab_size, state=None, **process), 0, origin

    def _announce(self, origin: str) -> None:
        if not self.is_main or self.quiet:
            return
        console, engine = _console(), self.engine
        console.print(f"[bold]start:[/] step {self.start}, {origin}")
        console.print(
            f"mesh {dict(self.mesh.shape)}, {jax.device_count()} devices, {jax.process_count()} host(s); "
            f"task {self.task.name}; attention {self.backend}; remat {self.mcfg.remat}; {self.mcfg.dtype}"
            f"{', layers scanned' if self.mcfg.scan_layers else ''}; "
            f"microbatches {self.cfg.microbatches}; data {self.source.describe().get('lanes', '-')} lanes"
        )
        for k, v in muparam.describe(engine.multipliers, engine.shapes).items():
            console.print(f"muParam {k}: {v}")
        if engine.frozen:
            console.print(f"frozen: {len(engine.frozen)} tensors (no gradient, no optimizer state)")

    # -- the loop -------------------------------------------------------------------------------
    def loop(self, stop_at: int) -> None:
        """Step until ``stop_at`` (or until a stop signal is agreed, after saving)."""

        cfg = self.cfg
        self._warn_about_data(stop_at)
        if self.hooks and cfg.eval.at_start and self.start == 0:  # the starting point, for before/after
            self.evals = self.evaluate(0)
            self.writer.write(0, self.evals)
        with self.stop, make_progress() as progress:
            bar = progress.add_task(f"train {cfg.name}", total=max(stop_at - self.start, 0), rate="")
            while self.step < stop_at:
                step_metrics, metrics_dev = self._train_one_step()
                step = self.step
                stopping = self.stop.agreed(step)
                save_now = step % cfg.checkpoint.every_steps == 0 or step == stop_at or stopping
                eval_now = bool(self.hooks) and bool(
                    (cfg.eval.every_steps and step % cfg.eval.every_steps == 0) or (cfg.eval.at_end and step == stop_at))
                if save_now or eval_now or step_metrics or step == self.start + 1 or step % cfg.log_every == 0:
                    metrics = self._log(step_metrics, metrics_dev, eval_now)
                    progress.update(bar, rate=f"loss {metrics['loss']:.4f} lr {metrics['lr']:.2e} "
                                              f"{metrics['tokens_per_s']:,.0f} tok/s")
                if save_now:
                    self.save(step)
                progress.update(bar, advance=1)
                if stopping:
                    _console().print(f"[yellow]stop requested: checkpoint saved at step {step} on every host, exiting")
                    break

    def _warn_about_data(self, stop_at: int) -> None:
        """A tiny corpus, or a run that goes over its data many times, said before the
        first step (:mod:`afm.training.data.coverage`); recorded in ``self.data_coverage``."""

        self.data_coverage: dict[str, Any] = {}
        index = getattr(self.source, "index", None)
        if index is None or not self.is_main:
            return
        data = self.cfg.data
        cov = coverage(index, steps=stop_at, global_batch=data.global_batch_size, seq_len=data.seq_len,
                       conversation_rows=getattr(self.source.cfg, "packing", "stream") == "conversation")
        self.data_coverage = cov.describe()
        if self.quiet:
            return
        for warning in data_warnings(cov, param_counts(self.mcfg)["total"]):
            _console().print(f"[bold yellow]warning: {warning}")

    def _train_one_step(self) -> tuple[dict[str, float], Any]:
        """``task.before_step`` (rollouts, for online RL), the next batch, one train step."""
        engine = self.engine
        if self.profile and self.step + 1 == self.profile[0] and self.is_main:
            jax.profiler.start_trace(str(_log_dir(self.cfg, self.workdir) / "profile"))
            self.tracing = True
        step_metrics = self.task.before_step(self.step, engine.view(self.state))
        batch = engine.global_batch(next(self.source))
        self.state, metrics_dev = engine.train_step(self.state, batch, self.step)
        self.step += 1
        if self.tracing and self.step == self.profile[1]:
            jax.block_until_ready(metrics_dev)
            jax.profiler.stop_trace()
            self.tracing = False
        return step_metrics, metrics_dev

    def _log(self, step_metrics: dict[str, float], metrics_dev: Any, eval_now: bool) -> dict[str, float]:
        """Fetch the step's metrics, check for divergence, add throughput (and evaluations),
        write them."""
        step = self.step
        metrics = {k: float(v) for k, v in jax.device_get(metrics_dev).items()}
        self._check_divergence(metrics)
        now = time.perf_counter()
        tps = self.tokens_per_step * (step - self.step_mark) / max(now - self.t_mark, 1e-9)
        self.t_mark, self.step_mark = now, step
        metrics |= step_metrics | {
            "tokens_per_s": tps,
            "mfu": mfu(tps, self.flops_per_token, jax.device_count(), self.cfg.peak_tflops_per_device),
            "skipped_steps": self.skipped_total,
        }
        if self.first_loss is None and step == self.start + 1:
            self.first_loss = metrics["loss"]
        self.final_loss = metrics["loss"]
        self.last_metrics = metrics
        if eval_now:
            self.evals = self.evaluate(step)
            metrics |= self.evals
        self.writer.write(step, metrics)
        return metrics

    def _check_divergence(self, metrics: dict[str, float]) -> None:
        """Skips are counted by the optimizer; between two logged steps "all skipped" extends
        the run of consecutive skips, anything else ends it. Non-finite parameters (or loss,
        without skip-step) and too many skips in a row stop the run."""
        step, skip = self.step, self.cfg.optimizer.skip
        new_skips = metrics["skipped_total"] - self.skipped_total
        self.skipped_total = metrics.pop("skipped_total")
        all_skipped = new_skips >= step - self.step_mark
        self.consecutive_skips = self.consecutive_skips + (step - self.step_mark) if all_skipped else 0
        if not math.isfinite(metrics["param_norm"]):
            self.diverged(f"non-finite parameters (param_norm={metrics['param_norm']})")
        if not skip.enabled and not (math.isfinite(metrics["loss"]) and math.isfinite(metrics["grad_norm"])):
            self.diverged(f"non-finite loss={metrics['loss']} grad_norm={metrics['grad_norm']}")
        if self.consecutive_skips > skip.max_consecutive:
            self.diverged(f"{self.consecutive_skips} steps in a row skipped (bad gradients)")

    def diverged(self, why: str) -> None:
        self.ckpt.wait()
        where = str(self.ckpt.step_dir(self.last_saved)) if self.last_saved is not None else \
            "none (no checkpoint was saved)"
        raise TrainingDiverged(f"{self.cfg.name}: {why} at step {self.step}; last good checkpoint: {where}")

    # -- checkpoints, evaluation, hand-off ------------------------------------------------------
    def save(self, at: int) -> None:
        """A checkpoint of step ``at`` (collective: every host saves its part)."""
        cfg = self.cfg
        meta = {
            "step": at, "stage": cfg.name, "task": self.task.name, "model": dataclasses.asdict(self.mcfg),
            "task_options": dict(cfg.task_options), "total_steps": cfg.total_steps,
            "seq_len": cfg.data.seq_len, "process_count": jax.process_count(),
        }
        self.ckpt.save(at, self.state, gather_data_state(self.source.state()), meta)
        self.last_saved = at

    def evaluate(self, at: int) -> dict[str, float]:
        """Every hook's results on the current model; a new best is exported."""
        results = run_hooks(self.hooks, at, self.engine.view(self.state))
        if self.selector is not None:
            self.selector.update(at, results, lambda path: self.export(path, at))
        return results

    def export(self, path: str | Path, at: int) -> str:
        """What the task hands on (``task.export``), from the current parameters; host 0
        writes (parameters gathered first when there are several hosts)."""
        params = self.engine.all_params(self.state)
        if jax.process_count() > 1:
            params = gather_params(params)
        if not self.is_main:
            return str(path)
        exported = dataclasses.replace(self.mcfg, max_segments=0)  # a run-time setting of this run
        return str(self.task.export(Path(path), params, exported, {"steps": at, "stage": self.cfg.name}))

    def close(self) -> None:
        if self.tracing:
            jax.profiler.stop_trace()
        self.ckpt.close()
        self.writer.close()
        self.source.close()

    def finish(self) -> dict[str, Any]:
        """The final hand-off (``workdir/<artifact>``), ``params_sha256`` and the summary."""
        cfg, step = self.cfg, self.step
        model_dir = ""
        # Single-host, local only: the exporters rewrite the directory from every process.
        if cfg.export_model and jax.process_count() == 1 and not fs.is_remote(self.workdir):
            model_dir = self.export(Path(self.workdir) / self.task.artifact, step)
        return {
            "stage": cfg.name,
            "task": self.task.name,
            "first_loss": self.first_loss,
            "final_loss": self.final_loss,
            "steps": step,
            "start_step": self.start,
            "params_sha256": params_sha256(gather_params(self.engine.all_params(self.state))),
            "checkpoint": str(self.ckpt.step_dir(self.last_saved)) if self.last_saved is not None else "",
            "workdir": self.workdir,
            "model_checkpoint": model_dir,
            "tokens": (step - self.start) * self.tokens_per_step,
            "data_passes": getattr(self, "data_coverage", {}).get("passes"),
            "seconds": time.perf_counter() - self.t_begin,
            "preempted": bool(self.stop.stopping),
            "attention": self.backend,
            "skipped_steps": self.skipped_total,
            "mixture": self.source.describe().get("mixture", {}),
            **({"best_step": self.selector.best_step, "best_value": self.selector.best} if self.selector else {}),
            **self.evals,
            **{k: self.last_metrics[k] for k in ("grad_norm", "update_rms", "lr", "tokens_per_s", "mfu")
               if k in self.last_metrics},
        }
