"""How well an iTeC round's reranking reward tracks the true task reward, from the round's
``candidates.jsonl``: the reward's pairwise agreement with the true reward (pairs of one
prompt whose true rewards differ; same-member and cross-member), and the true reward of an
oracle pick, a random pick and each member's oracle best-of-K.

Run: ``python experiments/rl-arith/analyse_round.py ROUND_DIR/candidates.jsonl``.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import Counter, defaultdict

import numpy as np


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    by_prompt: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        by_prompt[r["prompt_index"]].append(r)
    agree: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for group in by_prompt.values():
        for a, b in itertools.combinations(group, 2):
            if a["true_reward"] == b["true_reward"]:
                continue
            kind = "same member" if a["member"] == b["member"] else "cross member"
            total[kind] += 1
            agree[kind] += (a["reward"] > b["reward"]) == (a["true_reward"] > b["true_reward"])
    n = sum(total.values())
    print(f"pairs with different true reward: {n}, reward agrees on {sum(agree.values()) / n:.3f} "
          + ", ".join(f"({k}: {agree[k] / total[k]:.3f} of {total[k]})" for k in sorted(total)))
    print(f"oracle pick over all candidates: {np.mean([max(r['true_reward'] for r in g) for g in by_prompt.values()]):.3f}")
    print(f"random pick: {np.mean([np.mean([r['true_reward'] for r in g]) for g in by_prompt.values()]):.3f}")
    for m in sorted({r["member"] for r in rows}):
        best = np.mean([max(r["true_reward"] for r in g if r["member"] == m) for g in by_prompt.values()])
        correct = np.mean([r["true_reward"] >= 1.0 for r in rows if r["member"] == m])
        print(f"member {m}: oracle best-of-K {best:.3f}, samples with the correct answer {correct:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
