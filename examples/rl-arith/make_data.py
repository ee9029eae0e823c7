"""The arithmetic task's data for the RL examples (README: "afm rl mdloo, afm itec"):
disjoint problem sets, one seed each, so no prompt used for training is scored.

Writes under OUT (default ``work/rl/data``):

* ``train.jsonl`` (1,500 problems, seed 0) and ``heldout.jsonl`` (100, seed 1): reference
  solutions as chat rows, input of ``afm sft prepare``;
* ``rl_prompts.jsonl`` (400, seed 2): prompts online RL samples from;
* ``eval_prompts.jsonl`` (256, seed 3): held-out prompts the true reward is reported on;
* ``itec_prompts.jsonl`` (256, seed 4): prompts of the iTeC round.

Run: ``python examples/rl-arith/make_data.py [OUT]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SETS = {"train": (1500, 0), "heldout": (100, 1), "rl_prompts": (400, 2), "eval_prompts": (256, 3),
        "itec_prompts": (256, 4)}


def main(out: str = "work/rl/data") -> None:
    from afm.synth.arith_task import make_problems, write_sft

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    for name, (n, seed) in SETS.items():
        problems = make_problems(n, seed=seed)
        path = root / f"{name}.jsonl"
        if name in ("train", "heldout"):
            write_sft(path, problems)
        else:
            path.write_text("".join(json.dumps({"id": p.id, "messages": p.messages()}) + "\n" for p in problems))
        print(f"{path}: {n} problems (seed {seed})")


if __name__ == "__main__":
    main(*sys.argv[1:2])
