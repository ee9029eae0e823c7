"""Pairwise grading with position swap, and single-answer grading.

Pairwise: every item is judged twice, as Arena-Hard-Auto does, so the position of an answer
cannot decide the verdict: game 0 shows the reference (baseline) answer as A and the
model's as B, game 1 the other way round, each with the system prompt of the item's
category (Arena-Hard v2.0's). Each game keeps its raw label (``A>B`` ...), the
judge's text, or why it failed; :func:`model_scores` turns the two labels into the model's
scores (Arena-Hard's weights: a significant win counts three times). A reward-model judge
scores both answers once and writes the same verdict for both games; an answer it cannot
score (NaN: longer than its window) fails both games, as a judge's failure does.

Single-answer: one rating in [1, 10] per reply (MT-Bench's ``[[rating]]``), with a rubric
per category; a reply the judge cannot rate is a failure, not a low score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from afm.evaluation.posttrain.judges import prompts
from afm.evaluation.posttrain.judges.judge import Judge, JudgeError, JudgeReply, RewardJudge

STRONG_WEIGHT = 3  # Arena-Hard: a significant win is three battles
# The model's score for one label, from the position it held (Arena-Hard's label_to_score).
_SCORE_AS_A = {"A>B": [1.0], "A>>B": [1.0] * STRONG_WEIGHT, "A=B": [0.5], "A<<B": [0.0] * STRONG_WEIGHT,
               "A<B": [0.0], "B>A": [0.0], "B>>A": [0.0] * STRONG_WEIGHT, "B=A": [0.5],
               "B<<A": [1.0] * STRONG_WEIGHT, "B<A": [1.0]}


@dataclass(frozen=True)
class PairItem:
    id: str
    question: str
    answer: str  # the model's
    reference: str  # the baseline's
    conversation: list[dict[str, Any]] = field(default_factory=list)  # for a reward model
    category: str = prompts.DEFAULT_CATEGORY  # picks the judge's system prompt (Arena-Hard v2.0)


@dataclass(frozen=True)
class Game:
    label: str | None
    judgment: str | None = None
    error: str | None = None  # set when the judge failed or wrote no verdict


@dataclass(frozen=True)
class PairResult:
    item: PairItem
    games: tuple[Game, Game]  # (reference as A, model as A)

    @property
    def complete(self) -> bool:
        return all(g.label is not None for g in self.games)


def model_scores(result: PairResult) -> list[float] | None:
    """The model's battle scores from both games; None when a game has no verdict
    (Arena-Hard drops such a question rather than guess)."""
    if not result.complete:
        return None
    g0, g1 = result.games
    return _SCORE_AS_A[g1.label] + [1.0 - s for s in _SCORE_AS_A[g0.label]]  # type: ignore[index]


def model_preference(game: Game, model_is_a: bool) -> float | None:
    """P(model better) for one game: 1, 0.5 or 0 (strength ignored), None without a verdict."""
    if game.label is None:
        return None
    s = _SCORE_AS_A[game.label][0]
    return s if model_is_a else 1.0 - s


def _game(reply: JudgeReply) -> Game:
    if not reply.ok:
        return Game(None, reply.text, f"judge failed: {reply.error}")
    label = prompts.parse_pairwise(reply.text)
    return Game(label, reply.text, None if label else "no verdict label in the judgment")


def pairwise(judge: Judge | RewardJudge, items: Sequence[PairItem]) -> list[PairResult]:
    """Both games of every item."""
    if isinstance(judge, RewardJudge):
        return _reward_pairs(judge, items)
    convs = []
    for it in items:
        convs.append(prompts.pairwise_messages(it.question, it.reference, it.answer, it.category))  # game 0
        convs.append(prompts.pairwise_messages(it.question, it.answer, it.reference, it.category))  # game 1
    replies = judge.ask(convs)
    return [PairResult(it, (_game(replies[2 * i]), _game(replies[2 * i + 1]))) for i, it in enumerate(items)]


def _reward_pairs(judge: RewardJudge, items: Sequence[PairItem]) -> list[PairResult]:
    convs = [it.conversation or [{"role": "user", "content": it.question}] for it in items]
    model = judge.rewards(convs, [it.answer for it in items])
    reasons = [judge.reason]
    ref = judge.rewards(convs, [it.reference for it in items])
    reasons.append(judge.reason)
    reason = "; ".join(r for r in reasons if r) or "NaN"
    out = []
    for it, rm, rr in zip(items, model, ref):
        text = f"reward(model)={rm:.4f} reward(reference)={rr:.4f}"
        if not (math.isfinite(rm) and math.isfinite(rr)):  # the scorer could not score one (e.g. too long)
            why = f"judge failed: the reward model scored no reward ({reason})"
            games = (Game(None, text, why), Game(None, text, why))
        elif rm == rr:
            games = (Game("A=B", text), Game("A=B", text))
        elif rm > rr:
            games = (Game("B>A", text), Game("A>B", text))
        else:
            games = (Game("A>B", text), Game("B>A", text))
        out.append(PairResult(it, games))
    return out


@dataclass(frozen=True)
class Grade:
    id: str
    rating: float | None
    judgment: str | None = None
    error: str | None = None


def single(judge: Judge | RewardJudge, items: Sequence[tuple[str, str, str, str, str | None]]) -> list[Grade]:
    """Ratings of ``(id, question, answer, category, reference)`` items."""
    if isinstance(judge, RewardJudge):
        raise JudgeError("a reward model grades pairs only; single-answer grading needs a judge that "
                         "writes ratings (openai:URL or checkpoint:PATH)")
    replies = judge.ask([prompts.single_messages(q, a, c, r) for _, q, a, c, r in items])
    out = []
    for (iid, *_), reply in zip(items, replies):
        if not reply.ok:
            out.append(Grade(iid, None, reply.text, f"judge failed: {reply.error}"))
            continue
        rating = prompts.parse_rating(reply.text)
        out.append(Grade(iid, rating, reply.text, None if rating is not None else "no [[rating]] in 1..10"))
    return out
