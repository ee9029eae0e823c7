"""``afm bench eval``: requests/s of ``--model afm`` next to ``lm-eval --model hf``.

Same model (random init of the ``tiny`` config, or ``--config 100m`` where compute
matters; exported to the Qwen3 layout for the reference), same lm-eval tasks and items,
same machine, one after the other. Each backend runs the task set once cold, then
``WARM_PASSES`` times warm (the median rate is reported), so the native backend's
one-off compilation is reported apart (``cold``, which says whether JAX's persistent compilation cache already held the
programs: a second ``afm bench eval`` measures the cold start with a warm cache).
Log-likelihood items: ARC-Easy, PIQA, WinoGrande, BoolQ from ``../shared/eval`` when
present (else the packaged demo items); generation: GSM8K prompts (greedy, 32 new
tokens). The reference needs the ``hf`` extra. Goals (issue #32): warm >= 1.5x the
reference on both request types; cold with a warm cache <= 2x its time.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from pathlib import Path
from typing import Any

from afm.app.bench.common import BenchOptions, Comparison

GOAL = ">= 1.5x"
# Warm passes per backend; the median rate is reported (a generation pass of the tiny
# model lasts about 0.1 s, so one pass swings by +-30% on a quiet box).
WARM_PASSES = 3
# Items per task (log-likelihood, generation), full and --quick: the 100m model costs
# about 1,000x the tiny one per token on CPU, so it gets fewer items.
LIMITS = {"tiny": ((300, 32), (40, 8)), "100m": ((25, 8), (8, 4))}
COLD_GOAL = "<= 2x (warm cache)"


class _Timed:
    """Counts requests and seconds spent inside an LM's request methods."""

    def __init__(self, lm: Any) -> None:
        self.lm = lm
        self.calls: dict[str, list[float]] = {}
        for name in ("loglikelihood", "generate_until"):
            original = getattr(lm, name)

            def timed(requests: list, *a: Any, _orig: Any = original, _name: str = name, **k: Any) -> Any:
                start = time.perf_counter()
                out = _orig(requests, *a, **k)
                entry = self.calls.setdefault(_name, [0.0, 0.0])
                entry[0] += len(requests)
                entry[1] += time.perf_counter() - start
                return out

            setattr(lm, name, timed)

    def rate(self, name: str) -> float:
        n, s = self.calls.get(name, [0.0, 0.0])
        return n / s if s else 0.0


def _configs(opts: BenchOptions, work: Path, tok: Any) -> tuple[list[dict], list[dict]]:
    from afm.evaluation.suite import BuildContext, build_task_configs, prepare_demo_data

    shared = opts.shared_dir / "eval" / "benchmarks" if opts.shared_dir else None
    if shared is not None and shared.is_dir():
        data, ll_tasks = str(shared), ["arc_easy", "piqa", "winogrande", "boolq"]
    else:
        data, ll_tasks = prepare_demo_data(work / "data"), ["arc_easy", "piqa", "hellaswag"]
    ctx = BuildContext(data_dir=data, num_fewshot=0, tokenizer=tok, max_length=512)
    return build_task_configs(ll_tasks, ctx), build_task_configs(["gsm8k"], ctx)


def _measure(lm: Any, ll: list[dict], gen: list[dict], limit: int, gen_limit: int) -> dict[str, float]:
    from afm.evaluation.parity import run_tasks

    timed = _Timed(lm)
    start = time.perf_counter()
    run_tasks(lm, ll, limit=limit)
    run_tasks(lm, gen, limit=gen_limit, gen_kwargs={"max_gen_toks": 32})
    cold = time.perf_counter() - start
    rates: dict[str, list[float]] = {"ll": [], "gen": []}
    for _ in range(WARM_PASSES):
        timed.calls.clear()
        run_tasks(lm, ll, limit=limit)
        run_tasks(lm, gen, limit=gen_limit, gen_kwargs={"max_gen_toks": 32})
        rates["ll"].append(timed.rate("loglikelihood"))
        rates["gen"].append(timed.rate("generate_until"))
    return {"ll": statistics.median(rates["ll"]), "gen": statistics.median(rates["gen"]), "cold": cold,
            "ll_requests": timed.calls.get("loglikelihood", [0])[0]}


def bench_eval(opts: BenchOptions) -> list[Comparison]:
    from afm.evaluation.cpu_devices import use_cpu_cores
    from afm.evaluation.harness import AfmLM
    from afm.evaluation.runner import quiet_progress_bars, set_offline
    from afm.evaluation.tiny import tokenizer_dir, write_tiny_checkpoint
    from afm.model.text.tokenizer import Tokenizer

    use_cpu_cores()  # as afm eval does, before JAX starts
    cache_warm = _stored_programs() > 0  # before this run compiles anything
    set_offline(False)
    quiet_progress_bars()
    work = opts.workdir / "eval"
    tok = Tokenizer.load(tokenizer_dir())
    config = opts.model_config or "tiny"
    if config not in ("tiny", "100m"):
        from afm.errors import UserError

        raise UserError(f"afm bench eval: --config is tiny or 100m, got {config!r}")
    ckpt = write_tiny_checkpoint(work / f"ckpt-{config}", seed=0, max_seq_len=512, config=config)
    ll, gen = _configs(opts, work, tok)
    limit, gen_limit = LIMITS[config][1 if opts.quick else 0]
    ours = _measure(AfmLM(checkpoint=str(ckpt), tokenizer=tok, show_progress=False), ll, gen, limit, gen_limit)
    ref: dict[str, float] | None = None
    name = "lm-eval --model hf (torch, float32, batch 32)"
    if all(importlib.util.find_spec(m) for m in ("torch", "transformers", "accelerate")):
        from afm.evaluation.parity import hf_reference
        from afm.model.checkpoints.hf_export import export_hf

        hf_dir = export_hf(ckpt, work / f"hf-{config}", tokenizer_dir=tokenizer_dir())
        ref = _measure(hf_reference(str(hf_dir), batch_size=32), ll, gen, limit, gen_limit)
    else:
        name = "lm-eval --model hf: not installed (make bench / make test-all install the hf extra)"
    cache = "warm" if cache_warm else "cold" if _stored_programs() else "off"
    return [
        Comparison(f"{config}: loglikelihood requests/s ({int(ours['ll_requests'])} requests, warm; afm on "
                   f"{_n_devices()} XLA device(s))", ours["ll"],
                   ref and ref["ll"], name, "req/s", GOAL),
        Comparison(f"{config}: generate_until requests/s (GSM8K prompts, 32 tokens, warm)", ours["gen"],
                   ref and ref["gen"], name, "req/s", GOAL),
        Comparison(f"{config}: cold run incl. compilation / model load (compile cache {cache})", ours["cold"],
                   ref and ref["cold"], name, "s", COLD_GOAL),
    ]


def _n_devices() -> int:
    import jax

    return jax.device_count()


def _stored_programs() -> int:
    """Programs the engine would load: stored executables (``afm.evaluation.executables``) when JAX's
    persistent compilation cache is on (0 when it is off)."""
    import jax

    directory = jax.config.jax_compilation_cache_dir
    if not directory or not jax.config.jax_enable_compilation_cache:
        return 0
    return sum(1 for _ in (Path(directory) / "executables").glob("*.bin"))


BENCHMARKS = {"eval": bench_eval}
