"""True task reward of checkpoints on the arithmetic test problems (``make_problems(N,
seed=300)``: a seed no training, preference or RL prompt uses; ``experiments/rl-arith/rlhf_arith.py``
reports on the first 64), greedy and, with ``--samples S``, over S replies sampled at
``--temperature`` per problem; with how many replies have the correct answer and how many
the ``Answer: N`` format -- the reward's two largest terms.

Run: ``python experiments/rl-arith/greedy_eval.py [--n 256 --samples 4] sft=W/sft/best dpo=W/dpo/model ...``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def _summary(problems: list, replies: list[str]) -> dict:
    from afm.synth.arith_task import grade_response

    grades = [grade_response(p.messages(), r) for p, r in zip(problems, replies, strict=True)]
    return {"reward": round(float(np.mean([g.utility for g in grades])), 4),
            "correct": round(float(np.mean([g.correct for g in grades])), 4),
            "format_ok": round(float(np.mean([g.format_ok for g in grades])), 4), "replies": len(grades)}


def main() -> None:
    from afm.model.checkpoint import load_model
    from afm.model.tokenizer import Tokenizer
    from afm.synth.arith_task import make_problems
    from afm.training.rl.rollout import sample_groups

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help="NAME=CHECKPOINT")
    ap.add_argument("--n", type=int, default=64, help="test problems")
    ap.add_argument("--samples", type=int, default=0, help="sampled replies per problem (0: greedy only)")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--tokenizer", default="tests/data/chat")
    a = ap.parse_args()
    tok = Tokenizer.load(a.tokenizer)
    test = make_problems(a.n, seed=300)
    prompts = [p.messages() for p in test]
    for spec in a.models:
        name, path = spec.split("=", 1)
        model, _ = load_model(path, dropout=0.0)
        greedy = sample_groups(model, tok, prompts, k=1, max_new_tokens=a.max_new_tokens, temperature=0.0)
        row = {"greedy": _summary(test, greedy.texts)}
        if a.samples:
            roll = sample_groups(model, tok, prompts, k=a.samples, max_new_tokens=a.max_new_tokens,
                                 temperature=a.temperature, seed=11)
            row[f"sampled_T{a.temperature:g}"] = _summary([p for p in test for _ in range(a.samples)], roll.texts)
        print(name, json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
