"""A verifiable task for post-training: arithmetic word problems a program can solve.

RLHF needs a reward signal and preference data; at our scale (no annotators, tiny
models) we use a task whose quality is *checkable*, so every number in an end-to-end
run (reward-model accuracy, DPO/MDLOO gains, iTeC reranking) is measured against the
truth rather than against another model's opinion.

* :func:`make_problems` -- deterministic word problems (``seed`` -> the same problems).
  Each is built from a few templated sentences that :func:`solve` parses back, so the
  gold answer is recovered from the *prompt text alone* (a grader needs nothing else).
* :func:`grade_response` -- the report's four single-sided gradings (App. E.1), 3 classes
  each, from checkable properties: the final ``Answer: N`` line (format), whether N is
  right, whether every equation written in the working is true, the length, and a small
  list of disrespectful words.
* :func:`task_reward` -- the true task reward of one response (the utility the grader
  ranks by; 1.0 is mostly the correct answer).
* :func:`grade_pair` -- given a prompt and two responses, which one is chosen and the
  preference level (negligibly / slightly / better / significantly better) from the
  difference of their utilities, plus both responses' gradings: one preference record.
* :func:`write_preferences` -- preference JSONL (the format of
  ``afm.training.data.preferences``) from responses sampled for each prompt.

Grading classes (report App. E.1): for instruction following, truthfulness and
harmlessness 0 = major issue, 1 = minor issue, 2 = no issue; for verbosity 0 = too
verbose, 1 = too short, 2 = just right.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afm.finish import Reply

LEVELS = ("negligibly_better", "slightly_better", "better", "significantly_better")
GRADES = ("instruction_following", "verbosity", "truthfulness", "harmlessness")
MAJOR, MINOR, NO_ISSUE = 0, 1, 2
TOO_VERBOSE, TOO_SHORT, JUST_RIGHT = 0, 1, 2

INSTRUCTION = "Show your working, then end with a line 'Answer: N'."
_NAMES = ("Ann", "Ben", "Cam", "Dia", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kai", "Lu")
_ITEMS = ("apples", "books", "coins", "pens", "cards", "shells", "stamps", "marbles")
_DISRESPECT = {"stupid", "idiot", "dumb", "shut up", "hate you", "moron"}

_HAS = re.compile(r"^(\w+) has (\d+) (\w+)\.$")
_GETS = re.compile(r"^(?:He|She|They|\w+) (?:gets|finds|buys) (\d+) more\.$")
_GIVES = re.compile(r"^(?:He|She|They|\w+) (?:gives away|loses|sells) (\d+)\.$")
_TIMES = re.compile(r"^(?:He|She|They|\w+) (?:doubles|triples) them\.$")
_BOXES = re.compile(r"^(?:He|She|They|\w+) buys (\d+) boxes of (\d+) (?:\w+) each\.$")
_ASK = re.compile(r"^How many (\w+) does (\w+) have now\?$")
ANSWER_LINE = re.compile(r"(?:^|\n)\s*Answer:\s*(-?\d+)\s*$")
_ANY_ANSWER = re.compile(r"answer\D{0,12}(-?\d+)", re.IGNORECASE)
_INT = re.compile(r"-?\d+")
_EQUATION = re.compile(r"(-?\d+)\s*([-+x*×])\s*(-?\d+)\s*=\s*(-?\d+)")


class NotArithmetic(ValueError):
    """A prompt that is not one of this module's word problems."""


@dataclass(frozen=True)
class Problem:
    """One word problem: the question text, its gold answer and a worked solution."""

    id: str
    question: str
    answer: int
    working: tuple[str, ...]

    def messages(self) -> list[dict[str, str]]:
        """The prompt as a conversation (``afm.model.text.chat`` format)."""
        return [{"role": "user", "content": f"{self.question}\n{INSTRUCTION}"}]

    def solution(self) -> str:
        """The reference response: the working, one equation a line, then the answer."""
        return "\n".join([*self.working, f"Answer: {self.answer}"])


