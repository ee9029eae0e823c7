"""Writes the fixed inputs of the judged-benchmark parity tests (``fixtures.json``).

Run once; the file is checked in. The inputs are made up (no real judge ran): AlpacaEval
items with reference and model outputs of varied lengths, the judge's top-5 log-probs of
its one token (both tokens, one, neither, other tokens only), identical outputs, each
item's difficulty and a small ``df_gamed`` table; Arena-Hard judgments in two categories
with every kind of verdict text v2.0's parser meets (lower case, single brackets,
conflicting labels, no label, a failed game). ``make_expected.py`` computes the published
code's numbers from them.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

HERE = Path(__file__).parent


def alpaca(rng: random.Random) -> dict:
    words = "the a model answer writes long short text about cats dogs trains rivers music code".split()
    items = []
    for i in range(60):
        ref = " ".join(rng.choice(words) for _ in range(rng.randint(5, 60)))
        ans = " ".join(rng.choice(words) for _ in range(rng.randint(3, 90)))
        kind = i % 8
        instruction = f"Instruction {i}: " + " ".join(rng.choice(words) for _ in range(6))
        difficulty = round(rng.uniform(-2, 2), 6)
        # A judge that likes length and dislikes hard instructions, with noise: P(model wins).
        # Which token stands for the model depends on AlpacaEval's seeded switch of the order.
        z = (len(ans) - len(ref)) / 60 - 0.8 * difficulty + rng.gauss(0, 0.7)
        p_model = 1 / (1 + math.exp(-z))
        model_token_is_m = random.Random("is_switched_outputs" + instruction + "0").choices([False, True], k=1)[0]
        p_m = p_model if model_token_is_m else 1 - p_model
        lp_m, lp_big = math.log(max(p_m, 1e-6) * 0.97), math.log(max(1 - p_m, 1e-6) * 0.97)
        others = [{"token": t, "logprob": -rng.uniform(5, 15)} for t in ("Both", "The", "Based")]
        if kind == 5:  # only M among the top tokens
            top = [{"token": "M", "logprob": lp_big}, *others]
        elif kind == 6:  # neither: no preference
            top = others
        elif kind == 7 and i % 16 == 7:  # identical outputs: a draw, never sent
            ans = ref
            top = None
        else:
            top = [{"token": "m", "logprob": lp_m}, {"token": "M", "logprob": lp_big}, *others]
        items.append({"index": i, "instruction": instruction, "reference": ref, "answer": ans, "top_logprobs": top,
                      "difficulty": difficulty})
    gamed = []
    for model in ("gamed_verbose", "gamed_concise"):
        for i in range(len(items)):
            std_delta_len = round(rng.uniform(-2, 2), 6)
            z = -1.2 * std_delta_len - 0.8 * items[i]["difficulty"] + rng.gauss(0, 0.5)
            gamed.append({"model": model, "index": i, "preference": round(1 / (1 + math.exp(-z)), 6),
                          "std_delta_len": std_delta_len,
                          "instruction_difficulty": items[i]["difficulty"], "not_gamed_baseline": False})
    return {"items": items, "gamed": gamed}


def arena(rng: random.Random) -> list[dict]:
    texts = [
        "My own answer first. ... My final verdict is: [[B>A]]",
        "Assistant B is much better. [[B>>A]]",
        "verdict: [[a>b]]",  # lower case: v2.0 upper-cases
        "I first thought [[A>B]] but on reflection [[B>A]]",  # conflicting: the last wins
        "Final: [A=B]",  # single brackets
        "[[A=B]]",
        "Assistant A is significantly better: [[A>>B]]",
        "no verdict here",  # no label: the question is dropped
        None,  # the judge failed
        "[[B>A]] [B>>A]",  # double brackets are looked for first
    ]
    rows = []
    for category, n in (("hard_prompt", 30), ("creative_writing", 14)):
        for q in range(n):
            games = [rng.choice(texts), rng.choice(texts)]
            rows.append({"uid": f"{category}-{q}", "category": category, "games": games})
    return rows


def main() -> None:
    rng = random.Random(42)
    fixtures = {"alpaca_eval": alpaca(rng), "arena_hard": arena(rng)}
    (HERE / "fixtures.json").write_text(json.dumps(fixtures, indent=1) + "\n")


if __name__ == "__main__":
    main()
