"""``afm synth math``: seed problems -> evolved problems -> N chain-of-thought solutions,
kept when their final answer is right (report §4.1.2, Mathematics).

Problems (each tagged with the strategy that made it):

* ``seed`` -- the seed problems themselves;
* ``rephrase`` -- reworded by the generator; same ground truth (MetaMath);
* ``reverse`` -- a number of the question is replaced by ``X`` and the answer is given:
  "If we know the answer to the above question is A, what is the value of unknown
  variable X?" The ground truth is the number removed. Built without the generator, so
  every reverse problem has an exact ground truth (MetaMath's FOBAR);
* ``depth`` / ``breadth`` -- WizardLM's in-depth (harder) and in-breadth (new topic)
  evolution; no ground truth. A judge prompt checks that each is coherent and solvable
  and rates its difficulty; depth problems below ``min_difficulty`` are dropped.

Evolved problems are de-duplicated (normalised text, and word 5-gram Jaccard >=
``near_duplicate`` against every problem already kept from the same seed).

Solutions: ``samples`` per problem at ``temperature``. A solution is kept when its final
answer (``afm.synth.answers``: the evaluation's GSM8K / MATH rules) equals the ground
truth; without one, the judge (``verify: judge``) or a majority of the samples
(``verify: majority``) decides. At most ``keep_per_problem`` distinct solutions per
problem are kept. A solution or an evolved problem that stopped for length is never a
finished turn (``afm.finish``): dropped as ``cut_reply`` and counted in the manifest's
``cut_replies``. Every drop is recorded with its stage and reason.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from afm.synth import prompts
from afm.synth.answers import answers_match, extract_answer, extract_boxed, gsm8k_gold
from afm.synth.generators import GenerationRequest
from afm.synth.run import SynthRun

STRATEGIES = ("seed", "rephrase", "reverse", "depth", "breadth")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]*\d)")


@dataclass
class MathConfig:
    strategies: tuple[str, ...] = STRATEGIES
    samples: int = 4  # N chain-of-thought samples per problem
    temperature: float = 0.8
    evolve_temperature: float = 0.7
    max_tokens: int = 512
    verify: str = "judge"  # no ground truth: judge | majority
    min_difficulty: int = 0  # depth problems rated below are dropped (0: keep all)
    keep_per_problem: int = 2
    near_duplicate: float = 0.8
    seed: int = 0


@dataclass
class Problem:
    id: str
    question: str
    gold: str | None
    style: str  # gsm8k | math
    strategy: str
    seed_id: str


def read_seed(record: dict[str, Any], i: int) -> Problem:
    """A seed in GSM8K (``question``, ``answer`` with ``####``), MATH (``problem``,
    ``solution`` with ``\\boxed``) or plain (``question``, optional ``answer``) layout."""
    sid = str(record.get("id", f"seed{i}"))
    if "problem" in record:
        gold = record.get("answer") or extract_boxed(str(record.get("solution", "")))
        return Problem(sid, str(record["problem"]), gold, "math", "seed", sid)
    if "question" not in record:
        raise ValueError(f"seed {sid}: expected 'question' (GSM8K) or 'problem' (MATH)")
    answer = record.get("answer")
    gold = gsm8k_gold(str(answer)) if answer not in (None, "") else None
    return Problem(sid, str(record["question"]), gold, "gsm8k", "seed", sid)


def reverse_problem(p: Problem) -> Problem | None:
    """MetaMath-style backward question with an exact ground truth, or None when the
    question has no number to hide or no numeric answer."""
    if p.gold is None or p.style != "gsm8k" or not re.fullmatch(r"-?\d+(?:\.\d+)?", p.gold):
        return None
    numbers = list(_NUMBER.finditer(p.question))
    if not numbers:
        return None
    pick = numbers[0]
    hidden = pick.group(0)
    question = p.question[: pick.start()] + "X" + p.question[pick.end():]
    question += f" If we know the answer to the above question is {p.gold}, what is the value of unknown variable X?"
    return Problem(f"{p.id}/reverse", question, gsm8k_gold(hidden), "gsm8k", "reverse", p.seed_id)


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _grams(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = _norm(text).split()
    return {tuple(words[i: i + n]) for i in range(max(1, len(words) - n + 1))}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / max(len(a | b), 1)


def _clean_problem(text: str) -> str:
    text = text.strip()
    text = re.sub(r"^(new problem|problem|rewritten problem)\s*:\s*", "", text, flags=re.I)
    return text.strip().strip('"').strip()


def _judge_rating(text: str) -> tuple[bool, int | None]:
    solvable = re.search(r"solvable\s*:\s*(yes|no)", text, re.I)
    difficulty = re.search(r"difficulty\s*:\s*(\d+)", text, re.I)
    return (bool(solvable) and solvable.group(1).lower() == "yes",
            int(difficulty.group(1)) if difficulty else None)


def evolve(run: SynthRun, seeds: list[Problem], cfg: MathConfig) -> list[Problem]:
    """Every problem of the chosen strategies, checked and de-duplicated."""
    problems = [s for s in seeds] if "seed" in cfg.strategies else []
    run.count("problems", "seed", len(seeds))
    if "reverse" in cfg.strategies:
        for s in seeds:
            r = reverse_problem(s)
            if r is None:
                run.drop("evolve", "no_reverse_form", s.id, strategy="reverse")
            else:
                problems.append(r)
    asks = [(name, fn) for name, fn in (("rephrase", prompts.rephrase), ("depth", prompts.evolve_depth),
                                        ("breadth", prompts.evolve_breadth)) if name in cfg.strategies]
    requests, meta = [], []
    for name, fn in asks:
        for s in seeds:
            requests.append(GenerationRequest(tuple(fn(s.question)), temperature=cfg.evolve_temperature,
                                              max_tokens=cfg.max_tokens, seed=cfg.seed, tag=f"math/{name}"))
            meta.append((name, s))
    candidates = []
    for (name, s), gen in zip(meta, run.ask(requests, "evolve")):
        texts = run.finished("evolve", gen, s.id, strategy=name)
        text = _clean_problem(texts[0]) if texts else ""
        if not texts:
            continue
        if not text:
            run.drop("evolve", "empty", s.id, strategy=name, text=text)
            continue
        gold = s.gold if name == "rephrase" else None
        candidates.append(Problem(f"{s.id}/{name}", text, gold, s.style, name, s.seed_id))
    # The judge checks problems without ground truth: coherent, solvable, hard enough.
    unjudged = [p for p in candidates if p.gold is None]
    ratings = run.ask([GenerationRequest(tuple(prompts.judge_problem(p.question)), max_tokens=32, seed=cfg.seed,
                                         tag="math/judge_problem") for p in unjudged], "judge problems")
    verdict = {p.id: _judge_rating(g.texts[0]) for p, g in zip(unjudged, ratings)}
    seen_text = {_norm(p.question) for p in problems}
    family: dict[str, list[set]] = {}
    for p in problems:
        family.setdefault(p.seed_id, []).append(_grams(p.question))
    for p in candidates:
        if p.id in verdict:
            solvable, difficulty = verdict[p.id]
            if not solvable:
                run.drop("evolve", "judged_unsolvable", p.id, strategy=p.strategy, question=p.question)
                continue
            if p.strategy == "depth" and cfg.min_difficulty and (difficulty or 0) < cfg.min_difficulty:
                run.drop("evolve", "too_easy", p.id, strategy=p.strategy, difficulty=difficulty)
                continue
        key = _norm(p.question)
        grams = _grams(p.question)
        if key in seen_text or any(_jaccard(grams, g) >= cfg.near_duplicate for g in family.get(p.seed_id, [])):
            run.drop("evolve", "duplicate", p.id, strategy=p.strategy, question=p.question)
            continue
        seen_text.add(key)
        family.setdefault(p.seed_id, []).append(grams)
        problems.append(p)
    for p in problems:
        run.count("problems", f"kept:{p.strategy}")
    return problems


def solve_and_filter(run: SynthRun, problems: list[Problem], cfg: MathConfig) -> None:
    """N solutions per problem; keep the verified ones (see the module docstring)."""
    requests = [GenerationRequest(tuple(prompts.solve(p.question, p.style)), n=cfg.samples,
                                  temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=cfg.seed,
                                  tag="math/solve") for p in problems]
    generations = run.ask(requests, "solve")
    to_judge: list[tuple[Problem, str]] = []
    verified: dict[str, list[tuple[str, str]]] = {p.id: [] for p in problems}
    for p, gen in zip(problems, generations):
        run.count("solutions", "sampled", len(gen.texts))
        texts = run.finished("solve", gen, p.id, strategy=p.strategy)  # a cut solution never trains
        answers = [extract_answer(t, p.style) for t in texts]
        if p.gold is not None:
            for text, ans in zip(texts, answers):
                if ans is None:
                    run.drop("solve", "no_final_answer", p.id, strategy=p.strategy)
                elif answers_match(ans, p.gold, p.style):
                    verified[p.id].append((text, "ground_truth"))
                else:
                    run.drop("solve", "wrong_answer", p.id, strategy=p.strategy, answer=ans, gold=p.gold)
        elif cfg.verify == "majority":
            votes = Counter(a for a in answers if a is not None)
            top, n = votes.most_common(1)[0] if votes else (None, 0)
            for text, ans in zip(texts, answers):
                if top is not None and n > len(gen.texts) / 2 and ans == top:
                    verified[p.id].append((text, "majority"))
                else:
                    run.drop("solve", "no_majority" if ans is not None else "no_final_answer", p.id,
                             strategy=p.strategy, answer=ans)
        else:
            for text, ans in zip(texts, answers):
                if ans is None:
                    run.drop("solve", "no_final_answer", p.id, strategy=p.strategy)
                else:
                    to_judge.append((p, text))
    if to_judge:
        verdicts = run.ask([GenerationRequest(tuple(prompts.judge_solution(p.question, t)), max_tokens=16,
                                              seed=cfg.seed, tag="math/judge_solution") for p, t in to_judge],
                           "judge solutions")
        for (p, text), v in zip(to_judge, verdicts):
            word = v.texts[0].strip().lower()
            if word.startswith("correct"):
                verified[p.id].append((text, "judge"))
            else:
                run.drop("solve", "judged_incorrect", p.id, strategy=p.strategy)
    for p in problems:
        kept, seen = 0, set()
        for text, how in verified[p.id]:
            if kept >= cfg.keep_per_problem or _norm(text) in seen:
                run.drop("solve", "surplus_solution", p.id, strategy=p.strategy)
                continue
            seen.add(_norm(text))
            kept += 1
            run.keep("solve", {
                "id": f"{p.id}/{kept}", "source": "synthetic-math",
                "messages": [{"role": "user", "content": p.question}, {"role": "assistant", "content": text}],
                "meta": {"strategy": p.strategy, "seed": p.seed_id, "gold": p.gold, "verified_by": how},
            })
        run.count("per_strategy", f"{p.strategy}:problems")
        if kept:
            run.count("per_strategy", f"{p.strategy}:solved")


def synth_math(run: SynthRun, seeds: list[dict[str, Any]], cfg: MathConfig) -> dict[str, Any]:
    """The whole pipeline; returns the pipeline's manifest section."""
    bad = [s for s in cfg.strategies if s not in STRATEGIES]
    if bad:
        raise ValueError(f"unknown strategies {bad}; known: {STRATEGIES}")
    if cfg.verify not in ("judge", "majority"):
        raise ValueError("verify must be judge or majority")
    problems_in = []
    for i, rec in enumerate(seeds):
        try:
            problems_in.append(read_seed(rec, i))
        except (ValueError, TypeError, AttributeError) as exc:
            run.drop("read", "bad_seed", rec if isinstance(rec, dict) else str(rec), error=str(exc))
    problems = evolve(run, problems_in, cfg)
    solve_and_filter(run, problems, cfg)
    per = run.counts["per_strategy"]
    table = {s: {"problems": per.get(f"{s}:problems", 0), "solved": per.get(f"{s}:solved", 0)}
             for s in cfg.strategies}
    return {"config": vars(cfg) | {"strategies": list(cfg.strategies)}, "per_strategy": table}
