"""The online-RL objectives against hand computations written out with loops, term by term
as the papers define them: GRPO (DeepSeekMath eq. 3), Dr. GRPO, DAPO (eq. 8), the group
advantages and DAPO's dynamic-sampling filter; then each algorithm's task loss on a tiny
model equals the hand computation from the model's own per-token log-probs."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from afm.training.rl.objectives import (
    ALGORITHMS,
    STD_EPS,
    group_advantage,
    informative_groups,
    normalised_sum,
    token_clip_terms,
)


def _hand_group_advantage(r, k, valid, scale):
    out = [0.0] * len(r)
    for g in range(len(r) // k):
        idx = [g * k + j for j in range(k) if valid[g * k + j]]
        if len(idx) < 2:
            continue
        mean = sum(r[i] for i in idx) / len(idx)
        std = math.sqrt(sum((r[i] - mean) ** 2 for i in idx) / (len(idx) - 1))
        for i in idx:
            out[i] = (r[i] - mean) / (std + STD_EPS) if scale else r[i] - mean
    return out


def test_group_advantages_are_grpo_and_dr_grpo_by_hand() -> None:
    rng = np.random.default_rng(0)
    r = rng.normal(size=12).round(3).tolist()
    valid = [True] * 12
    valid[1] = valid[8] = valid[9] = valid[10] = False  # group 2 keeps one: no baseline
    for scale in (True, False):
        want = _hand_group_advantage(r, 4, valid, scale)
        np.testing.assert_allclose(group_advantage(np.asarray(r), 4, np.asarray(valid), scale=scale), want, atol=1e-6)
        np.testing.assert_allclose(group_advantage(np.asarray(r), 4, scale=scale),
                                   _hand_group_advantage(r, 4, [True] * 12, scale), atol=1e-6)
    assert not group_advantage(np.asarray(r), 4, np.asarray(valid))[8:].any()
    with pytest.raises(ValueError):
        group_advantage(np.asarray(r), 1)


def test_dynamic_sampling_keeps_groups_whose_rewards_differ() -> None:
    r = np.asarray([1, 1, 1, 0, 0, 0, 1, 1, 2, 2, np.nan, 2], np.float32)
    valid = np.isfinite(r)
    assert informative_groups(r, 3, valid).tolist() == [False, False, True, False]
    assert informative_groups(np.asarray([1.0, 0.0, 5.0, 5.0]), 2).tolist() == [True, False]


def _setup(seed=1, n=6, t=5):
    rng = np.random.default_rng(seed)
    mask = np.ones((n, t), np.float32)
    mask[0, 3:] = 0  # a short response
    mask[4, 1:] = 0
    mask[5] = 0  # an unscored response: no token
    logp = rng.normal(-2.0, 0.5, (n, t)).astype(np.float32)
    old = (logp + rng.normal(0, 0.3, (n, t))).astype(np.float32)  # ratios well past the clip range
    ref = (logp + rng.normal(0, 0.2, (n, t))).astype(np.float32)
    adv = rng.normal(size=n).astype(np.float32)
    return logp * mask, old * mask, ref * mask, adv, mask


def _hand_objective(algo, logp, old, ref, adv, mask, *, eps=0.2, eps_high=0.28, beta=0.0, budget=7):
    """The papers' sums, token by token."""
    lo, hi = 1 - eps, 1 + (eps_high if algo == "dapo" else eps)
    per_response, tokens_total, responses = [], 0, 0
    for i in range(len(adv)):
        terms = []
        for t in range(mask.shape[1]):
            if not mask[i, t]:
                continue
            rho = math.exp(logp[i, t] - old[i, t])
            surrogate = min(rho * adv[i], min(max(rho, lo), hi) * adv[i])
            x = ref[i, t] - logp[i, t]
            k3 = math.exp(x) - x - 1
            terms.append(surrogate - beta * k3)
        if not terms:
            continue
        responses += 1
        tokens_total += len(terms)
        per_response.append(terms)
    if algo == "grpo":  # 1/G sum_i 1/|o_i| sum_t
        return sum(sum(ts) / len(ts) for ts in per_response) / responses
    if algo == "dr_grpo":  # 1/G sum_i sum_t / L
        return sum(sum(ts) for ts in per_response) / budget / responses
    return sum(sum(ts) for ts in per_response) / tokens_total  # dapo: 1/sum|o_i| sum_i sum_t


@pytest.mark.parametrize("algo,beta", [("grpo", 0.04), ("grpo", 0.0), ("dr_grpo", 0.0), ("dr_grpo", 0.1),
                                       ("dapo", 0.0)])
def test_token_objectives_equal_the_papers_by_hand(algo: str, beta: float) -> None:
    logp, old, ref, adv, mask = _setup()
    spec = ALGORITHMS[algo]

    def objective(lp):
        terms = token_clip_terms(lp, jnp.asarray(old), jnp.asarray(ref), jnp.asarray(adv), clip_low=0.2,
                                 clip_high=0.28 if spec.decoupled_clip else 0.2, kl_coef=beta)
        total, weight = normalised_sum(terms["objective"], jnp.asarray(mask), spec.normalise, 7)
        return total / weight

    got = float(objective(jnp.asarray(logp)))
    assert got == pytest.approx(_hand_objective(algo, logp, old, ref, adv, mask, beta=beta), rel=1e-5)
    # the gradient in one token's log-prob: the clipped surrogate's (rho A where the ratio is
    # not clipped against the advantage, else 0) minus beta times k3's (1 - pi_ref / pi),
    # over the algorithm's normaliser
    grad = np.asarray(jax.grad(objective)(jnp.asarray(logp)))
    lens, responses, tokens = mask.sum(1), (mask.sum(1) > 0).sum(), mask.sum()
    hi = 1.28 if algo == "dapo" else 1.2
    for i, t in [(0, 0), (0, 2), (1, 4), (3, 1)]:
        rho = math.exp(logp[i, t] - old[i, t])
        clipped = (adv[i] > 0 and rho > hi) or (adv[i] < 0 and rho < 0.8)
        d = (0.0 if clipped else rho * adv[i]) - beta * (1 - math.exp(ref[i, t] - logp[i, t]))
        norm = {"grpo": lens[i] * responses, "dr_grpo": 7 * responses, "dapo": tokens}[algo]
        assert grad[i, t] == pytest.approx(d / norm, rel=1e-4, abs=1e-7)
    assert not grad[5].any() and not grad[0, 3:].any()  # no token, no gradient


