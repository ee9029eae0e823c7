"""The objectives of online RL, as equations: MDLOO (the report's), and the baselines people
compare it with -- PPO-clip, GRPO, Dr. GRPO and DAPO -- on the same rollouts and rewards.

Per prompt, ``K`` responses ``y_i`` are sampled from pi_k (the policy at the iteration's
start, "old"), with reward ``r_i``, ``|y_i|`` response tokens, per-token ratios
``rho_it = pi(y_it | .) / pi_k(y_it | .)`` and the whole response's ``rho_i = prod_t rho_it``.
Each objective is maximised (the loss is minus it):

* ``mdloo`` (AFM report §4.3.3, eq. 7-8): advantage ``A_i`` = the leave-one-out baseline
  of the KL-penalised reward ``R = r - beta * log(pi_k / pi_ref)``; objective
  ``rho_i A_i - gamma rho_i log rho_i`` (whole-response ratio), the mean over responses.
* ``ppo``: the same advantage; ``min(rho_i A_i, clip(rho_i, 1 - eps, 1 + eps) A_i)`` (TRL's
  RLOO loss).
* ``grpo`` (Shao et al. 2024, DeepSeekMath eq. 3): ``A_i = (r_i - mean r) / (std r + 1e-4)``
  over the group (sample std, Bessel's correction, as TRL's ``GRPOTrainer``); objective
  ``1/G sum_i 1/|y_i| sum_t [min(rho_it A_i, clip(rho_it, 1 - eps, 1 + eps) A_i) -
  kl_coef k3_it]`` with ``k3 = pi_ref/pi - log(pi_ref/pi) - 1`` per token.
* ``dr_grpo`` (Liu et al. 2025, "Understanding R1-Zero-like training"): ``A_i = r_i - mean r``
  (no std), and no per-length normalisation: ``1/(G L) sum_i sum_t [...]`` with the constant
  ``L`` = ``max_new_tokens`` (their code's generation budget).
* ``dapo`` (Yu et al. 2025, eq. 8): GRPO's advantage; the token-level loss
  ``1/(sum_i |y_i|) sum_i sum_t min(rho_it A_i, clip(rho_it, 1 - eps_low, 1 + eps_high) A_i)``
  (decoupled clip-higher: ``clip`` and ``clip_high``), no KL term, and dynamic sampling: a
  group whose rewards are all equal is dropped and more prompts are sampled to fill the
  batch (the overlong reward shaping of the paper is not part of this objective).

MDLOO and PPO put the reference KL in the reward (``beta``); the GRPO family puts it in
the loss as the per-token :math:`k_3` estimator with weight ``kl_coef`` (GRPO's default
0.04; Dr. GRPO and DAPO drop it, default 0). A response the reward could not score takes
no part (``valid``): no advantage, no loss term, and a group's statistics use its scored
responses only; a group with fewer than two has no baseline and advantage 0.

Every function here works on arrays (JAX in the loss, NumPy for advantages); the unit
tests check each against a hand computation written out with loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

STD_EPS = 1e-4  # added to a group's reward std (TRL's GRPOTrainer)


@dataclass(frozen=True)
class Algorithm:
    """What an online-RL algorithm changes on the shared rollouts, rewards and task."""

    name: str
    level: str  # "sequence": one ratio per response; "token": a ratio per token
    advantage: str  # "loo_kl" (LOO of the KL-penalised reward), "group_std", "group_mean"
    normalise: str  # "responses", "response_mean" (per-response token mean), "budget" (L), "tokens"
    decoupled_clip: bool = False  # DAPO's clip-higher: 1 - clip .. 1 + clip_high
    dynamic_sampling: bool = False  # DAPO: drop groups whose rewards are all equal, resample
    kl_coef: float = 0.0  # default weight of the per-token k3 KL to the reference in the loss
    paper: str = ""


ALGORITHMS: dict[str, Algorithm] = {
    "mdloo": Algorithm("mdloo", "sequence", "loo_kl", "responses", paper="AFM report §4.3.3, App. E.2"),
    "ppo": Algorithm("ppo", "sequence", "loo_kl", "responses", paper="PPO-clip with RLOO advantages (TRL)"),
    "grpo": Algorithm("grpo", "token", "group_std", "response_mean", kl_coef=0.04,
                      paper="Shao et al. 2024 (DeepSeekMath), eq. 3"),
    "dr_grpo": Algorithm("dr_grpo", "token", "group_mean", "budget", paper="Liu et al. 2025 (Dr. GRPO)"),
    "dapo": Algorithm("dapo", "token", "group_std", "tokens", decoupled_clip=True, dynamic_sampling=True,
                      paper="Yu et al. 2025 (DAPO), eq. 8"),
}


# -- advantages (NumPy, once per iteration) ----------------------------------------------------


def kl_penalised_reward(scores: Any, policy_logprobs: Any, ref_logprobs: Any, mask: Any, beta: float) -> Any:
    """``R = r - beta * sum_t mask * (log pi_k - log pi_ref)`` per response ([N]); the
    per-token arrays are [N, T]. Works on NumPy and JAX arrays."""
    xp = jnp if isinstance(scores, jax.Array) else np
    kl = xp.sum((policy_logprobs - ref_logprobs) * mask, axis=-1)
    return scores - beta * kl


def loo_advantage(rewards: Any, k: int, valid: Any = None) -> Any:
    """Eq. 7: each response's reward minus the mean of the other ``k - 1`` responses to the
    same prompt. ``rewards`` is [n * k], grouped (row ``i * k + j``). ``valid`` (NumPy,
    [n * k] bool) leaves out responses the reward could not score: their advantage is 0 and
    the baseline is the mean of the *other valid* responses; a group with fewer than two
    valid responses has no baseline, and all its advantages are 0."""
    if k < 2:
        raise ValueError("the leave-one-out advantage needs k >= 2 responses per prompt")
    if valid is None:
        grouped = rewards.reshape(-1, k)
        baseline = (grouped.sum(axis=1, keepdims=True) - grouped) / (k - 1)
        return (grouped - baseline).reshape(-1)
    ok = np.asarray(valid, bool).reshape(-1, k)
    grouped = np.where(ok, np.asarray(rewards, np.float64).reshape(-1, k), 0.0)
    count = ok.sum(axis=1, keepdims=True)
    baseline = (grouped.sum(axis=1, keepdims=True) - grouped) / np.maximum(count - 1, 1)
    adv = np.where(ok & (count >= 2), grouped - baseline, 0.0)
    return adv.reshape(-1).astype(np.float32)


def group_advantage(rewards: Any, k: int, valid: Any = None, *, scale: bool = True) -> np.ndarray:
    """GRPO's group-normalised advantage ``(r - mean) / (std + 1e-4)`` over each prompt's
    ``k`` responses (``scale`` False: Dr. GRPO's ``r - mean``). The std is the sample std
    (Bessel's correction, as TRL's ``GRPOTrainer``); ``valid`` as in :func:`loo_advantage`."""
    if k < 2:
        raise ValueError("a group advantage needs k >= 2 responses per prompt")
    ok = np.ones(np.shape(rewards), bool) if valid is None else np.asarray(valid, bool)
    ok = ok.reshape(-1, k)
    grouped = np.where(ok, np.asarray(rewards, np.float64).reshape(-1, k), 0.0)
    count = ok.sum(axis=1, keepdims=True)
    mean = grouped.sum(axis=1, keepdims=True) / np.maximum(count, 1)
    dev = np.where(ok, grouped - mean, 0.0)
    if scale:
        std = np.sqrt((dev ** 2).sum(axis=1, keepdims=True) / np.maximum(count - 1, 1))
        dev = dev / (std + STD_EPS)
    return np.where(ok & (count >= 2), dev, 0.0).reshape(-1).astype(np.float32)


def informative_groups(rewards: Any, k: int, valid: Any = None) -> np.ndarray:
    """DAPO's dynamic-sampling filter: per group, whether its scored rewards differ (at
    least two scored and not all equal). A group of all-correct or all-wrong replies has
    zero advantage everywhere, so it adds nothing to the gradient but still counts in the
    token normalisation; DAPO drops it and samples more prompts."""
    ok = np.ones(np.shape(rewards), bool) if valid is None else np.asarray(valid, bool)
    ok = ok.reshape(-1, k)
    r = np.asarray(rewards, np.float64).reshape(-1, k)
    hi = np.where(ok, r, -np.inf).max(axis=1)
    lo = np.where(ok, r, np.inf).min(axis=1)
    return (ok.sum(axis=1) >= 2) & (hi > lo)


# -- the objectives (JAX, in the loss) ------------------------------------------------------


def mdloo_terms(logp: Any, old_logp: Any, advantages: Any, gamma: float) -> dict[str, Any]:
    """Per response: the objective ``rho * A - gamma * rho * log rho`` (to maximise), and its
    two parts. ``logp`` / ``old_logp`` are sequence log-probs [N] under pi_theta / pi_theta_k."""
    log_ratio = logp - old_logp
    ratio = jnp.exp(log_ratio)
    pg = ratio * advantages
    kl = ratio * log_ratio
    return {"objective": pg - gamma * kl, "pg": pg, "kl_prev": kl, "ratio": ratio}


def ppo_clip_terms(logp: Any, old_logp: Any, advantages: Any, clip: float) -> dict[str, Any]:
    """Per response: PPO's clipped surrogate ``min(rho A, clip(rho) A)`` (to maximise), the
    same sample KL estimate as MDLOO's (logged, not optimised) and whether it clipped."""
    log_ratio = logp - old_logp
    ratio = jnp.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip, 1.0 + clip) * advantages
    return {"objective": jnp.minimum(unclipped, clipped), "pg": unclipped,
            "kl_prev": ratio * log_ratio, "ratio": ratio,
            "clipped": (clipped < unclipped).astype(jnp.float32)}


