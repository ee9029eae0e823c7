"""Online RL on the one trainer: ``afm rl mdloo`` (``afm rl train``) prints
``params_sha256``; 4 iterations at once, 2 then a rerun to 4, and a run stopped by SIGTERM
mid-iteration then rerun all end with the same parameters (the rollout of an iteration is
a function of (seed, iteration) and the policy at its start; the batch of an iteration
under way is in the checkpoint). GRPO, Dr. GRPO and DAPO (its dynamic sampling's extra
rounds included) resume exactly the same way."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from afm.app.cli import main
from afm.training.core.metrics import read_metrics
from afm.training.tasks.mdloo import iteration_rows
from tests.paths import CHAT_TOKENIZER

CHAT = CHAT_TOKENIZER
REWARDS = ("def shorter(prompt, response):\n    return -len(response) / 10.0\n\n\n"
           "def thirds(prompt, response):  # many all-equal groups: DAPO resamples\n"
           "    return float(len(response) % 3 == 0)\n")
OPTIONS = {"prompts_per_iteration": 2, "k": 4, "steps_per_iteration": 2, "max_new_tokens": 8, "temperature": 0.7}
SETS = [*(f"task_options.{k}={v}" for k, v in OPTIONS.items()), "data.seq_len=64", "optimizer.learning_rate=1e-3"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    from flax import nnx

    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.config import get_config
    from afm.model.transformer import Transformer

    root = tmp_path_factory.mktemp("mdloo-resume")
    cfg = get_config("tiny").replace(vocab_size=640, max_seq_len=128)
    save_params(Transformer(cfg, rngs=nnx.Rngs(params=0)), root / "policy")
    (root / "prompts.jsonl").write_text("\n".join(json.dumps({"prompt": f"count to {i}"}) for i in range(5)) + "\n")
    (root / "afm_test_rl_rewards.py").write_text(REWARDS)
    return {"root": root, "policy": root / "policy", "prompts": root / "prompts.jsonl"}


def cli(setup: dict[str, Path], workdir: Path, iterations: int, monkeypatch: pytest.MonkeyPatch,
        algorithm: str = "", reward: str = "shorter") -> str:
    monkeypatch.syspath_prepend(str(setup["root"]))  # the reward's module, task:module:function
    args = ["rl", "train" if algorithm else "mdloo", "--workdir", str(workdir), "--policy", str(setup["policy"]),
            "--tokenizer", str(CHAT), "--prompts", str(setup["prompts"]),
            "--reward", f"task:afm_test_rl_rewards:{reward}", "--iterations", str(iterations)]
    if algorithm:
        args += ["--algorithm", algorithm]
    for value in SETS:
        args += ["--set", value]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    return re.search(r"params_sha256: ([0-9a-f]{64})", out.output).group(1)


@pytest.fixture(scope="module")
def four_at_once(setup, tmp_path_factory) -> str:
    with pytest.MonkeyPatch.context() as mp:
        return cli(setup, tmp_path_factory.mktemp("once") / "run", 4, mp)


def test_two_iterations_then_a_rerun_to_four_equal_four_at_once(setup, four_at_once, tmp_path, monkeypatch):
    half = cli(setup, tmp_path / "run", 2, monkeypatch)
    resumed = cli(setup, tmp_path / "run", 4, monkeypatch)
    assert resumed == four_at_once and half != resumed  # it trained on, from where it was
    rows = iteration_rows(read_metrics(tmp_path / "run"), OPTIONS["steps_per_iteration"])
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3]
    assert np.isfinite([r["reward"] for r in rows]).all()
    assert (tmp_path / "run" / "model" / "config.json").exists() and (tmp_path / "run" / "curves.png").exists()


class SigtermOnIteration:
    """The reward, which sends this process SIGTERM while scoring iteration ``at``'s rollout:
    the trainer then finishes that step and checkpoints in the middle of the iteration."""

    def __init__(self, at: int):
        self.at, self.calls = at, 0

    def __call__(self, prompts, responses) -> np.ndarray:
        if self.calls == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        self.calls += 1
        return np.asarray([-len(r) / 10.0 for r in responses], np.float32)


def test_sigterm_mid_iteration_then_a_rerun_equals_four_at_once(setup, four_at_once, tmp_path, online_rl):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers need the main thread")
    def run(reward_fn: SigtermOnIteration) -> dict:
        return online_rl(setup["policy"], setup["prompts"], tmp_path / "run", reward_fn=reward_fn, seq_len=64,
                         learning_rate=1e-3, iterations=4, **OPTIONS)

    stopped = run(SigtermOnIteration(at=1))
    assert stopped["preempted"]
    steps = sorted(int(p.name) for p in (tmp_path / "run" / "checkpoints").iterdir() if p.name.isdigit())
    assert steps[-1] == 3  # iteration 1 (steps 2-3) half done: its batch is in the checkpoint
    assert (tmp_path / "run" / "checkpoints" / "3" / "data_arrays").exists()
    resumed = run(SigtermOnIteration(at=-1))
    assert not resumed["preempted"] and resumed["params_sha256"] == four_at_once


@pytest.mark.parametrize("algorithm", [
    "dapo", pytest.param("grpo", marks=pytest.mark.slow), pytest.param("dr_grpo", marks=pytest.mark.slow)])
def test_the_grpo_family_resumes_exactly_like_mdloo(setup, tmp_path, monkeypatch, algorithm):
    """One iteration, then a rerun to two, ends where two at once do (DAPO with a reward
    of many ties, so its dynamic sampling draws extra rounds that a resumed run must
    draw again); the batch is the algorithm's (per-token log-probs)."""
    once = cli(setup, tmp_path / "once", 2, monkeypatch, algorithm, reward="thirds")
    cli(setup, tmp_path / "run", 1, monkeypatch, algorithm, reward="thirds")
    assert cli(setup, tmp_path / "run", 2, monkeypatch, algorithm, reward="thirds") == once
    rows = iteration_rows(read_metrics(tmp_path / "run"), OPTIONS["steps_per_iteration"])
    assert [r["iteration"] for r in rows] == [0, 1] and rows[0]["kl_ref"] == 0.0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algorithm"] == algorithm
    if algorithm == "dapo":
        assert all(r["ds_groups_kept"] + r["ds_groups_short"] == OPTIONS["prompts_per_iteration"] for r in rows)
        assert max(r["ds_rounds"] for r in rows) > 1  # it resampled, and resumed doing so