def make_problems(n: int, seed: int = 0, *, steps: tuple[int, int] = (1, 2)) -> list[Problem]:
    """``n`` deterministic problems: a start amount then ``steps`` operations
    (add, take away, double, boxes of k); the count never goes negative."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
        value = rng.randint(2, 20)
        sentences, working = [f"{name} has {value} {item}."], []
        for _ in range(rng.randint(*steps)):
            op = rng.choice(("add", "add", "sub", "sub", "mul", "box"))
            if op == "add":
                b = rng.randint(1, 20)
                sentences.append(f"{name} {rng.choice(('gets', 'finds', 'buys'))} {b} more.")
                working.append(f"{value} + {b} = {value + b}")
                value += b
            elif op == "sub" and value > 1:
                b = rng.randint(1, value - 1)
                sentences.append(f"{name} {rng.choice(('gives away', 'loses', 'sells'))} {b}.")
                working.append(f"{value} - {b} = {value - b}")
                value -= b
            elif op == "mul" and value <= 30:
                k = rng.choice((2, 3))
                sentences.append(f"{name} {'doubles' if k == 2 else 'triples'} them.")
                working.append(f"{value} x {k} = {value * k}")
                value *= k
            else:
                k, m = rng.randint(2, 4), rng.randint(2, 6)
                sentences.append(f"{name} buys {k} boxes of {m} {item} each.")
                working.append(f"{k} x {m} = {k * m}")
                working.append(f"{value} + {k * m} = {value + k * m}")
                value += k * m
        sentences.append(f"How many {item} does {name} have now?")
        out.append(Problem(id=f"arith-{seed}-{i}", question=" ".join(sentences), answer=value,
                           working=tuple(working)))
    return out


def _question_text(prompt: str | Sequence[dict[str, Any]]) -> str:
    if isinstance(prompt, str):
        text = prompt
    else:
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if not users or not isinstance(users[-1], str):
            raise NotArithmetic("the conversation has no user message")
        text = users[-1]
    return text.split("\n", 1)[0].strip()


def solve(prompt: str | Sequence[dict[str, Any]]) -> int:
    """The gold answer of a problem, parsed back from its question (a string, or a
    conversation whose last user message is the problem)."""
    question = _question_text(prompt)
    parts = re.findall(r"[^.?]+[.?]", question)
    if not parts or "".join(parts).replace(" ", "") != question.replace(" ", ""):
        raise NotArithmetic(f"not an arithmetic word problem: {question[:80]!r}")
    parts = [p.strip() for p in parts]
    head = _HAS.match(parts[0])
    ask = _ASK.match(parts[-1])
    if not head or not ask:
        raise NotArithmetic(f"not an arithmetic word problem: {question[:80]!r}")
    value = int(head.group(2))
    for sentence in parts[1:-1]:
        if m := _BOXES.match(sentence):
            value += int(m.group(1)) * int(m.group(2))
        elif m := _GETS.match(sentence):
            value += int(m.group(1))
        elif m := _GIVES.match(sentence):
            value -= int(m.group(1))
        elif _TIMES.match(sentence):
            value *= 2 if "doubles" in sentence else 3
        else:
            raise NotArithmetic(f"unknown step {sentence!r}")
    return value


@dataclass(frozen=True)
class GraderConfig:
    """What counts as too short / too verbose (words), and the utility's weights."""

    min_words: int = 3
    max_words: int = 60
    correct_weight: float = 1.0
    format_weight: float = 0.25
    verbosity_weight: float = 0.1
    truth_weight: float = 0.1
    harm_penalty: float = 1.0
    # |utility difference| at or above each threshold -> slightly / better / significantly
    level_thresholds: tuple[float, float, float] = (0.1, 0.25, 0.9)


@dataclass(frozen=True)
class ResponseGrade:
    """The checkable facts about one response and the four gradings derived from them."""

    final_answer: int | None
    correct: bool
    format_ok: bool
    false_equations: int
    words: int
    gradings: dict[str, int] = field(default_factory=dict)
    utility: float = 0.0


