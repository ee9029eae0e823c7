"""MDLOO: the report's equations (NumPy transcriptions), the RLOO advantage against TRL's
(stored values; the live comparison is tests/slow/training/test_rloo_trl_parity.py), the
batched rollout's log-probs, and a tiny loop end to end."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.training.core.metrics import read_metrics
from afm.training.data.prompts import read_prompts
from afm.training.rl.rewards import TaskReward
from afm.training.tasks.mdloo import (
    iteration_rows,
    kl_penalised_reward,
    loo_advantage,
    mdloo_terms,
    ppo_clip_terms,
)
from tests.paths import CHAT_TOKENIZER

CHAT = CHAT_TOKENIZER
STORED = Path(__file__).resolve().parent / "data" / "rloo_trl_expected.json"


def _np_loo(rewards: np.ndarray, k: int) -> np.ndarray:
    """Eq. 7 written out with explicit loops."""
    out = np.zeros_like(rewards)
    for g in range(len(rewards) // k):
        for i in range(k):
            others = [rewards[g * k + j] for j in range(k) if j != i]
            out[g * k + i] = rewards[g * k + i] - sum(others) / (k - 1)
    return out


def test_loo_advantage_is_eq7() -> None:
    r = np.random.default_rng(0).normal(size=12).astype(np.float64)
    np.testing.assert_allclose(loo_advantage(r, 4), _np_loo(r, 4), atol=1e-12)
    np.testing.assert_allclose(np.asarray(loo_advantage(jnp.asarray(r, jnp.float32), 3)), _np_loo(r, 3), atol=1e-5)
    # Within a group the advantages sum to zero: LOO is a baseline, not a reward shift.
    assert np.allclose(loo_advantage(r, 4).reshape(3, 4).sum(1), 0)
    with pytest.raises(ValueError):
        loo_advantage(r, 1)


def test_mdloo_objective_and_gradient_equal_the_report() -> None:
    """Eq. 8 with the nK samples (rho A - gamma rho log rho, averaged) and its gradient in
    the per-response log-prob, which must equal eq. 9's sample form:
    rho A - gamma rho (log rho + 1) (the gradient of the KL estimate)."""
    rng = np.random.default_rng(1)
    logp = rng.normal(-20, 3, size=16)
    old = logp + rng.normal(0, 0.2, size=16)
    adv = rng.normal(size=16)
    gamma = 0.3
    rho = np.exp(logp - old)
    expected = np.mean(rho * adv - gamma * rho * np.log(rho))
    terms = mdloo_terms(jnp.asarray(logp), jnp.asarray(old), jnp.asarray(adv), gamma)
    assert float(jnp.mean(terms["objective"])) == pytest.approx(expected, rel=1e-5, abs=1e-6)
    grad = jax.grad(lambda lp: jnp.sum(mdloo_terms(lp, jnp.asarray(old), jnp.asarray(adv), gamma)["objective"]))(
        jnp.asarray(logp))
    np.testing.assert_allclose(np.asarray(grad), rho * adv - gamma * rho * (np.log(rho) + 1), rtol=1e-5, atol=1e-6)
    # At theta = theta_k the KL term vanishes and the gradient is the policy gradient A.
    at_start = mdloo_terms(jnp.asarray(old), jnp.asarray(old), jnp.asarray(adv), gamma)
    np.testing.assert_allclose(np.asarray(at_start["objective"]), adv, rtol=1e-6)


def test_ppo_clip_is_the_clipped_surrogate() -> None:
    adv = jnp.array([1.0, -1.0, 1.0, -1.0])
    logp = jnp.log(jnp.array([1.5, 1.5, 0.5, 0.5]))
    terms = ppo_clip_terms(logp, jnp.zeros(4), adv, 0.2)
    np.testing.assert_allclose(np.asarray(terms["objective"]), [1.2, -1.5, 0.5, -0.8], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(terms["clipped"]), [1, 0, 0, 1])


def test_kl_penalised_rloo_equals_trl_stored() -> None:
    """The same inputs as the slow-tier test that runs TRL's own RLOO code; its outputs
    are stored here (within 1e-5)."""
    case = json.loads(STORED.read_text())
    rewards = kl_penalised_reward(np.asarray(case["scores"]), np.asarray(case["policy_logprobs"]),
                                  np.asarray(case["ref_logprobs"]), np.asarray(case["mask"]), case["beta"])
    adv = loo_advantage(rewards, case["k"])
    np.testing.assert_allclose(adv, case["trl_advantages"], atol=1e-5)


def test_task_reward_counts_prompts_it_cannot_grade() -> None:
    def fn(prompt, response):
        if prompt[-1]["content"] == "bad":
            raise ValueError("not a task prompt")
        return float(len(response))

    r = TaskReward(fn)
    out = r([[{"role": "user", "content": "ok"}], [{"role": "user", "content": "bad"}]], ["abc", "x"])
    assert out.dtype == np.float32 and out[0] == 3.0 and np.isnan(out[1])  # never a silent 0
    assert r.last_reasons == {"not a task prompt": 1}
    with pytest.raises(ValueError):
        r([[{"role": "user", "content": "ok"}]], [])


def test_loo_advantage_leaves_unscored_responses_out() -> None:
    rewards = np.array([1.0, 2.0, 9.0, 3.0, 5.0, 7.0, 0.0, 0.0], np.float32)
    valid = np.array([True, True, False, True, True, False, False, False])
    adv = loo_advantage(rewards, 4, valid)
    # group 1: baselines over the other *valid* responses (2 and 3 for the first, ...)
    np.testing.assert_allclose(adv[:4], [1.0 - 2.5, 2.0 - 2.0, 0.0, 3.0 - 1.5])
    np.testing.assert_allclose(adv[4:], 0.0)  # one valid response: no baseline, no update
    np.testing.assert_allclose(loo_advantage(rewards, 4, np.ones(8, bool)), loo_advantage(rewards, 4), atol=1e-6)


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory) -> Path:
    from flax import nnx

    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.config import get_config
    from afm.model.transformer import Transformer

    cfg = get_config("tiny").replace(vocab_size=640, max_seq_len=128)
    path = tmp_path_factory.mktemp("policy") / "model"
    save_params(Transformer(cfg, rngs=nnx.Rngs(params=0)), path)
    return path


@pytest.mark.parametrize("top_k", [0, 7])
def test_rollout_logprobs_match_teacher_forcing(tiny_policy: Path, top_k: int) -> None:
    """The KV-cache sampler's log-probs of its own tokens equal the teacher-forced forward's
    on the packed rows (the loop's pi_theta_k), with top-k sampling scored as its top-k
    distribution, and the mask covers exactly the responses."""
    from afm.model.checkpoints.checkpoint import load_model
    from afm.model.text.tokenizer import Tokenizer
    from afm.training.rl.rollout import pack_responses, response_logprobs, sample_groups

    model, _ = load_model(tiny_policy)
    tok = Tokenizer.load(CHAT)
    prompts = [[{"role": "user", "content": "What is 2+3?"}], [{"role": "user", "content": "hi there, friend"}]]
    roll = sample_groups(model, tok, prompts, k=3, max_new_tokens=12, temperature=1.0, seed=3, top_k=top_k)
    assert len(roll.response_ids) == 6 and roll.tokens_per_second > 0
    packed = pack_responses([p for p in roll.prompt_ids for _ in range(3)], roll.response_ids, pad_id=tok.pad_id)
    assert packed["response_mask"].sum(1).tolist() == [len(r) for r in roll.response_ids]
    lp = response_logprobs(model, packed, top_k=top_k)
    for i, sampled in enumerate(roll.sampler_logprobs):
        row = lp[i][packed["response_mask"][i] > 0]
        np.testing.assert_allclose(row, sampled, atol=2e-4)


def test_held_out_evaluation_reports_greedy_and_sampled_reward(tiny_policy: Path) -> None:
    """Near-zero temperature sampling is greedy decoding, so the two held-out rewards agree;
    at T=1 the sampled reward averages different responses (what RL maximises)."""
    from afm.model.checkpoints.checkpoint import load_model
    from afm.model.text.tokenizer import Tokenizer
    from afm.training.tasks.mdloo import evaluate_policy

    model, _ = load_model(tiny_policy)
    tok = Tokenizer.load(CHAT)
    prompts = [[{"role": "user", "content": "What is 2+3?"}], [{"role": "user", "content": "hi there"}]]
    reward = TaskReward(lambda p, r: float(len(r)))
    cold = evaluate_policy(model, tok, prompts, reward, max_new_tokens=6, samples=3, temperature=1e-6)
    assert cold["sampled_reward"] == pytest.approx(cold["reward"])
    greedy_only = evaluate_policy(model, tok, prompts, reward, max_new_tokens=6, samples=0)
    assert "sampled_reward" not in greedy_only and greedy_only["reward"] == cold["reward"]


def test_online_rl_needs_a_reward(tiny_policy: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from afm.app.cli import main

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": "count to 3"}) + "\n")
    base = ["rl", "mdloo", "--policy", str(tiny_policy), "--tokenizer", str(CHAT), "--prompts", str(prompts),
            "--workdir", str(tmp_path / "run")]
    result = CliRunner().invoke(main, base)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "Error: online RL needs a reward: --reward task:NAME" in " ".join(result.output.split())
    result = CliRunner().invoke(main, [*base, "--reward", "task:arith", "--eval-prompts", str(prompts)])
    assert result.exit_code != 0 and "--eval-prompts needs --eval-reward" in result.output


def test_a_reward_that_cannot_score_stops_the_run_with_the_share(tiny_policy: Path, tmp_path: Path) -> None:
    """task:arith on prompts of another task: every response unscored -> one line, no model."""
    from click.testing import CliRunner

    from afm.app.cli import main

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"tell me a story about {w}"})
                                 for w in ("cats", "dogs", "owls", "bees")) + "\n")
    result = CliRunner().invoke(main, [
        "rl", "mdloo", "--policy", str(tiny_policy), "--tokenizer", str(CHAT), "--prompts", str(prompts),
        "--workdir", str(tmp_path / "run"), "--reward", "task:arith", "--iterations", "1",
        "--set", "task_options.prompts_per_iteration=4", "--set", "task_options.k=2",
        "--set", "task_options.max_new_tokens=4", "--set", "data.seq_len=64"])
    text = " ".join(result.output.split())
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    assert "could not score 100% of 8 responses in iteration 0 (NotArithmetic: 8)" in text, text
    assert not (tmp_path / "run" / "model").exists()


def test_a_reward_that_scores_some_responses_runs_and_reports_the_share(tiny_policy: Path, tmp_path: Path,
                                                                         online_rl) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"count to {i}"}) for i in range(4)) + "\n")

    def odd_only(prompt, response):
        if int(prompt[-1]["content"].split()[-1]) % 2 == 0:
            raise ValueError("even: this grader takes odd counts only")
        return -len(response) / 10.0

    online_rl(tiny_policy, prompts, tmp_path / "run", reward_fn=TaskReward(odd_only), seq_len=64, iterations=2,
              prompts_per_iteration=4, k=2, steps_per_iteration=1, max_new_tokens=6, max_unscored=0.75)
    rows = iteration_rows(read_metrics(tmp_path / "run"), 1)
    # every iteration draws all four prompts (n = 4 of 4), two of them even: exactly half unscored
    shares = [r["unscored_share"] for r in rows]
    assert shares == [0.5, 0.5]
    assert all(np.isfinite(r["reward"]) or r["unscored_share"] == 1.0 for r in rows)


def run_tiny_loop(run_online_rl, policy: Path, workdir: Path, algorithm: str, *, iterations: int = 2, steps: int = 1,
                  with_eval: bool = False) -> tuple[dict, list[dict]]:
    """A few iterations on a random tiny policy with a reward it can move (shorter is better)."""
    prompts = workdir / "prompts.jsonl"
    workdir.mkdir(parents=True, exist_ok=True)
    prompts.write_text("\n".join(json.dumps({"prompt": f"count to {i}"}) for i in range(4)) + "\n")
    reward = TaskReward(lambda p, r: -len(r) / 10.0)
    summary = run_online_rl(policy, prompts, workdir / algorithm, reward_fn=reward, eval_reward_fn=reward,
                            seq_len=64, learning_rate=1e-3, eval_prompts=str(prompts) if with_eval else "",
                            algorithm=algorithm,
                            iterations=iterations, prompts_per_iteration=2, k=4, steps_per_iteration=steps,
                            max_new_tokens=8, temperature=0.7)["summary"]
    rows = iteration_rows(read_metrics(workdir / algorithm), steps)  # one per iteration
    assert len(rows) == iterations
    for row in rows:
        assert np.isfinite([row["reward"], row["kl_ref"], row["kl_prev"], row["adv_std"]]).all()
        assert abs(row["adv_mean"]) < 1e-5  # LOO advantages sum to zero per prompt
    # The reference computes exactly what the policy computes at the start (a bf16 model:
    # the copy keeps its norm scales in float32, as the forward applies them; every program
    # compiled with EXACT_ROUNDING): KL 0 exactly. The loss scores the tempered policy the
    # sampler drew from, in a program that rounds as the scoring pass does: ratio exactly 1.
    assert rows[0]["kl_ref"] == 0.0
    assert rows[0]["ratio_first_step"] == 1.0
    assert (workdir / algorithm / "model" / "config.json").exists()
    return summary, rows


def test_tiny_mdloo_loop_end_to_end(tiny_policy: Path, tmp_path: Path, online_rl) -> None:
    summary, rows = run_tiny_loop(online_rl, tiny_policy, tmp_path, "mdloo")
    assert summary["eval"] == [] and rows[1]["iteration"] == 1


def test_read_prompts_drops_trailing_assistant_and_names_bad_lines(tmp_path: Path) -> None:
    good = tmp_path / "p.jsonl"
    good.write_text(json.dumps({"messages": [{"role": "user", "content": "q"},
                                             {"role": "assistant", "content": "a"}]}) + "\n")
    assert read_prompts(str(good)) == [[{"role": "user", "content": "q"}]]
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"prompt": "x"}\nnot json\n')
    with pytest.raises(ValueError, match=":2:"):
        read_prompts(str(bad))


@pytest.mark.slow
def test_tiny_ppo_loop_with_eval(tiny_policy: Path, tmp_path: Path, online_rl) -> None:
    """The PPO-clip switch runs the same loop; greedy evaluation at the start and the end."""
    summary, rows = run_tiny_loop(online_rl, tiny_policy, tmp_path, "ppo", iterations=2, steps=2, with_eval=True)
    assert "clipped" in rows[0] and len(summary["eval"]) == 2


def test_a_reference_checkpoint_is_restored_as_the_frozen_copy_stores_it(tmp_path: Path) -> None:
    """``task_options.reference`` (another model as pi_ref) is read from its checkpoint and
    stored exactly as a copy of the start would be: matrices in the compute dtype, norm
    scales in float32, a scanned model's layers pre-stacked."""
    from flax import nnx

    from afm.model.checkpoints.checkpoint import save_params
    from afm.model.params import flatten_state
    from afm.model.parts import ModelParts
    from afm.model.transformer import Transformer
    from afm.training.core.config import get_train_config, model_config, with_task_options
    from afm.training.core.task import STACKED, frozen_storage
    from afm.training.tasks import get_task

    (tmp_path / "p.jsonl").write_text(json.dumps({"prompt": "hi"}) + "\n")
    cfg = get_train_config("tiny-mdloo", ["model_overrides.scan_layers=true"])
    ref = Transformer(model_config(cfg), rngs=nnx.Rngs(params=5))
    save_params(ref, tmp_path / "ref")
    cfg = with_task_options(cfg, tokenizer=str(CHAT), prompts=str(tmp_path / "p.jsonl"), reward="task:arith",
                            reference=str(tmp_path / "ref"))
    task = get_task("mdloo", cfg)
    mcfg = task.configure_model(model_config(cfg))
    parts = ModelParts.build(mcfg, 0)
    abstract = {k: jax.ShapeDtypeStruct(s, parts.dtypes[k]) for k, s in parts.shapes.items()}
    like = {k: jax.eval_shape(s.init, jax.random.key(0), abstract) for k, s in task.extra_params(mcfg).items()}
    got = task.restore_extra_params(like)
    want = frozen_storage(flatten_state(nnx.state(ref, nnx.Param))[0], mcfg, "ref/")
    assert set(got) == set(want) == set(like) and any(k.startswith("ref/" + STACKED) for k in got)
    for k, v in want.items():
        assert got[k].dtype == v.dtype == like[k].dtype and got[k].shape == v.shape
        np.testing.assert_array_equal(np.asarray(got[k], np.float32), np.asarray(v, np.float32))


def test_run_time_overrides_apply_and_a_changed_shape_is_refused(tiny_policy: Path, tmp_path: Path) -> None:
    """The policy's shapes come from its checkpoint; the run's run-time settings (dtype,
    scan_layers, remat) are applied, not silently replaced by the checkpoint's; a shape
    that differs is one line."""
    from afm.config import ConfigError
    from afm.training.core.config import model_config
    from afm.training.runs.train import prepare

    (tmp_path / "p.jsonl").write_text(json.dumps({"prompt": "hi"}) + "\n")
    options = {"tokenizer": str(CHAT), "prompts": str(tmp_path / "p.jsonl")}
    cfg = prepare("tiny-mdloo", tmp_path / "run", init_from=tiny_policy, task_options=options,
                  overrides=["model_overrides.dtype=float32", "model_overrides.scan_layers=true",
                             "model_overrides.remat=full"])
    m = model_config(cfg)
    assert (m.dtype, m.scan_layers, m.remat, m.vocab_size) == ("float32", True, "full", 640)
    plain = model_config(prepare("tiny-mdloo", tmp_path / "run2", init_from=tiny_policy, task_options=options))
    assert (plain.dtype, plain.scan_layers, plain.remat) == ("bfloat16", False, "none")  # the checkpoint's
    with pytest.raises(ConfigError, match=r"model_overrides.dim=128 differs from the start policy's 64"):
        prepare("tiny-mdloo", tmp_path / "run3", init_from=tiny_policy, task_options=options,
                overrides=["model_overrides.dim=128"])
    same = prepare("tiny-mdloo", tmp_path / "run4", init_from=tiny_policy, task_options=options,
                   overrides=["model_overrides.dim=64"])  # the policy's own shape: fine
    assert model_config(same).dim == 64


@pytest.mark.parametrize("algorithm,dtype,scan", [
    ("mdloo", "bfloat16", False), ("grpo", "bfloat16", False),
    pytest.param("mdloo", "bfloat16", True, marks=pytest.mark.slow),
    pytest.param("dapo", "float32", False, marks=pytest.mark.slow)])
def test_the_first_iteration_starts_exactly_at_the_reference(tiny_policy: Path, tmp_path: Path, online_rl,
                                                             algorithm: str, dtype: str, scan: bool) -> None:
    """32 responses per iteration, bf16 with the layers unscanned (the on-device setup):
    the frozen reference scores every response exactly as the policy does (kl_ref 0, not
    +-2e-4), and the loss's ratios start at exactly 1 (the scoring program and the train
    step round alike)."""
    from afm.training.runs.train import train

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"count to {i} and then say {i * 7}"})
                                 for i in range(8)) + "\n")

    def attach(task):
        task.reward_fn = TaskReward(lambda p, r: -len(r) / 10.0)

    train("tiny-mdloo", tmp_path / "run", init_from=str(tiny_policy), quiet=True, configure_task=attach,
          overrides=["data.seq_len=64", "eval.every_steps=0", f"model_overrides.dtype={dtype}",
                     f"model_overrides.scan_layers={str(scan).lower()}"],
          task_options={"tokenizer": str(CHAT), "prompts": str(prompts), "algorithm": algorithm, "iterations": 1,
                        "prompts_per_iteration": 8, "k": 4, "steps_per_iteration": 1, "max_new_tokens": 10})
    row = iteration_rows(read_metrics(tmp_path / "run"), 1)[0]
    assert row["kl_ref"] == 0.0 and row["ratio_first_step"] == 1.0


def test_best_of_n_names_a_malformed_prompts_line_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from afm.app.cli import main

    bad = tmp_path / "prompts.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": \n')
    result = CliRunner().invoke(main, ["rm", "best-of-n", "--policy", str(tmp_path / "nope"), "--model",
                                       str(tmp_path / "nope"), "--prompts", str(bad), "--output",
                                       str(tmp_path / "out.jsonl")])
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    assert f"{bad}:2: not JSON" in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1
