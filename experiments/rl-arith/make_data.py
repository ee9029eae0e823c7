"""The arithmetic task's data for the RL examples (experiments/rl-arith/README.md):
disjoint problem sets, one seed each, so no prompt used for training is scored.

Writes under OUT (default ``work/rl/data``):

* ``train.jsonl`` (1,500 problems, seed 0) and ``heldout.jsonl`` (100, seed 1): reference
  solutions as chat rows, input of ``afm sft prepare``;
* ``rl_prompts.jsonl`` (400, seed 2): prompts online RL samples from;
* ``eval_prompts.jsonl`` (256, seed 3): held-out prompts the true reward is reported on;
* ``itec_prompts.jsonl`` (256, seed 4): prompts of the iTeC round;
* ``rm_prompts.jsonl`` (2,000, seed 5) and ``rm_heldout_prompts.jsonl`` (400, seed 6): prompts
  the committee answers for the refreshed reward model's preference pairs (train / held out);
* ``itec_prompts_1k.jsonl`` (1,024, seed 7, less every question of a set trained on): a larger
  iTeC round, for a smaller standard error;
* ``rm_base.jsonl`` (30,000 problems, seed 10, less every question that also occurs in a set
  something is measured on -- eval, iTeC, RM held-out and the test problems of
  ``greedy_eval.py``): reference solutions the reward model's larger base is fine-tuned on
  before it learns from preferences.

Run: ``python experiments/rl-arith/make_data.py [OUT]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SETS = {"train": (1500, 0), "heldout": (100, 1), "rl_prompts": (400, 2), "eval_prompts": (256, 3),
        "itec_prompts": (256, 4), "rm_prompts": (2000, 5), "rm_heldout_prompts": (400, 6),
        "rm_base": (30000, 10), "itec_prompts_1k": (1024, 7)}
TRAINED_ON = ("train", "rl_prompts", "rm_prompts", "rm_base")
MEASURED_ON = ("heldout", "eval_prompts", "itec_prompts", "rm_heldout_prompts")
TEST_SEED, TEST_MAX = 300, 1000  # greedy_eval.py's test problems (its --n is at most this)


def _questions(path: Path) -> set[str]:
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return {row["messages"][0]["content"].split("\n")[0] for row in rows}


def main(out: str = "work/rl/data") -> None:
    from afm.synth.arith_task import make_problems, write_sft

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    measured = {p.question for p in make_problems(TEST_MAX, seed=TEST_SEED)}
    measured |= {p.question for name in MEASURED_ON for p in make_problems(*SETS[name])}
    for name, (n, seed) in SETS.items():
        problems = make_problems(n, seed=seed)
        if name == "rm_base":
            problems = [p for p in problems if p.question not in measured]
        elif name == "itec_prompts_1k":  # drawn after rm_base was fixed: keep it out instead
            trained = {q for other in TRAINED_ON for q in _questions(root / f"{other}.jsonl")}
            problems = [p for p in problems if p.question not in trained]
        path = root / f"{name}.jsonl"
        if name in ("train", "heldout", "rm_base"):
            write_sft(path, problems)
        else:
            path.write_text("".join(json.dumps({"id": p.id, "messages": p.messages()}) + "\n" for p in problems))
        print(f"{path}: {len(problems)} problems (seed {seed})")


if __name__ == "__main__":
    main(*sys.argv[1:2])