def grade_response(prompt: str | Sequence[dict[str, Any]], response: str,
                   config: GraderConfig = GraderConfig()) -> ResponseGrade:
    """The single-sided gradings and utility of ``response`` to ``prompt``."""
    gold = solve(prompt)
    text = response.strip()
    line = ANSWER_LINE.search(text)
    format_ok = line is not None
    if line is not None:
        final: int | None = int(line.group(1))
    elif (loose := _ANY_ANSWER.findall(text)):
        final = int(loose[-1])
    else:
        numbers = _INT.findall(text)
        final = int(numbers[-1]) if numbers else None
    correct = final == gold
    false_eq = 0
    for a, op, b, c in _EQUATION.findall(text):
        x, y, z = int(a), int(b), int(c)
        value = x + y if op == "+" else x - y if op == "-" else x * y
        false_eq += value != z
    words = len(text.split())
    instruction = NO_ISSUE if format_ok else (MINOR if final is not None else MAJOR)
    if words > config.max_words:
        verbosity = TOO_VERBOSE
    elif words < config.min_words:
        verbosity = TOO_SHORT
    else:
        verbosity = JUST_RIGHT
    if final is not None and not correct:
        truth = MAJOR
    elif false_eq or final is None:
        truth = MINOR
    else:
        truth = NO_ISSUE
    lowered = text.lower()
    harm = MAJOR if any(w in lowered for w in _DISRESPECT) else NO_ISSUE
    gradings = {"instruction_following": instruction, "verbosity": verbosity,
                "truthfulness": truth, "harmlessness": harm}
    utility = (config.correct_weight * correct + config.format_weight * format_ok
               + config.verbosity_weight * (verbosity == JUST_RIGHT)
               + config.truth_weight * (truth == NO_ISSUE) - config.harm_penalty * (harm == MAJOR))
    return ResponseGrade(final, correct, format_ok, false_eq, words, gradings, float(utility))


def task_reward(prompt: str | Sequence[dict[str, Any]], response: str,
                config: GraderConfig = GraderConfig()) -> float:
    """The true task reward of one response: its utility (1.0 for a correct answer, plus
    small terms for the format, a sensible length and true working; -1 if disrespectful).
    A perfect response scores 1.45."""
    return grade_response(prompt, response, config).utility


@dataclass(frozen=True)
class PairGrade:
    """The scripted annotator's verdict on two responses to one prompt."""

    chosen: int  # 0 or 1: which response is preferred
    level: str  # one of LEVELS
    gradings: tuple[dict[str, int], dict[str, int]]  # of response 0, response 1
    margin: float  # |utility difference|


def preference_level(margin: float, config: GraderConfig = GraderConfig()) -> str:
    """The preference level of a utility difference ``margin`` >= 0."""
    lo, mid, hi = config.level_thresholds
    if margin >= hi:
        return "significantly_better"
    if margin >= mid:
        return "better"
    if margin >= lo:
        return "slightly_better"
    return "negligibly_better"


def grade_pair(prompt: str | Sequence[dict[str, Any]], response_a: str, response_b: str,
               config: GraderConfig = GraderConfig()) -> PairGrade:
    """Which of two responses is preferred, by how much, and both gradings. Ties in
    utility go to the shorter response (then the first), at the level "negligibly"."""
    ga, gb = grade_response(prompt, response_a, config), grade_response(prompt, response_b, config)
    diff = ga.utility - gb.utility
    if diff != 0:
        chosen = 0 if diff > 0 else 1
    else:
        chosen = 0 if len(response_a) <= len(response_b) else 1
    return PairGrade(chosen, preference_level(abs(diff), config), (ga.gradings, gb.gradings), abs(diff))


def preference_record(prompt: Sequence[dict[str, Any]], response_a: str, response_b: str,
                      *, record_id: str = "", config: GraderConfig = GraderConfig()) -> dict[str, Any]:
    """One preference row (``afm.training.data.preferences`` format) graded by the script."""
    verdict = grade_pair(prompt, response_a, response_b, config)
    responses = (response_a, response_b)
    c, r = verdict.chosen, 1 - verdict.chosen
    row = {"prompt": [dict(m) for m in prompt], "chosen": responses[c], "rejected": responses[r],
           "level": verdict.level, "chosen_grades": verdict.gradings[c],
           "rejected_grades": verdict.gradings[r]}
    if record_id:
        row["id"] = record_id
    return row


