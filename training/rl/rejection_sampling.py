"""Rejection-sampling fine-tuning (report §4.3, a committee member of iTeC): best-of-N by
the reward model, written as an SFT dataset for the ``sft`` task.

For every prompt, N replies are sampled from the policy (the rollout sampler,
``afm.training.rl.rollout.sample_groups``: batched, KV cache, each reply with its stop
reason), scored by the reward (the reward model sees a cut reply without its end token),
and the highest-scoring *finished* reply becomes the assistant turn of an SFT
conversation (chat ``messages`` JSONL, the layout ``afm sft prepare`` reads). A reply cut
at ``max_new_tokens`` is never kept (a truncated reply teaches the model not to stop), nor
one the reward could not score; a prompt left with none is counted and skipped, and a run
whose share of unscored replies passes ``max_unscored`` stops with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from afm.training.rl.rewards import check_unscored, score_responses
from afm.training.rl.rollout import sample_groups


@dataclass
class BestOfNSummary:
    prompts: int = 0
    kept: int = 0
    no_stopped_reply: int = 0  # every reply was cut at the token limit, empty or unscored
    cut_replies: int = 0
    unscored_replies: int = 0
    unscored_reasons: dict[str, int] = field(default_factory=dict)
    mean_best_reward: float = float("nan")
    mean_reward: float = float("nan")
    tokens: int = 0
    seconds: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list, repr=False)


def best_of_n(model: Any, tokenizer: Any, prompts: Sequence[list[dict]], scorer: Any, n: int, *,
              max_unscored: float = 0.5, **sampling: Any) -> BestOfNSummary:
    """The reward's best of ``n`` sampled, finished replies per prompt (``sampling``:
    ``max_new_tokens``, ``temperature``, ``top_p``, ``seed``, ``batch_size`` of
    :func:`~afm.training.rl.rollout.sample_groups`)."""
    import time


    t0 = time.perf_counter()
    roll = sample_groups(model, tokenizer, prompts, k=n, **sampling)
    finished = roll.finished()
    batch = score_responses(scorer, roll.group_prompts(), roll.texts, stopped=finished)
    check_unscored(batch, max_unscored, reward=scorer, where="in best-of-n sampling", option="--max-unscored")
    rewards = batch.scores.reshape(len(prompts), n)
    usable = (finished & batch.scored & np.asarray([bool(t) for t in roll.texts])).reshape(len(prompts), n)
    summary = BestOfNSummary(prompts=len(prompts), tokens=roll.new_tokens, cut_replies=int((~finished).sum()),
                             unscored_replies=int((~batch.scored).sum()), unscored_reasons=dict(batch.reasons))
    best_rewards = []
    for i, prompt in enumerate(prompts):
        if not usable[i].any():
            summary.no_stopped_reply += 1
            continue
        j = int(np.argmax(np.where(usable[i], rewards[i], -np.inf)))
        best_rewards.append(float(rewards[i, j]))
        summary.rows.append({"messages": [*prompt, {"role": "assistant", "content": roll.texts[i * n + j]}],
                             "reward": float(rewards[i, j]), "candidates": int(usable[i].sum())})
    summary.kept = len(summary.rows)
    if best_rewards:
        summary.mean_best_reward = float(np.mean(best_rewards))
    scored = batch.scores[batch.scored]
    summary.mean_reward = float(scored.mean()) if scored.size else float("nan")
    summary.seconds = time.perf_counter() - t0
    return summary


def write_sft_rows(path: str | Path, rows: Sequence[dict[str, Any]]) -> int:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


__all__ = ["BestOfNSummary", "best_of_n", "write_sft_rows"]
