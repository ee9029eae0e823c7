"""Evaluation during training: a small task group as the trainer's eval hook.

The trainer (one engine, many tasks) calls ``hook(step, model_or_params)`` every K steps
and logs the returned ``{name: float}`` next to the loss. This module builds such a
callable: it evaluates the in-memory parameters (no checkpoint round trip) on a few
log-likelihood tasks with a small item limit and, optionally, held-out perplexity, and
returns flat metric names such as ``eval/arc_easy/acc`` and ``eval/heldout/perplexity``.

Compiled programs are cached by shape, so after the first call a hook costs only the
forward passes (a few seconds for ``afm-tiny`` with ``limit=50`` on the tiny model).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from afm.evaluation.runner import EvalSpec, build_lm, run_eval
from afm.evaluation.suite import default_data_dir, expand
from afm.model.text.tokenizer import Tokenizer
from afm.model.transformer import Transformer

EvalHook = Callable[[int, Any], dict[str, float]]


def as_model(model_or_params: Any, model_config: Any = None) -> Any:
    """A Transformer from a Transformer, an ``nnx.State`` or a pure dict of parameters
    (``nnx.to_pure_dict`` layout); the last two need ``model_config``."""
    from flax import nnx

    if isinstance(model_or_params, Transformer):
        return model_or_params
    if model_config is None:
        raise ValueError("eval hook: pass model_config= to evaluate bare parameters")
    abstract = nnx.eval_shape(lambda: Transformer(model_config, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    params = model_or_params
    if isinstance(params, nnx.State):
        params = nnx.to_pure_dict(params)
    nnx.replace_by_pure_dict(state, params)
    return nnx.merge(graphdef, state)


def make_eval_hook(
    tokenizer: Any,
    *,
    tasks: Sequence[str] = ("afm-tiny",),
    limit: int | None = 50,
    every: int = 1,
    data_dir: str | os.PathLike[str] | None = None,
    perplexity_data: Sequence[str] = (),
    perplexity_max_docs: int | None = 64,
    model_config: Any = None,
    tokens_per_batch: int = 4096,
    prefix: str = "eval/",
) -> EvalHook:
    """``hook(step, model_or_params) -> {metric: value}``; ``{}`` on steps not divisible by
    ``every``. ``tokenizer``: a directory or an afm ``Tokenizer``."""

    expand(list(tasks))  # fail at set-up, not at step 1000
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.load(tokenizer)
    root = str(data_dir) if data_dir else default_data_dir()

    def hook(step: int, model_or_params: Any) -> dict[str, float]:
        if every > 1 and step % every:
            return {}
        model = as_model(model_or_params, model_config)
        spec = EvalSpec(model=model, tokenizer=tok, tasks=list(tasks), limit=limit, data_dir=root,
                        tokens_per_batch=tokens_per_batch, perplexity_data=list(perplexity_data),
                        perplexity_max_docs=perplexity_max_docs, show_progress=False,
                        dtype=model.cfg.dtype)
        results = run_eval(spec, lm=build_lm(spec))
        return flatten_metrics(results, prefix)

    return hook


def flatten_metrics(results: dict[str, Any], prefix: str = "eval/") -> dict[str, float]:
    """``{prefix}{task}/{metric}`` for every metric (filter ``none`` dropped), plus
    held-out perplexity and bits per token."""
    out: dict[str, float] = {}
    for task, entry in results.get("tasks", {}).items():
        for key, m in entry["metrics"].items():
            if m["value"] is None:
                continue
            metric, _, filt = key.partition(",")
            name = metric if filt in ("", "none") else f"{metric}_{filt}"
            out[f"{prefix}{task}/{name}"] = float(m["value"])
    ppl = results.get("perplexity")
    if ppl:
        out[f"{prefix}heldout/perplexity"] = float(ppl["perplexity"])
        out[f"{prefix}heldout/bits_per_token"] = float(ppl["bits_per_token"])
    return out


class BenchmarkHook:
    """The trainer's eval-hook protocol (``afm.training.core.hooks``) over :func:`make_eval_hook`:
    the trainer decides when (``eval.every_steps``), this decides what (a task group)."""

    name = "bench"

    def __init__(self, inner: EvalHook):
        self.inner = inner

    def __call__(self, step: int, view: Any) -> dict[str, float]:
        return self.inner(step, view.model)


def benchmarks(context: Any) -> BenchmarkHook:
    """Factory for ``eval.hooks: ["afm.evaluation.hook:benchmarks"]``. Reads
    ``eval.options``: ``tokenizer`` (required: the run's tokenizer directory), ``tasks``
    (default ``[afm-tiny]``), ``limit`` (items per task, default 50), ``data_dir``
    (default: the bundled/shared local data) and ``tokens_per_batch``::

        eval:
          every_steps: 500
          hooks: ["afm.evaluation.hook:benchmarks"]
          options: {tokenizer: work/tokenizer, tasks: [arc_easy, piqa], limit: 200}
    """
    opts = dict(context.options)
    tokenizer = opts.pop("tokenizer", None)
    if not tokenizer:
        raise ValueError("eval hook afm.evaluation.hook:benchmarks needs eval.options.tokenizer "
                         "(the tokenizer directory the run's data was tokenized with)")
    known = {"tasks", "limit", "data_dir", "tokens_per_batch"}
    unknown = sorted(set(opts) - known)
    if unknown:
        raise ValueError(f"eval.options: unknown keys for the benchmark hook: {unknown} "
                         f"(known: tokenizer, {', '.join(sorted(known))})")
    inner = make_eval_hook(tokenizer, tasks=list(opts.get("tasks", ["afm-tiny"])),
                           limit=opts.get("limit", 50), data_dir=opts.get("data_dir"),
                           tokens_per_batch=int(opts.get("tokens_per_batch", 4096)), prefix="")
    return BenchmarkHook(inner)