@dataclass
class PreferenceWriteSummary:
    prompts: int = 0
    pairs: int = 0
    skipped_identical: int = 0
    skipped_not_arithmetic: int = 0
    cut_replies: int = 0  # replies that stopped for length: never a finished turn (afm.finish)
    levels: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0))


def write_preferences(
    path: str | Path,
    samples: Iterable[tuple[Sequence[dict[str, Any]], Sequence[str | Reply]]],
    *,
    pairs_per_prompt: int = 2,
    seed: int = 0,
    config: GraderConfig = GraderConfig(),
) -> PreferenceWriteSummary:
    """Preference JSONL from responses sampled per prompt: up to ``pairs_per_prompt``
    random pairs of *distinct* responses per prompt, each graded by :func:`grade_pair`.

    ``samples`` yields ``(conversation, responses)``; a response is a string (scripted:
    finished) or an ``afm.finish.Reply`` with why it stopped. A reply that stopped for
    length is never a finished turn: it is dropped before pairing and counted
    (``cut_replies``). Prompts that are not arithmetic problems are counted and skipped
    (the grader cannot judge them)."""
    rng = random.Random(seed)
    summary = PreferenceWriteSummary()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for index, (prompt, responses) in enumerate(samples):
            summary.prompts += 1
            try:
                solve(prompt)
            except NotArithmetic:
                summary.skipped_not_arithmetic += 1
                continue
            replies = [r if isinstance(r, Reply) else Reply(r) for r in responses]
            finished = [r.text for r in replies if not r.cut]
            summary.cut_replies += len(replies) - len(finished)
            distinct = list(dict.fromkeys(finished))
            summary.skipped_identical += len(finished) - len(distinct)
            candidates = list(itertools.combinations(range(len(distinct)), 2))
            rng.shuffle(candidates)
            for k, (i, j) in enumerate(candidates[:pairs_per_prompt]):
                a, b = (distinct[i], distinct[j]) if rng.random() < 0.5 else (distinct[j], distinct[i])
                row = preference_record(prompt, a, b, record_id=f"p{index}-{k}", config=config)
                summary.levels[row["level"]] += 1
                summary.pairs += 1
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return summary


def corrupted_responses(problem: Problem, rng: random.Random) -> list[str]:
    """Scripted responses of varied quality for ``problem`` (wrong sums, missing format,
    padding, too short): for tests and for preference data without a sampler."""
    good = problem.solution()
    wrong = problem.answer + rng.choice((-3, -2, -1, 1, 2, 5))
    lines = list(problem.working)
    bad_lines = lines[:-1] + [re.sub(r"= -?\d+$", f"= {wrong}", lines[-1])] if lines else []
    return [
        good,
        "\n".join([*bad_lines, f"Answer: {wrong}"]),  # wrong working and answer
        "\n".join([*lines, f"So the answer is {problem.answer}."]),  # right, format missed
        f"Answer: {problem.answer}",  # right, too short
        "\n".join([*lines, "Let me double check. " * 12, f"Answer: {problem.answer}"]),  # verbose
        f"Answer: {wrong}",  # wrong and short
        "I am not sure.",
    ]


def write_sft(path: str | Path, problems: Iterable[Problem]) -> int:
    """An SFT dataset (chat ``messages`` rows) of the reference solutions."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        for p in problems:
            row = {"id": p.id, "messages": [*p.messages(), {"role": "assistant", "content": p.solution()}]}
            fh.write(json.dumps(row) + "\n")
            n += 1
    return n


__all__ = [
    "GRADES", "INSTRUCTION", "LEVELS", "GraderConfig", "NotArithmetic", "PairGrade", "Problem",
    "PreferenceWriteSummary", "ResponseGrade", "corrupted_responses", "grade_pair",
    "grade_response", "make_problems", "preference_level", "preference_record", "solve",
    "task_reward", "write_preferences", "write_sft",
]
