"""True task reward of checkpoints on the arithmetic test problems (``make_problems(N,
seed=300)``: a seed no training, preference or RL prompt uses; ``experiments/rl-arith/rlhf_arith.py``
reports on the first 64), greedy and, with ``--samples S``, over S replies sampled at
``--temperature`` per problem; with how many replies have the correct answer and how many
the ``Answer: N`` format -- the reward's two largest terms.

Run: ``python experiments/rl-arith/greedy_eval.py [--n 256 --samples 4] sft=W/sft/best dpo=W/dpo/model ...``.
With ``--per-problem FILE`` it also writes every reply's reward and correctness per problem
(JSON: ``{name: {"greedy": {"reward": [n], "correct": [n]}, "sampled": {"reward": [n][S], ...}}}``),
the input of ``paired_se.py`` (paired differences against a start model, standard errors over
problems).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def _summary(problems: list, replies: list[str]) -> dict:
    from afm.synth.arith_task import grade_response

    grades = [grade_response(p.messages(), r) for p, r in zip(problems, replies, strict=True)]
    return {"reward": round(float(np.mean([g.utility for g in grades])), 4),
            "correct": round(float(np.mean([g.correct for g in grades])), 4),
            "format_ok": round(float(np.mean([g.format_ok for g in grades])), 4), "replies": len(grades)}


def _per_problem(problems: list, replies: list[str], per: int) -> dict:
    """Reward and correctness of every reply, grouped per problem (``per`` replies each)."""
    from afm.synth.arith_task import grade_response

    grades = [grade_response(p.messages(), r) for p, r in zip(problems, replies, strict=True)]
    rows = [grades[i:i + per] for i in range(0, len(grades), per)]
    return {"reward": [[round(float(g.utility), 4) for g in row] for row in rows],
            "correct": [[int(bool(g.correct)) for g in row] for row in rows]}


def main() -> None:
    from afm.model.checkpoints.checkpoint import load_model
    from afm.model.text.tokenizer import Tokenizer
    from afm.synth.arith_task import make_problems
    from afm.training.rl.rollout import sample_groups

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="NAME=CHECKPOINT")
    ap.add_argument("--n", type=int, default=64, help="test problems")
    ap.add_argument("--samples", type=int, default=0, help="sampled replies per problem (0: greedy only)")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--tokenizer", default="tests/data/chat")
    ap.add_argument("--per-problem", default=None, help="write every reply's reward per problem here (JSON)")
    a = ap.parse_args()
    per_problem: dict = {}
    tok = Tokenizer.load(a.tokenizer)
    test = make_problems(a.n, seed=300)
    prompts = [p.messages() for p in test]
    for spec in a.models:
        name, path = spec.split("=", 1)
        model, _ = load_model(path, dropout=0.0)
        greedy = sample_groups(model, tok, prompts, k=1, max_new_tokens=a.max_new_tokens, temperature=0.0)
        row = {"greedy": _summary(test, greedy.texts)}
        per_problem[name] = {"greedy": _per_problem(test, greedy.texts, 1)}
        if a.samples:
            roll = sample_groups(model, tok, prompts, k=a.samples, max_new_tokens=a.max_new_tokens,
                                 temperature=a.temperature, seed=11)
            repeated = [p for p in test for _ in range(a.samples)]
            row[f"sampled_T{a.temperature:g}"] = _summary(repeated, roll.texts)
            per_problem[name]["sampled"] = _per_problem(repeated, roll.texts, a.samples)
        print(name, json.dumps(row), flush=True)
        if a.per_problem:
            meta = {"n": a.n, "samples": a.samples, "temperature": a.temperature, "test_seed": 300,
                    "max_new_tokens": a.max_new_tokens, "checkpoints": dict(m.split("=", 1) for m in a.models)}
            Path(a.per_problem).write_text(json.dumps({"meta": meta, "models": per_problem}) + "\n")


if __name__ == "__main__":
    main()
