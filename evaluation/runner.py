"""One evaluation run: model -> lm-eval tasks, post-training tasks, perplexity, long context,
coverage -> results.

``afm eval``, the demo and the training hook all call :func:`run_eval`; only how they
present the result differs. lm-eval runs the tasks (``simple_evaluate`` with our
``AfmLM``); the parts lm-eval has no notion of (perplexity on token shards, the NIAH grid,
decontamination coverage, and the post-training tasks of ``afm.evaluation.posttrain``:
tool use, judged writing, safety) are added next to its numbers.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from afm.evaluation import executables
from afm.evaluation.coverage import task_coverage
from afm.evaluation.harness import AfmLM
from afm.evaluation.niah import grid_from_samples
from afm.evaluation.parity import environment_info, torch_seed
from afm.evaluation.perplexity import perplexity, read_token_docs
from afm.evaluation.posttrain.generation import EngineGenerator
from afm.evaluation.posttrain.runner import PosttrainOptions, check_tasks, run_posttrain
from afm.evaluation.results import FORMAT, add_chance, add_groups, from_lm_eval, item_scores
from afm.evaluation.suite import BuildContext, build_task_configs, posttrain_names, task_manager
from afm.model.config import param_counts


@dataclass
class EvalSpec:
    """Everything a run needs. ``model`` (an in-memory Transformer) or ``checkpoint``."""

    checkpoint: str | None = None
    tokenizer: Any = None  # directory, or an afm Tokenizer
    tasks: list[str] = field(default_factory=list)
    num_fewshot: int | None = None
    limit: int | float | None = None
    data_dir: str | None = None
    demo_data: bool = False  # data_dir is afm-demo's (afm.evaluation.suite.prepare_demo_data)
    allow_hub: bool = False
    dtype: str = "float32"
    max_length: int | None = None
    tokens_per_batch: int | None = None  # None: the engine's default for the platform
    gen_batch: int = 16
    mesh: str | None = None
    perplexity_data: list[str] = field(default_factory=list)
    perplexity_max_docs: int | None = None
    decontam_index: str | None = None
    niah: dict[str, Any] = field(default_factory=dict)
    seed: int = 1234
    show_progress: bool = True
    model: Any = None
    # post-training tasks: judge, safety detector, reply lengths (afm.evaluation.posttrain.runner)
    posttrain: Any = None
    # keep every item's metric values (results["items"]): for paired comparisons of models
    item_scores: bool = False


def set_offline(allow_hub: bool) -> None:
    """No hub traffic unless asked: ``datasets``/``huggingface_hub`` read these at import."""
    if not allow_hub:
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def build_lm(spec: EvalSpec) -> Any:
    return AfmLM(
        checkpoint=spec.checkpoint, tokenizer=spec.tokenizer, model=spec.model, dtype=spec.dtype,
        max_length=spec.max_length, tokens_per_batch=spec.tokens_per_batch,
        batch_size=spec.gen_batch, mesh=spec.mesh, show_progress=spec.show_progress,
    )


def run_eval(spec: EvalSpec, lm: Any = None) -> dict[str, Any]:
    """Run ``spec``; return the ``afm-eval-v1`` results dict (nothing is written)."""
    set_offline(spec.allow_hub)
    import logging


    if not spec.show_progress:
        quiet_progress_bars()
    started = time.perf_counter()
    lm = lm or build_lm(spec)
    load_s = time.perf_counter() - started
    ctx = BuildContext(data_dir=spec.data_dir, allow_hub=spec.allow_hub, num_fewshot=spec.num_fewshot,
                       tokenizer=lm.tok, max_length=lm.max_length, niah=dict(spec.niah),
                       demo_data=spec.demo_data)
    configs = build_task_configs(spec.tasks, ctx) if spec.tasks else []
    post = posttrain_names(spec.tasks) if spec.tasks else []
    if post:
        spec.posttrain = spec.posttrain or PosttrainOptions(seed=spec.seed)
        check_tasks(post, spec.posttrain)
    results: dict[str, Any] = {
        "format": FORMAT,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": _model_info(spec, lm),
        "settings": _settings(spec),
        "tasks": {}, "posttrain": None, "perplexity": None, "long_context": None, "decontamination": None,
        "notes": dict(ctx.notes), "versions": _versions(),
    }
    timing: dict[str, float] = {"load_s": load_s}
    if configs:
        from lm_eval.evaluator import simple_evaluate

        logging.getLogger("lm_eval").setLevel(logging.WARNING)
        logging.getLogger("lm_eval.api.task").addFilter(_QuietCustomDataset())
        t0 = time.perf_counter()
        wants_samples = spec.item_scores or any(c.get("task") == "afm_niah" for c in configs)
        with environment_info(lm):
            out = simple_evaluate(
                model=lm, tasks=configs, limit=spec.limit, log_samples=wants_samples,
                bootstrap_iters=1000, confirm_run_unsafe_code=True, task_manager=task_manager(),
                random_seed=spec.seed, numpy_random_seed=spec.seed, torch_random_seed=torch_seed(lm, spec.seed),
                fewshot_random_seed=spec.seed,
            )
        timing["tasks_s"] = time.perf_counter() - t0
        results["tasks"] = from_lm_eval(out)
        add_chance(results["tasks"], getattr(lm, "choices", {}), out.get("configs", {}))
        add_groups(results["tasks"], ctx.groups)
        if spec.item_scores:
            results["items"] = item_scores(out.get("samples", {}))
        if wants_samples and "afm_niah" in out.get("samples", {}):
            results["long_context"] = grid_from_samples(out["samples"]["afm_niah"])
    if post:
        t0 = time.perf_counter()
        gen = EngineGenerator(lm.engine, lm.tok, str(spec.checkpoint or "in-memory"))
        done = run_posttrain(post, gen, data_dir=spec.data_dir, limit=spec.limit, options=spec.posttrain,
                             progress=spec.show_progress, allow_hub=spec.allow_hub)
        results["tasks"].update(done.tasks)
        results["posttrain"] = {"judge": done.judge, "tasks": done.details}
        results["notes"].update(done.notes)
        if gen.clamped:
            results["notes"]["posttrain generation"] = (f"some replies were limited to half the model's context "
                                                        f"of {lm.max_length} tokens")
        timing["posttrain_s"] = time.perf_counter() - t0
    if spec.perplexity_data:
        t0 = time.perf_counter()
        docs = read_token_docs(spec.perplexity_data, spec.perplexity_max_docs)
        results["perplexity"] = {**perplexity(lm.engine, docs, lm.tok.eos_id),
                                 "data": [str(p) for p in spec.perplexity_data]}
        timing["perplexity_s"] = time.perf_counter() - t0
    if spec.decontam_index and configs:
        t0 = time.perf_counter()
        results["decontamination"] = task_coverage(spec.decontam_index, eval_docs(configs))
        results["decontamination_index"] = str(spec.decontam_index)
        timing["coverage_s"] = time.perf_counter() - t0
    stats = lm.engine.stats
    results["engine"] = {
        "score_requests": stats.score_requests, "score_batches": stats.score_batches,
        "packing_efficiency": round(stats.packing_efficiency, 4),
        "generated_rows": stats.generated_rows, "generated_tokens": stats.generated_tokens,
        "compiled_shapes": len(stats.shapes), "seconds": stats.seconds,
        "devices": int(lm.engine.mesh.size),
    }
    timing["total_s"] = time.perf_counter() - started
    results["timing"] = timing

    # How the engine's programs were obtained this process: compiled, loaded from the store
    # of compiled programs, stored; a warm start compiles none.
    results["programs"] = dict(executables.COUNTS)
    results["notes"].update(ctx.notes)
    results["data"] = dict(ctx.sources)  # which items each task read: the user's files or the bundled ones
    if spec.limit is not None:
        first = f"the first {spec.limit}" if spec.limit >= 1 else f"the first {spec.limit:.0%}"
        results["data"] = {k: f"{v}, {first} evaluated (--limit)" for k, v in results["data"].items()}
    if getattr(lm, "clamped_generation", False):
        results["notes"]["generation"] = (f"some tasks ask for more new tokens than the model's "
                                          f"context of {lm.max_length}; half the context was used")
    return results


def quiet_progress_bars() -> None:
    """lm-eval and ``datasets`` draw tqdm bars per task; the demo and the hook want none."""
    os.environ["TQDM_DISABLE"] = "1"
    try:
        import datasets

        datasets.disable_progress_bars()
    except ImportError:
        pass


class _QuietCustomDataset:
    """lm-eval warns on every task built from ``custom_dataset`` (how local data is fed)."""

    def filter(self, record: Any) -> bool:
        return "Custom kwargs can be passed" not in record.getMessage()


def eval_docs(configs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The documents each task evaluates (from the configs' local datasets), per task."""
    out: dict[str, list[Any]] = {}
    for cfg in configs:
        make = cfg.get("custom_dataset")
        if make is None or cfg.get("task") == "afm_niah":
            continue
        data = make()
        split = cfg.get("test_split") or cfg.get("validation_split") or cfg.get("training_split")
        if split in data:
            out[cfg["task"]] = list(data[split])
    return out


def _model_info(spec: EvalSpec, lm: Any) -> dict[str, Any]:
    cfg = lm.engine.cfg
    counts = param_counts(cfg)
    return {"checkpoint": spec.checkpoint or "<in-memory model>", "config": cfg.name,
            "dtype": cfg.dtype, "max_length": lm.max_length, "tokenizer": str(lm.tok.path),
            "params": int(counts["total"])}


def _settings(spec: EvalSpec) -> dict[str, Any]:
    keep = ("tasks", "num_fewshot", "limit", "data_dir", "allow_hub", "dtype", "max_length",
            "tokens_per_batch", "gen_batch", "mesh", "perplexity_data", "perplexity_max_docs",
            "decontam_index", "niah", "seed")
    out = {k: getattr(spec, k) for k in keep}
    if spec.posttrain is not None:  # judge spec and model, detector, lengths (no credentials live here)
        from dataclasses import asdict

        out["posttrain"] = asdict(spec.posttrain)
    return out


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("afm", "lm_eval", "jax", "flax"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out
