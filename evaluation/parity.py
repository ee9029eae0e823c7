"""Parity with the reference: the same lm-eval tasks through ``--model afm`` and ``--model hf``.

The exported Hugging Face model (``afm export hf``, a Qwen3 layout) run by lm-eval's own
``hf`` backend is the reference implementation of everything the native backend does
(tokenization, truncation, scoring, greedy decoding with stop sequences). This module runs
a list of task configs through any two lm-eval ``LM`` objects with per-request logging
and compares them request by request: log-likelihoods, greedy flags, generated text and
the task metrics. The slow tests call it on the tiny model; ``afm bench eval`` times it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from afm.evaluation.suite import task_manager


def hf_reference(hf_dir: str, *, batch_size: int = 16, max_length: int | None = None) -> Any:
    """lm-eval's ``hf`` backend on an exported model, float32 on CPU (needs the ``hf`` extra)."""
    from lm_eval.models.huggingface import HFLM

    kwargs: dict[str, Any] = {}
    if max_length:
        kwargs["max_length"] = max_length
    return HFLM(pretrained=hf_dir, device="cpu", dtype="float32", batch_size=batch_size,
                trust_remote_code=False, **kwargs)


def torch_seed(lm: Any, seed: int) -> int | None:
    """The seed lm-eval should give torch: none for the native backend, which does not use
    torch (seeding it imports torch, 1-2 s of every cold ``afm eval``)."""
    return seed if getattr(lm, "uses_torch", True) else None


@contextmanager
def environment_info(lm: Any) -> Iterator[None]:
    """Inside, lm-eval records the environment the model runs in: for a backend that
    does not use torch (the native one), JAX's, instead of torch's ``collect_env``
    report, which imports torch and runs subprocesses (about 2 s of a cold ``afm eval``
    here) to describe a library the run never touched."""
    import lm_eval.evaluator as evaluator

    if getattr(lm, "uses_torch", True):
        yield
        return
    original = evaluator.add_env_info
    evaluator.add_env_info = _add_jax_env_info
    try:
        yield
    finally:
        evaluator.add_env_info = original


def _add_jax_env_info(storage: dict[str, Any]) -> None:
    """lm-eval's environment keys, filled for a JAX run."""
    from importlib.metadata import version
    from pathlib import Path

    import jax
    from lm_eval.loggers.utils import get_commit_from_path

    devices = jax.devices()
    storage.update({
        "pretty_env_info": f"jax {jax.__version__} on {len(devices)} {jax.default_backend()} device(s) "
                           f"({devices[0].device_kind})",
        "transformers_version": "N/A (native JAX backend)",
        "lm_eval_version": version("lm_eval"),
        "upper_git_hash": get_commit_from_path(Path.cwd().parent),
    })


def run_tasks(lm: Any, configs: list[dict[str, Any]], *, limit: int | float | None = None,
              gen_kwargs: dict[str, Any] | None = None, seed: int = 1234) -> dict[str, Any]:
    """``simple_evaluate`` with every request logged."""
    from lm_eval.evaluator import simple_evaluate

    with environment_info(lm):
        return simple_evaluate(model=lm, tasks=configs, limit=limit, log_samples=True,
                               gen_kwargs=gen_kwargs, bootstrap_iters=0, confirm_run_unsafe_code=True,
                               task_manager=task_manager(), random_seed=seed, numpy_random_seed=seed,
                               torch_random_seed=torch_seed(lm, seed), fewshot_random_seed=seed)


def request_outputs(out: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per task, per document (by doc_id): the raw responses and the metric values."""
    per: dict[str, list[dict[str, Any]]] = {}
    for task, samples in out.get("samples", {}).items():
        rows = []
        for s in sorted(samples, key=lambda s: s["doc_id"]):
            metrics = {k: v for k, v in s.items() if isinstance(v, (int, float)) and k not in ("doc_id",)}
            rows.append({"doc_id": s["doc_id"], "resps": _plain(s["resps"]), "metrics": metrics})
        per[task] = rows
    return per


def _plain(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, (int, float)):
        return float(x)
    return str(x)


def _numbers(x: Any) -> list[float]:
    if isinstance(x, list):
        return [n for v in x for n in _numbers(v)]
    return [float(x)] if isinstance(x, float) else []


def _texts(x: Any) -> list[str]:
    if isinstance(x, list):
        return [t for v in x for t in _texts(v)]
    return [x] if isinstance(x, str) else []


def compare_requests(ours: dict[str, list[dict[str, Any]]], ref: dict[str, list[dict[str, Any]]],
                     tolerance: float = 1e-3) -> dict[str, dict[str, Any]]:
    """Per task: requests compared, the largest |log-likelihood difference|, whether every
    greedy flag and generated text is identical, and every per-document metric equal
    (within ``tolerance`` for real-valued ones such as LAMBADA's per-item perplexity; a
    0/1 accuracy that flips differs by 1)."""
    report: dict[str, dict[str, Any]] = {}
    for task in sorted(set(ours) | set(ref)):
        a, b = ours.get(task, []), ref.get(task, [])
        if [r["doc_id"] for r in a] != [r["doc_id"] for r in b]:
            report[task] = {"error": "different documents"}
            continue
        max_diff, n_ll, texts_same, metrics_same, flags_same = 0.0, 0, True, True, True
        for ra, rb in zip(a, b):
            na, nb = _numbers(ra["resps"]), _numbers(rb["resps"])
            if len(na) != len(nb):
                report[task] = {"error": f"doc {ra['doc_id']}: response shapes differ"}
                break
            flags_same &= _flags(ra["resps"]) == _flags(rb["resps"])
            n_ll += len(na)
            if na:
                max_diff = max(max_diff, max(abs(x - y) for x, y in zip(na, nb)))
            texts_same &= _texts(ra["resps"]) == _texts(rb["resps"])
            metrics_same &= _same_metrics(ra["metrics"], rb["metrics"], tolerance)
        else:
            report[task] = {"documents": len(a), "loglikelihoods": n_ll, "max_abs_diff": max_diff,
                            "greedy_flags_identical": flags_same, "texts_identical": texts_same,
                            "metrics_identical": metrics_same}
    return report


def _same_metrics(a: dict[str, Any], b: dict[str, Any], tolerance: float) -> bool:
    if set(a) != set(b):
        return False
    return all(abs(float(a[k]) - float(b[k])) <= tolerance * max(1.0, abs(float(b[k]))) for k in a)


def _flags(resps: Any) -> list[bool]:
    if isinstance(resps, list):
        return [f for v in resps for f in _flags(v)]
    return [resps] if isinstance(resps, bool) else []