def token_clip_terms(logp: Any, old_logp: Any, ref_logp: Any, advantages: Any, *, clip_low: float,
                     clip_high: float, kl_coef: float) -> dict[str, Any]:
    """Per token ([N, T]): the clipped surrogate ``min(rho A, clip(rho, 1 - clip_low,
    1 + clip_high) A)`` minus ``kl_coef`` times the k3 estimate of KL(pi_theta || pi_ref),
    with its parts. ``logp`` / ``old_logp`` / ``ref_logp`` are per-token log-probs [N, T]
    under pi_theta, pi_theta_k and pi_ref; ``advantages`` is per response [N]. Tokens off
    the response must be masked by the caller (:func:`normalised_sum`)."""
    log_ratio = logp - old_logp
    ratio = jnp.exp(log_ratio)
    a = advantages[:, None]
    unclipped = ratio * a
    clipped = jnp.clip(ratio, 1.0 - clip_low, 1.0 + clip_high) * a
    surrogate = jnp.minimum(unclipped, clipped)
    ref_log_ratio = ref_logp - logp
    k3 = jnp.exp(ref_log_ratio) - ref_log_ratio - 1.0
    return {"objective": surrogate - kl_coef * k3, "pg": unclipped, "kl_ref_k3": k3, "ratio": ratio,
            "kl_prev": ratio * log_ratio, "clipped": (clipped < unclipped).astype(jnp.float32)}