def test_dapo_clips_higher_than_it_clips_lower() -> None:
    adv = jnp.asarray([1.0, -1.0])
    old = jnp.zeros((2, 1))
    for log_rho, expect in [(math.log(1.25), [1.25, -1.25]), (math.log(1.35), [1.28, -1.35]),
                            (math.log(0.7), [0.7, -0.8])]:
        t = token_clip_terms(jnp.full((2, 1), log_rho), old, old, adv, clip_low=0.2, clip_high=0.28, kl_coef=0.0)
        np.testing.assert_allclose(np.asarray(t["objective"])[:, 0], expect, rtol=1e-6)


@pytest.fixture(scope="module")
def tiny_task_parts(tmp_path_factory):
    """A tiny policy, prompts, and a packed batch of responses (random tokens)."""
    import json

    from afm.model.parts import ModelParts
    from afm.training.core.config import get_train_config, model_config, with_task_options
    from afm.training.rl.rollout import pack_responses
    from tests.paths import CHAT_TOKENIZER

    root = tmp_path_factory.mktemp("objectives")
    (root / "p.jsonl").write_text(json.dumps({"prompt": "hi"}) + "\n")
    cfg = get_train_config("tiny-mdloo", ["model_overrides.vocab_size=640", "data.seq_len=32",
                                          "data.global_batch_size=8"])
    cfg = with_task_options(cfg, tokenizer=str(CHAT_TOKENIZER), prompts=str(root / "p.jsonl"), reward="task:arith",
                            prompts_per_iteration=2, k=4, max_new_tokens=8, temperature=0.8)
    mcfg = model_config(cfg)
    parts = ModelParts.build(mcfg, 0)
    params = parts.init()
    rng = np.random.default_rng(4)
    prompts = [rng.integers(5, 600, 6).tolist()] * 4 + [rng.integers(5, 600, 9).tolist()] * 4
    responses = [rng.integers(5, 600, n).tolist() for n in (3, 8, 5, 1, 7, 2, 8, 4)]
    packed = pack_responses(prompts, responses, pad_id=0, width=32)
    packed["response_mask"][6] = 0.0  # unscored
    return cfg, mcfg, parts, params, packed


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_each_algorithms_task_loss_equals_the_hand_computation(tiny_task_parts, algorithm: str) -> None:
    """The task's loss (minus the objective over the weight the engine divides by) on a
    tiny model: per-token log-probs from the one scoring function, then the paper's sum
    by hand (the sequence-level MDLOO and PPO from whole-response log-probs)."""
    import dataclasses

    from afm.training.core.config import with_task_options
    from afm.training.core.task import LossContext
    from afm.training.rl.rollout import response_logprobs_of
    from afm.training.tasks import get_task

    cfg, mcfg, parts, params, packed = tiny_task_parts
    cfg = with_task_options(cfg, algorithm=algorithm, kl_coef=0.05, clip=0.1)
    task = get_task("mdloo", cfg)
    params = {**params, **{k: s.init(jax.random.key(0), params) for k, s in task.extra_params(mcfg).items()}}
    ctx = LossContext(parts.build_model, dataclasses.replace(mcfg, dropout=0.0), jax.random.key(0), train=True)
    batch = {k: jnp.asarray(v) for k, v in packed.items()}
    lp = np.asarray(jax.jit(lambda p: response_logprobs_of(parts.build_model(p), batch, 0.8, 1024))(
        {k: v for k, v in params.items() if not k.startswith("ref/")}))
    rng = np.random.default_rng(7)
    mask = packed["response_mask"]
    old = ((lp + rng.normal(0, 0.15, lp.shape)) * mask).astype(np.float32)
    ref = ((lp + rng.normal(0, 0.1, lp.shape)) * mask).astype(np.float32)
    adv = rng.normal(size=8).astype(np.float32)
    batch |= {"advantages": jnp.asarray(adv), "old_token_logprobs": jnp.asarray(old),
              "ref_token_logprobs": jnp.asarray(ref), "old_logprobs": jnp.asarray(old.sum(-1))}
    batch = {k: v for k, v in batch.items() if k in task.batch_fields()}
    out = jax.jit(lambda p: task.loss(p, batch, ctx))(params)
    got = -float(out.loss[0] / out.loss[1])
    if ALGORITHMS[algorithm].level == "token":
        want = _hand_objective(algorithm, lp, old, ref, adv, mask, eps=0.1, eps_high=0.28,
                               beta=0.05, budget=8)  # kl_coef set: every algorithm takes it
    else:
        rows = [i for i in range(8) if mask[i].any()]
        terms = []
        for i in rows:
            rho = math.exp(float(lp[i].sum() - old[i].sum()))
            if algorithm == "ppo":
                terms.append(min(rho * adv[i], min(max(rho, 0.9), 1.1) * adv[i]))
            else:
                terms.append(rho * adv[i] - 0.1 * rho * math.log(rho))
        want = sum(terms) / len(rows)
    assert got == pytest.approx(want, rel=2e-4, abs=1e-6)
