"""Greedy true task reward of checkpoints on the 64 test problems ``afm.training.rlhf_arith``
reports on (``make_problems(64, seed=300)``, 64 new tokens), with how many replies have the
correct answer and how many the ``Answer: N`` format -- the reward's two largest terms.

Run: ``python examples/rl-arith/greedy_eval.py sft=W/sft/best dpo=W/dpo/model ...``.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def main(specs: list[str]) -> None:
    from afm.model.checkpoint import load_model
    from afm.model.tokenizer import Tokenizer
    from afm.synth.arith_task import grade_response, make_problems
    from afm.training.rejection_sampling import sample_replies

    tok = Tokenizer.load("tests/data/chat")
    test = make_problems(64, seed=300)
    for spec in specs:
        name, path = spec.split("=", 1)
        model, _ = load_model(path, dropout=0.0)
        replies, _, _ = sample_replies(model, tok, [p.messages() for p in test], 1, max_new_tokens=64,
                                       temperature=1e-6)
        grades = [grade_response(p.messages(), r[0]) for p, r in zip(test, replies, strict=True)]
        print(name, json.dumps({"greedy_reward": round(float(np.mean([g.utility for g in grades])), 4),
                                "correct": sum(g.correct for g in grades),
                                "format_ok": sum(g.format_ok for g in grades), "of": len(test)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