def normalised_sum(per_token: Any, mask: Any, how: str, budget: int = 1) -> tuple[Any, Any]:
    """A per-token objective [N, T] reduced as ``(sum, weight)`` (the engine adds both over
    micro-batches and hosts and divides once, so accumulation equals one large batch):

    * ``response_mean`` (GRPO): each response's token mean, summed; weight = responses;
    * ``budget`` (Dr. GRPO): each response's token sum over the constant ``budget``,
      summed; weight = responses;
    * ``tokens`` (DAPO): every token's term, summed; weight = tokens.

    A response with no token in ``mask`` (unscored, or a dropped group) counts in neither."""
    mask = mask.astype(per_token.dtype)
    tokens = mask.sum(axis=-1)
    valid = (tokens > 0).astype(per_token.dtype)
    per_response = (per_token * mask).sum(axis=-1)
    if how == "response_mean":
        return (per_response / jnp.maximum(tokens, 1.0)).sum(), valid.sum()
    if how == "budget":
        return (per_response / float(budget)).sum(), valid.sum()
    if how == "tokens":
        return per_response.sum(), tokens.sum()
    raise ValueError(f"unknown normalisation {how!r}")


__all__ = ["ALGORITHMS", "STD_EPS", "Algorithm", "group_advantage", "informative_groups", "kl_penalised_reward",
           "loo_advantage", "mdloo_terms", "normalised_sum", "ppo_clip_terms", "token_clip_terms"]
