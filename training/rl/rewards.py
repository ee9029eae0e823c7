"""Rewards for online RL and reranking: one call signature for every source of reward,
and an account of what a reward could not score.

MDLOO, iTeC reranking and rejection sampling need a score per (conversation, response).
Two sources exist: a *task reward* computed by a program (a verifiable task such as
``afm.synth.arith_task``, where the true answer is known) and a trained *reward model*
(``afm.training.tasks.reward_model.RewardModelScorer``). Both are a :class:`RewardFn`::

    scorer(prompts, responses, stopped=None) -> np.ndarray  # float32 [N], NaN = not scored

``stopped`` says which responses ended on their own (False: cut at the token limit); a
reward model scores a cut reply without the end-of-turn token, as the unfinished text it
is. A response a reward *cannot* score (a task reward on a prompt of another task, a reply
longer than the reward model's window) is NaN, never a silent 0: :func:`score_responses`
returns the scores with the reasons, and :func:`check_unscored` stops a run whose share
of unscored responses passes its limit, with a message that names the reward and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from afm.errors import UserError
from afm.imports import resolve
from afm.training.rl.reward_model import RewardModelScorer

Conversation = list[dict[str, Any]]


@runtime_checkable
class RewardFn(Protocol):
    """Scores responses to conversations: ``[N]`` float32, higher is better, NaN where the
    response could not be scored (the reasons in ``last_reasons`` when it keeps them)."""

    def __call__(self, prompts: Sequence[Conversation], responses: Sequence[str],
                 stopped: Sequence[bool] | None = None) -> np.ndarray: ...


class UnscoredRewardError(UserError):
    """Too large a share of the responses could not be scored by the reward."""


@dataclass
class RewardBatch:
    """Scores of one batch (NaN where unscored) and why responses went unscored."""

    scores: np.ndarray
    reasons: Counter = field(default_factory=Counter)

    @property
    def scored(self) -> np.ndarray:
        return np.isfinite(self.scores)

    @property
    def unscored_share(self) -> float:
        return float(1.0 - self.scored.mean()) if self.scores.size else 0.0

    def filled(self, value: float = 0.0) -> np.ndarray:
        """The scores with ``value`` where unscored (for code that needs numbers everywhere
        and already excludes the unscored rows some other way)."""
        return np.where(self.scored, self.scores, np.float32(value)).astype(np.float32)

    def metrics(self, prefix: str = "") -> dict[str, float]:
        scored = self.scores[self.scored]
        return {f"{prefix}reward": float(scored.mean()) if scored.size else float("nan"),
                f"{prefix}unscored_share": self.unscored_share}

    def describe(self) -> str:
        return ", ".join(f"{why}: {n}" for why, n in self.reasons.most_common()) or "no reason given"


class TaskReward:
    """A program-computed reward ``fn(prompt, response) -> float`` lifted to a batch.

    A prompt the task cannot grade (``ValueError`` from ``fn``, whose message is the
    reason) scores NaN and its reason is counted in :attr:`last_reasons`."""

    def __init__(self, fn: Callable[[Any, str], float], *, name: str = "task"):
        self.fn = fn
        self.name = name
        self.last_reasons: Counter = Counter()

    def __call__(self, prompts: Sequence[Conversation], responses: Sequence[str],
                 stopped: Sequence[bool] | None = None) -> np.ndarray:
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
        out = np.empty(len(responses), np.float32)
        self.last_reasons = Counter()
        for i, (p, r) in enumerate(zip(prompts, responses)):
            try:
                out[i] = self.fn(p, r)
            except ValueError as exc:
                out[i] = np.nan
                self.last_reasons[_reason(exc)] += 1
        return out

    def __repr__(self) -> str:
        return f"task:{self.name}"


def _reason(exc: BaseException) -> str:
    """A short, countable reason: a dedicated exception's name (``NotArithmetic``), or a
    plain ``ValueError``'s message up to its first colon."""
    if type(exc) is not ValueError:
        return type(exc).__name__
    return str(exc).split("\n")[0].split(":")[0][:60] or "ValueError"


def score_responses(reward: Any, prompts: Sequence[Conversation], responses: Sequence[str],
                    stopped: Sequence[bool] | None = None) -> RewardBatch:
    """Call any reward and account for what it could not score (NaN or non-finite). A
    plain ``fn(prompts, responses)`` works too (it is not told which replies were cut)."""
    scores = np.asarray(_call(reward, prompts, responses, stopped), np.float32).reshape(-1)
    if scores.shape[0] != len(responses):
        raise ValueError(f"the reward returned {scores.shape[0]} scores for {len(responses)} responses")
    reasons = Counter(getattr(reward, "last_reasons", None) or {})
    missing = int((~np.isfinite(scores)).sum()) - sum(reasons.values())
    if missing > 0:
        reasons["not a finite score"] += missing
    return RewardBatch(scores, reasons)


def _call(reward: Any, prompts: Sequence[Conversation], responses: Sequence[str],
          stopped: Sequence[bool] | None) -> Any:
    import inspect

    try:
        params = inspect.signature(reward).parameters
    except (TypeError, ValueError):
        params = {}
    takes = "stopped" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return reward(prompts, responses, stopped=stopped) if takes else reward(prompts, responses)


def check_unscored(batch: RewardBatch, limit: float, *, reward: Any, where: str, option: str) -> None:
    """Stop when more than ``limit`` of the batch went unscored: a reward that scores
    nothing trains or selects on nothing (``option`` names the setting that raises it)."""
    if batch.unscored_share > limit:
        n = len(batch.scores)
        raise UnscoredRewardError(
            f"the reward {reward!r} could not score {batch.unscored_share:.0%} of {n} responses {where} "
            f"({batch.describe()}); is it the right reward for these prompts? (limit {limit:.0%}: {option})")


TASK_REWARDS: dict[str, str] = {"arith": "afm.synth.arith_task:task_reward"}


def task_reward(name: str) -> TaskReward:
    """A registered task reward (:data:`TASK_REWARDS`) or ``package.module:function``."""

    return TaskReward(resolve(name, what="task reward", registry=TASK_REWARDS), name=name)


def load_reward(spec: str, tokenizer: Any = None) -> RewardFn:
    """``task:NAME`` (a program-computed reward) or a reward-model directory written by
    ``afm rm train`` (``afm.training.rl.reward_model.RewardModelScorer``; ``tokenizer``
    overrides the one its metadata names)."""
    if not spec:
        raise UserError("no reward given: pass --reward task:NAME (a program's reward) or --rm CHECKPOINT "
                        "(a reward model from afm rm train)")
    if spec.startswith("task:"):
        return task_reward(spec[len("task:"):])

    return RewardModelScorer(spec, tokenizer)


__all__ = ["TASK_REWARDS", "Conversation", "RewardBatch", "RewardFn", "TaskReward", "UnscoredRewardError",
           "check_unscored", "load_reward", "score_responses", "task_reward"]
