"""Rewards for online RL and reranking: one call signature for every source of reward.

MDLOO, iTeC reranking and rejection sampling need a score per (conversation, response).
Two sources exist: a *task reward* computed by a program (a verifiable task such as
``afm.synth.arith_task``, where the true answer is known) and a trained *reward model*
(``afm.training.tasks.reward_model.RewardModelScorer``). Both are a :class:`RewardFn`::

    scorer(prompts: Sequence[list[dict]], responses: Sequence[str]) -> np.ndarray  # float32 [N]

so the RL loop and the iTeC round take either without knowing which. :func:`load_reward`
turns the CLI's ``--reward task:arith`` / ``--rm PATH`` into one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

Conversation = list[dict[str, Any]]


@runtime_checkable
class RewardFn(Protocol):
    """Scores responses to conversations: ``[N]`` float32, higher is better."""

    def __call__(self, prompts: Sequence[Conversation], responses: Sequence[str]) -> np.ndarray: ...


class TaskReward:
    """A program-computed reward ``fn(prompt, response) -> float`` lifted to a batch.

    A prompt the task cannot grade (``ValueError`` from ``fn``) scores ``invalid`` and is
    counted in :attr:`invalid_count`, so a stray prompt never aborts an RL run silently
    nor passes unnoticed."""

    def __init__(self, fn: Callable[[Any, str], float], *, name: str = "task", invalid: float = 0.0):
        self.fn = fn
        self.name = name
        self.invalid = float(invalid)
        self.invalid_count = 0

    def __call__(self, prompts: Sequence[Conversation], responses: Sequence[str]) -> np.ndarray:
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
        out = np.empty(len(responses), np.float32)
        for i, (p, r) in enumerate(zip(prompts, responses)):
            try:
                out[i] = self.fn(p, r)
            except ValueError:
                out[i] = self.invalid
                self.invalid_count += 1
        return out


TASK_REWARDS: dict[str, str] = {"arith": "afm.synth.arith_task:task_reward"}


def task_reward(name: str) -> TaskReward:
    """A registered task reward (:data:`TASK_REWARDS`) or ``package.module:function``."""
    from afm.imports import resolve

    return TaskReward(resolve(name, what="task reward", registry=TASK_REWARDS), name=name)


def load_reward(spec: str, tokenizer: Any = None) -> RewardFn:
    """``task:NAME`` (a program-computed reward) or a reward-model directory written by
    ``afm rm train`` (``afm.training.tasks.reward_model.RewardModelScorer``; ``tokenizer``
    overrides the one its metadata names)."""
    if spec.startswith("task:"):
        return task_reward(spec[len("task:"):])
    try:
        from afm.training.tasks.reward_model import RewardModelScorer  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ValueError(
            f"reward {spec!r}: reward-model scoring needs afm.training.tasks.reward_model, which this "
            "build lacks; use task:NAME"
        ) from exc
    return RewardModelScorer(spec, tokenizer)  # type: ignore[no-any-return]


__all__ = ["TASK_REWARDS", "Conversation", "RewardFn", "TaskReward", "load_reward", "task_reward"]
