"""Reward model end to end (slow): scripted arithmetic preferences -> the front door (`afm.training.runs.train`) on the tiny
model -> exported scorer; held-out pairwise accuracy clearly above chance, and the
exported scorer agrees with the trainer's own held-out evaluation."""

from __future__ import annotations

import random

import pytest

from tests.paths import CHAT_TOKENIZER

pytestmark = pytest.mark.slow
TOK = str(CHAT_TOKENIZER)


def test_reward_model_learns_the_graders_preferences(tmp_path):
    from afm.synth.arith_task import corrupted_responses, make_problems, write_preferences
    from afm.training.runs.train import train

    rng = random.Random(0)
    for split, seed, n in (("train", 1, 120), ("heldout", 2, 40)):
        write_preferences(tmp_path / f"{split}.jsonl",
                          [(p.messages(), corrupted_responses(p, rng)) for p in make_problems(n, seed=seed)],
                          pairs_per_prompt=4, seed=seed)
    out = train("tiny-rm", tmp_path / "run", data=[str(tmp_path / "train.jsonl")],
                heldout=[str(tmp_path / "heldout.jsonl")], task_options={"tokenizer": TOK}, steps=40,
                overrides=["model_overrides.vocab_size=640"], quiet=True)
    held = out["heldout"]
    assert held["pairs"] == 160 and held["rejects"] == 0
    assert held["accuracy"] > 0.6
    assert abs(held["accuracy"] - out["eval/heldout/accuracy"]) < 0.15  # bf16 training vs f32 scoring
