"""XLA's per-device memory plan of a run's train step, from abstract shapes only (no
parameter is materialised), on any backend, CPU included.

:func:`plan_config` builds the run's :class:`~afm.training.core.engine.Engine` for its task
(the task's extra parameters included: DPO's and MDLOO's frozen reference, the reward
model's heads), lowers its jitted train step on ``jax.ShapeDtypeStruct`` inputs and reads
the compiled executable's memory analysis: arguments (parameters, optimizer state, the
batch), outputs, temporaries, minus what the step donates.
"""

from __future__ import annotations

import time
from typing import Any

from afm.training.core.engine import Engine
from afm.training.tasks import get_task

GIB = 2**30


def plan_config(cfg: Any, mesh: Any) -> dict[str, Any]:
    """The memory plan (GiB per device) of ``cfg``'s compiled train step on ``mesh``, and
    its compile time, for any run config: ``--batch auto`` (:mod:`afm.training.runs.autofit`)
    and ``afm bench train --task`` use it."""
    import jax

    start = time.perf_counter()
    engine = Engine.build(cfg, mesh, get_task(cfg.task, cfg))
    compiled = engine.lower_train_step().compile()
    seconds = time.perf_counter() - start
    stats = compiled.memory_analysis()
    if stats is None:
        raise RuntimeError(f"the {jax.default_backend()} backend gives no memory analysis")
    args, out, temp, alias = (stats.argument_size_in_bytes, stats.output_size_in_bytes,
                              stats.temp_size_in_bytes, stats.alias_size_in_bytes)
    frozen = _bytes(engine.abstract_state.frozen)
    total = (args + out + temp - alias) / GIB
    programs = {name: _side_plan(program, _bytes(engine.abstract_state))
                for name, program in engine.task.side_programs(engine).items()}
    return {
        "model_config": engine.model_config, "backend": jax.default_backend(),
        "arguments_gb": args / GIB, "frozen_gb": frozen / GIB,
        "outputs_gb": out / GIB, "temporaries_gb": temp / GIB, "donated_gb": alias / GIB,
        "total_gb": total, "compile_s": time.perf_counter() - start if programs else seconds,
        "programs": programs, "peak_gb": max([total, *(p["total_gb"] for p in programs.values())]),
    }


def _bytes(tree: Any) -> int:
    import jax
    import numpy as np

    return sum(x.size * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))


def _side_plan(program: Any, state_bytes: int) -> dict[str, float]:
    """One side program's plan (GiB): the run's resident state + the program's inputs that
    are not that state + its outputs + its temporaries."""
    stats = program.lowered.compile().memory_analysis()
    extra = stats.argument_size_in_bytes - program.resident_bytes
    own = extra + stats.output_size_in_bytes + stats.temp_size_in_bytes - stats.alias_size_in_bytes
    return {"inputs_gb": extra / GIB, "outputs_gb": stats.output_size_in_bytes / GIB,
            "temporaries_gb": stats.temp_size_in_bytes / GIB, "state_gb": state_bytes / GIB,
            "total_gb": (state_bytes + own) / GIB}


__all__ = ["GIB", "plan_config"]
