"""Shared helpers of the training tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.paths import CHAT_TOKENIZER

CHAT = CHAT_TOKENIZER


def run_online_rl(policy: Path, prompts: Path, workdir: Path, *, reward_fn: Any = None, eval_reward_fn: Any = None,
                  seq_len: int = 64, learning_rate: float = 1e-4, **options: Any) -> dict[str, Any]:
    """An ``afm rl mdloo`` run through the front door (stage ``tiny-mdloo``), with rewards
    already in memory; the run's result with its ``summary``."""
    from afm.training.runs.train import train

    def attach(task: Any) -> None:
        task.reward_fn, task.eval_reward_fn = reward_fn, eval_reward_fn

    return train("tiny-mdloo", workdir, init_from=str(policy), quiet=True, configure_task=attach,
                 overrides=[f"data.seq_len={seq_len}", f"optimizer.learning_rate={learning_rate}", "eval.every_steps=0"],
                 task_options={"tokenizer": str(CHAT), "prompts": str(prompts), **options})


@pytest.fixture
def online_rl():
    return run_online_rl
