"""Rejection-sampling fine-tuning (report §4.3, a committee member of iTeC): best-of-N by
the reward model, written as an SFT dataset for the ``sft`` task.

For every prompt, N replies are sampled from the policy (the batched KV-cache sampler,
``afm.model.sampling``), scored by the reward model (:class:`RewardModelScorer`), and the
highest-scoring reply becomes the assistant turn of an SFT conversation (chat
``messages`` JSONL, the layout ``afm sft prepare`` reads). Replies that did not stop
within ``max_new_tokens`` are never kept (a truncated reply teaches the model not to stop);
a prompt whose N replies all ran out is counted and skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class BestOfNSummary:
    prompts: int = 0
    kept: int = 0
    no_stopped_reply: int = 0
    mean_best_reward: float = float("nan")
    mean_reward: float = float("nan")
    tokens: int = 0
    seconds: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list, repr=False)


def sample_replies(model: Any, tokenizer: Any, prompts: Sequence[list[dict]], n: int, *,
                   max_new_tokens: int = 96, temperature: float = 1.0, top_p: float = 1.0,
                   seed: int = 0, batch_size: int = 32) -> tuple[list[list[str]], list[list[bool]], int]:
    """``n`` sampled replies per prompt (text), whether each stopped, and tokens generated."""
    from afm.model.sampling import sample

    ids = [tokenizer.encode_chat(p, add_generation_prompt=True)[0] for p in prompts]
    flat = [x for x in ids for _ in range(n)]
    texts: list[str] = []
    stopped: list[bool] = []
    tokens = 0
    for at in range(0, len(flat), batch_size):
        out = sample(model, flat[at : at + batch_size], max_new_tokens=max_new_tokens,
                     temperature=temperature, top_p=top_p, stop_tokens=[tokenizer.end_id],
                     seed=seed + at, pad_id=tokenizer.pad_id)
        for toks, stop in zip(out.tokens, out.stopped, strict=True):
            tokens += len(toks)
            body = toks[:-1] if stop else toks
            # a model's embedding may be padded past the tokenizer's vocabulary: such ids have no text
            texts.append(tokenizer.decode([t for t in body if t < tokenizer.vocab_size]).strip())
            stopped.append(stop)
    grouped = [texts[i * n : (i + 1) * n] for i in range(len(prompts))]
    flags = [stopped[i * n : (i + 1) * n] for i in range(len(prompts))]
    return grouped, flags, tokens


def best_of_n(model: Any, tokenizer: Any, prompts: Sequence[list[dict]],
              scorer: Callable[[Sequence[list[dict]], Sequence[str]], np.ndarray], n: int,
              **sampling: Any) -> BestOfNSummary:
    """The reward model's best of ``n`` sampled replies per prompt."""
    import time

    t0 = time.perf_counter()
    replies, stopped, tokens = sample_replies(model, tokenizer, prompts, n, **sampling)
    flat_prompts = [p for p, rs in zip(prompts, replies, strict=True) for _ in rs]
    rewards = np.asarray(scorer(flat_prompts, [r for rs in replies for r in rs]), np.float32).reshape(len(prompts), n)
    summary = BestOfNSummary(prompts=len(prompts), tokens=tokens)
    best_rewards = []
    for i, prompt in enumerate(prompts):
        ok = np.asarray(stopped[i]) & np.asarray([bool(r) for r in replies[i]])
        if not ok.any():
            summary.no_stopped_reply += 1
            continue
        j = int(np.argmax(np.where(ok, rewards[i], -np.inf)))
        best_rewards.append(float(rewards[i, j]))
        summary.rows.append({"messages": [*prompt, {"role": "assistant", "content": replies[i][j]}],
                             "reward": float(rewards[i, j]), "candidates": int(ok.sum())})
    summary.kept = len(summary.rows)
    if best_rewards:
        summary.mean_best_reward = float(np.mean(best_rewards))
    summary.mean_reward = float(rewards.mean()) if rewards.size else float("nan")
    summary.seconds = time.perf_counter() - t0
    return summary


def write_sft_rows(path: str | Path, rows: Sequence[dict[str, Any]]) -> int:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


__all__ = ["BestOfNSummary", "best_of_n", "sample_replies", "write_sft_rows"]
