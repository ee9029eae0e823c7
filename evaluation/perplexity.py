"""Perplexity on held-out token shards (the ``afm tokenize`` output format).

Text benchmarks say little about an early checkpoint; the loss on data the model never
trained on does. Each document is scored as the trainer sees it: its tokens followed by
EOS, conditioned on an EOS (the end of the previous document in a packed row), in
lm-eval's disjoint rolling windows of the model's context, so every token is predicted
exactly once. Windows are packed like any other scoring request.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from afm.evaluation.engine import InferenceEngine
from afm.evaluation.packing import ScoreRequest
from afm.io import DatasetError, read_shard, resolve_token_shards


def read_token_docs(inputs: list[str], max_docs: int | None = None) -> list[tuple[str, list[int]]]:
    """(source, tokens) per document of Parquet token shards (files, folders or globs)."""


    try:  # the trainer's reader: an `afm tokenize` directory gives its tokens-* shards
        files = resolve_token_shards(list(inputs))
    except DatasetError as exc:
        raise FileNotFoundError(str(exc)) from exc
    if not files:
        raise FileNotFoundError(f"no .parquet token shards in {inputs}")
    docs: list[tuple[str, list[int]]] = []
    for path in files:
        table = read_shard(path)
        if "tokens" not in table.column_names:
            raise ValueError(f"{path}: not a token shard (no 'tokens' column)")
        sources = table.column("source").to_pylist() if "source" in table.column_names else None
        for i, toks in enumerate(table.column("tokens").to_pylist()):
            if toks:
                docs.append((sources[i] if sources else "all", toks))
            if max_docs is not None and len(docs) >= max_docs:
                return docs
    return docs


def windows(tokens: list[int], prefix: int, max_length: int) -> list[ScoreRequest]:
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    out = []
    for ctx, cont in map(make_disjoint_window, get_rolling_token_windows(
            token_list=tokens, prefix_token=prefix, max_seq_len=max_length, context_len=1)):
        whole = (ctx + cont)[-(max_length + 1):]
        out.append(ScoreRequest(tuple(whole[:-1]), tuple(whole[1:]), len(cont)))
    return out


def perplexity(engine: InferenceEngine, docs: list[tuple[str, list[int]]], eos_id: int,
               progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Token-weighted NLL, perplexity and bits per token, overall and per source."""
    requests: list[ScoreRequest] = []
    owner: list[str] = []
    vocab = engine.cfg.vocab_size
    for source, toks in docs:
        if max(toks) >= vocab or min(toks) < 0:
            raise ValueError(f"token ids outside the model's vocabulary [0, {vocab})")
        for w in windows(list(toks) + [eos_id], eos_id, engine.max_length):
            requests.append(w)
            owner.append(source)
    scores = engine.score(requests, progress=progress)
    per: dict[str, list[float]] = {}
    for src, req, (lp, _g) in zip(owner, requests, scores):
        agg = per.setdefault(src, [0.0, 0.0])
        agg[0] -= lp
        agg[1] += req.n_scored
    total_nll = sum(v[0] for v in per.values())
    total_tok = sum(v[1] for v in per.values())
    return {**_summary(total_nll, total_tok), "documents": len(docs),
            "by_source": {s: _summary(*v) for s, v in sorted(per.items())}}


def _summary(nll: float, tokens: float) -> dict[str, float]:
    mean = nll / max(tokens, 1.0)
    return {"tokens": int(tokens), "nll": mean, "perplexity": math.exp(min(mean, 700.0)),
            "bits_per_token": mean / math.log(2)}
