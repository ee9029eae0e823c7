"""A tiny end-to-end RLHF run on the verifiable arithmetic task (``afm.synth.arith_task``):
SFT -> sampled replies graded by the script -> reward model (held-out accuracy by level)
-> DPO member (true task reward before/after on held-out prompts), and with ``--ipo-steps``
an IPO member beside it, trained the same way on the same pairs.

Run: ``python experiments/rl-arith/rlhf_arith.py --workdir runs/rlhf-arith --tokenizer tests/data/chat``.
Everything is small enough for a CPU; numbers go to ``WORKDIR/results.json``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np


def task_reward_of(model: Any, tok: Any, problems: list, *, greedy: bool = True, max_new_tokens: int = 64) -> float:
    from afm.synth.arith_task import task_reward
    from afm.training.rl.rollout import sample_groups

    roll = sample_groups(model, tok, [p.messages() for p in problems], k=1, max_new_tokens=max_new_tokens,
                         temperature=0.0 if greedy else 1.0)
    return float(np.mean([task_reward(p.messages(), r) for p, r in zip(problems, roll.texts, strict=True)]))


def run(workdir: str | Path, tokenizer: str, *, sft_steps: int = 80, rm_steps: int = 60, dpo_steps: int = 30,
        prompts: int = 160, samples: int = 4, vocab: int = 640, sft_model: str | None = None,
        ipo_steps: int = 0, ipo_beta: float = 0.1, seq_len: int | None = None,
        eval_every: int | None = None) -> dict[str, Any]:
    """SFT (or ``sft_model``, an existing SFT checkpoint, e.g. the one online RL starts
    from, so every member of a later iTeC round shares its start) -> preference data from its
    samples -> reward model and DPO member, both initialised from the SFT model."""
    from afm.model.checkpoints.checkpoint import load_config as load_model_config
    from afm.model.checkpoints.checkpoint import load_model
    from afm.model.text.tokenizer import Tokenizer
    from afm.synth.arith_task import (
        corrupted_responses,
        make_problems,
        write_preferences,
        write_sft,
    )
    from afm.synth.prepare import PrepareConfig, prepare_sft
    from afm.training.rl.rollout import sample_groups
    from afm.training.runs.train import train

    root = Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.load(tokenizer)
    results: dict[str, Any] = {}
    if sft_model is None:
        # 1. SFT on reference solutions (a different seed from every prompt used later)
        ov = [f"model_overrides.vocab_size={vocab}"]
        write_sft(root / "sft.jsonl", make_problems(400, seed=100))
        write_sft(root / "sft-heldout.jsonl", make_problems(40, seed=101))
        for name in ("sft", "sft-heldout"):
            prepare_sft([str(root / f"{name}.jsonl")], str(root / "prepared" / name),
                        PrepareConfig("arith", tokenizer), overwrite=True, progress=False)
        train("tiny-sft", root / "sft", data=[str(root / "prepared" / "sft")],
              heldout=[str(root / "prepared" / "sft-heldout")], steps=sft_steps, overrides=ov, quiet=True)
        sft_model = str(root / "sft" / "best")
    else:
        # The RM and DPO runs take the start's shape (tiny-rm is the tiny model plus overrides).
        shape = load_model_config(sft_model)
        ov = [f"model_overrides.{k}={getattr(shape, k)}"
              for k in ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim")]
    # RM, DPO and IPO: tiny-rm's window (128 tokens) drops longer pairs as too_long, and the
    # RM then cannot score a longer rollout (the arithmetic prompts alone reach 130 tokens)
    po = [*ov, f"data.seq_len={seq_len}"] if seq_len else list(ov)
    if eval_every:  # held-out evaluations (tiny-rm: every 20 steps)
        po.append(f"eval.every_steps={eval_every}")
    policy, _ = load_model(sft_model, dropout=0.0)
    # 2. preference data: sampled replies (+ scripted variants) on train / held-out prompts
    rng = random.Random(0)
    splits = {"train": make_problems(prompts, seed=200), "heldout": make_problems(prompts // 2, seed=201)}
    for split, problems in splits.items():
        roll = sample_groups(policy, tok, [p.messages() for p in problems], k=samples, max_new_tokens=64,
                             temperature=1.0, seed=7)
        # each reply with why it stopped: write_preferences drops those cut at max_new_tokens
        replies = [roll.replies()[i * samples:(i + 1) * samples] for i in range(len(problems))]
        pool = [(p.messages(), rs + corrupted_responses(p, rng)[:3]) for p, rs in zip(problems, replies, strict=True)]
        s = write_preferences(root / f"prefs-{split}.jsonl", pool, pairs_per_prompt=4, seed=1)
        results[f"prefs/{split}"] = {"pairs": s.pairs, "levels": s.levels, "cut_replies": s.cut_replies}
    # 3. reward model
    rm = train("tiny-rm", root / "rm", data=[str(root / "prefs-train.jsonl")],
               heldout=[str(root / "prefs-heldout.jsonl")], task_options={"tokenizer": tokenizer},
               init_from=str(sft_model), steps=rm_steps, overrides=po, quiet=True)
    results["rm/heldout"] = rm["heldout"]
    # 4. DPO member from the SFT model on the same preference pairs
    train("tiny-rm", root / "dpo", data=[str(root / "prefs-train.jsonl")],
          task_options={"tokenizer": tokenizer, "beta": 0.1}, init_from=str(sft_model),
          heldout=[str(root / "prefs-heldout.jsonl")], steps=dpo_steps,
          overrides=[*po, "optimizer.learning_rate=3e-4", "task=dpo"], quiet=True)
    members = ["dpo"]
    if ipo_steps:  # 5. IPO beside it: same start, pairs, stage, LR and batch
        train("tiny-rm", root / "ipo", data=[str(root / "prefs-train.jsonl")],
              task_options={"tokenizer": tokenizer, "beta": ipo_beta}, init_from=str(sft_model),
              heldout=[str(root / "prefs-heldout.jsonl")], steps=ipo_steps,
              overrides=[*po, "optimizer.learning_rate=3e-4", "task=ipo"], quiet=True)
        members.append("ipo")
    test = make_problems(64, seed=300)
    results["task_reward/sft"] = task_reward_of(policy, tok, test)
    for name in members:
        model, _ = load_model(root / name / "model", dropout=0.0)
        results[f"task_reward/{name}"] = task_reward_of(model, tok, test)
    (root / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--sft-steps", type=int, default=80)
    ap.add_argument("--sft", default=None, help="start from this SFT checkpoint instead of training one")
    ap.add_argument("--rm-steps", type=int, default=60)
    ap.add_argument("--dpo-steps", type=int, default=30)
    ap.add_argument("--prompts", type=int, default=160, help="training prompts for preference data (half as many held out)")
    ap.add_argument("--ipo-steps", type=int, default=0, help="also train an IPO member on the same pairs (0: none)")
    ap.add_argument("--ipo-beta", type=float, default=0.1)
    ap.add_argument("--seq-len", type=int, default=None,
                    help="data.seq_len of the RM, DPO and IPO runs (default: tiny-rm's 128, which drops longer pairs)")
    ap.add_argument("--eval-every", type=int, default=None, help="RM/DPO/IPO held-out evaluation every N steps")
    a = ap.parse_args()
    print(json.dumps(run(a.workdir, a.tokenizer, sft_steps=a.sft_steps, rm_steps=a.rm_steps,
                         dpo_steps=a.dpo_steps, sft_model=a.sft, prompts=a.prompts,
                         ipo_steps=a.ipo_steps, ipo_beta=a.ipo_beta, seq_len=a.seq_len,
                         eval_every=a.eval_every), indent=2))
