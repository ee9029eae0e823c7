"""MDLOO: online RL with a leave-one-out advantage and a mirror-descent KL trust region
(report §4.3.3 and App. E.2; SPEC 4), with PPO-clip as a switch for comparison.

Iteration ``k`` (:func:`run_mdloo`):

1. sample ``K`` responses for each of ``n`` prompts from :math:`\\pi_{\\theta_k}` with the
   batched KV-cache sampler (``afm.training.rl.rollout``);
2. score them: :math:`R = r - \\beta \\log(\\pi_{\\theta_k}/\\pi_{ref})`, the log-ratio summed
   over the response's tokens (:func:`kl_penalised_reward`), where ``r`` is any
   :class:`~afm.training.rl.rewards.RewardFn` (a reward model or a task's program);
3. the LOO advantage :math:`\\hat A_i = R_i - \\frac{1}{K-1}\\sum_{j\\ne i} R_j` (eq. 7,
   :func:`loo_advantage`);
4. a few optimiser steps on the collected batch, maximising eq. 8 with its expectations
   replaced by the ``nK`` samples (:func:`mdloo_terms`): per response
   :math:`\\rho_i \\hat A_i - \\gamma\\, \\rho_i \\log \\rho_i` with
   :math:`\\rho_i = \\pi_\\theta(y_i|x)/\\pi_{\\theta_k}(y_i|x)`. The first term's gradient is
   eq. 9's first term; :math:`\\mathbb E_{y\\sim\\pi_{\\theta_k}}[\\rho\\log\\rho] =
   D_{KL}(\\pi_\\theta\\|\\pi_{\\theta_k})`, so the second is an unbiased sample estimate of the
   trust-region KL whose gradient is eq. 9's second term. The response is one action (the
   report's bandit setting), so ratios are of whole-sequence probabilities.

With ``algorithm: ppo`` step 4 uses the clipped surrogate
:math:`\\min(\\rho A, \\mathrm{clip}(\\rho, 1-\\epsilon, 1+\\epsilon) A)` instead (TRL's RLOO
loss), with the same rollouts, rewards and advantages.

The optimisation is a task of the one trainer (:class:`MdlooTask`: batch spec, loss as
sums and weights, metrics); the loop builds the trainer's :class:`~afm.training.core.engine.Engine`
once, with ``n * K`` as the global batch, and calls its train step ``steps_per_iteration``
times per iteration, so sharding, the optimiser and skip-steps are the trainer's.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from afm.training.core.task import Field, LossContext, LossOutput, TaskBase

from afm.config import load_config

ALGORITHMS = ("mdloo", "ppo")


# -- the equations ---------------------------------------------------------------------------


def kl_penalised_reward(scores: Any, policy_logprobs: Any, ref_logprobs: Any, mask: Any, beta: float) -> Any:
    """``R = r - beta * sum_t mask * (log pi_k - log pi_ref)`` per response ([N]); the
    per-token arrays are [N, T]. Works on NumPy and JAX arrays."""
    xp = jnp if isinstance(scores, jax.Array) else np
    kl = xp.sum((policy_logprobs - ref_logprobs) * mask, axis=-1)
    return scores - beta * kl


def loo_advantage(rewards: Any, k: int) -> Any:
    """Eq. 7: each response's reward minus the mean of the other ``k - 1`` responses to the
    same prompt. ``rewards`` is [n * k], grouped (row ``i * k + j``)."""
    if k < 2:
        raise ValueError("the leave-one-out advantage needs k >= 2 responses per prompt")
    grouped = rewards.reshape(-1, k)
    baseline = (grouped.sum(axis=1, keepdims=True) - grouped) / (k - 1)
    return (grouped - baseline).reshape(-1)


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


# -- the task --------------------------------------------------------------------------------


@dataclass
class MdlooOptions:
    """``task_options`` of the MDLOO task."""

    algorithm: str = "mdloo"  # or "ppo"
    gamma: float = 0.1  # weight of KL(pi_theta || pi_theta_k) (eq. 8)
    clip: float = 0.2  # PPO's epsilon
    temperature: float = 1.0  # the policy is softmax(logits / T), the distribution sampled


class MdlooTask(TaskBase):
    """The policy update of one iteration on a collected batch (see the module docstring).

    Batch: prompt + response rows (``inputs``/``targets``/``response_mask``/``segment_ids``/
    ``positions``) and per response ``old_logprobs`` (sequence log-prob under
    pi_theta_k) and ``advantages``. Loss: minus the summed objective, weight = responses."""

    name = "mdloo"

    def __init__(self, config: Any):
        super().__init__(config)
        self.options = load_config(MdlooOptions, dict(config.task_options or {}))
        if self.options.algorithm not in ALGORITHMS:
            raise ValueError(f"task_options.algorithm must be one of {ALGORITHMS}, got {self.options.algorithm!r}")

    def configure_model(self, model_config: Any) -> Any:
        # No dropout: the ratio pi_theta / pi_theta_k must be 1 before the first step.
        return dataclasses.replace(model_config, dropout=0.0)

    def batch_fields(self) -> dict[str, Field]:
        return {
            "inputs": Field("int32"), "targets": Field("int32"), "response_mask": Field("float32"),
            "segment_ids": Field("int32"), "positions": Field("int32"),
            "old_logprobs": Field("float32", ("batch",)), "advantages": Field("float32", ("batch",)),
        }

    def make_input(self, *, vocab_size: int, process_index: int, process_count: int, state: Any = None):
        raise NotImplementedError("MDLOO batches come from rollouts: run it with `afm rl mdloo` (run_mdloo)")

    def loss(self, params: dict[str, Any], batch: dict[str, Any], ctx: LossContext) -> LossOutput:
        from afm.training.rl.rollout import token_logprobs_of

        logp = token_logprobs_of(ctx.model(params), batch, self.options.temperature).sum(axis=-1)
        opts = self.options
        if opts.algorithm == "ppo":
            terms = ppo_clip_terms(logp, batch["old_logprobs"], batch["advantages"], opts.clip)
        else:
            terms = mdloo_terms(logp, batch["old_logprobs"], batch["advantages"], opts.gamma)
        valid = (batch["response_mask"].sum(axis=-1) > 0).astype(jnp.float32)
        n = valid.sum()
        metrics = {k: ((v * valid).sum(), n) for k, v in terms.items() if k != "objective"}
        return LossOutput(loss=(-(terms["objective"] * valid).sum(), n), metrics=metrics)


# -- the loop --------------------------------------------------------------------------------


@dataclass
class MdlooConfig:
    """One online-RL run (``afm rl mdloo --config FILE`` or flags)."""

    policy: str = ""  # the start (SFT) model checkpoint (afm.model format, e.g. RUN/best)
    reference: str = ""  # pi_ref for the beta penalty (default: the policy's start)
    tokenizer: str = ""
    prompts: str = ""  # JSONL rows with "messages" (the prompt conversation) or "prompt"
    eval_prompts: str = ""  # held-out prompts scored with eval_reward (greedy and sampled)
    reward: str = "task:arith"  # task:NAME or a reward-model checkpoint
    eval_reward: str = "task:arith"  # the true reward, for reporting
    algorithm: str = "mdloo"  # or "ppo"
    iterations: int = 20
    prompts_per_iteration: int = 8  # n
    k: int = 4  # responses per prompt
    steps_per_iteration: int = 4  # optimiser steps on each collected batch
    beta: float = 0.05  # KL(pi || pi_ref) penalty in the reward
    gamma: float = 0.1  # KL(pi_theta || pi_theta_k) trust region (MDLOO)
    clip: float = 0.2  # PPO's epsilon
    learning_rate: float = 1e-4
    max_new_tokens: int = 48
    temperature: float = 1.0  # sampling temperature; the policy optimised is softmax(logits / T)
    seq_len: int = 192  # prompt + response rows (a fixed shape: one compile)
    eval_every: int = 5
    eval_limit: int = 64
    eval_samples: int = 4  # per held-out prompt, at `temperature` (0: greedy only)
    seed: int = 0
    mesh: dict[str, Any] = field(default_factory=lambda: {"data": 1, "fsdp": -1})


def read_prompts(path: str, limit: int | None = None) -> list[list[dict[str, Any]]]:
    """Prompt conversations from JSONL: ``messages`` (assistant turns at the end are dropped,
    so an SFT file works) or a plain ``prompt`` string. Bad lines raise with their number."""
    out: list[list[dict[str, Any]]] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
            if isinstance(row, dict) and isinstance(row.get("messages"), list):
                msgs = list(row["messages"])
                while msgs and msgs[-1].get("role") == "assistant":
                    msgs.pop()
            elif isinstance(row, dict) and isinstance(row.get("prompt"), str):
                msgs = [{"role": "user", "content": row["prompt"]}]
            else:
                raise ValueError(f"{path}:{n}: expected an object with 'messages' or 'prompt'")
            if not msgs:
                raise ValueError(f"{path}:{n}: the prompt conversation is empty")
            out.append(msgs)
            if limit and len(out) >= limit:
                break
    if not out:
        raise ValueError(f"{path}: no prompts")
    return out


def evaluate_policy(model: Any, tokenizer: Any, prompts: list[Any], reward: Any, *,
                    max_new_tokens: int, samples: int = 0, temperature: float = 1.0,
                    seed: int = 0) -> dict[str, float]:
    """The true reward of the policy on held-out ``prompts``: of its greedy response
    (``reward``, ``length``) and, when ``samples`` > 0, the mean over ``samples`` responses
    sampled at ``temperature`` per prompt (``sampled_reward``) -- the expected reward RL
    maximises, which greedy decoding of a small model can hide."""
    from afm.training.rl.rollout import sample_groups

    roll = sample_groups(model, tokenizer, prompts, k=1, max_new_tokens=max_new_tokens, temperature=0.0)
    scores = reward(roll.group_prompts(), roll.texts)
    out = {"reward": float(np.mean(scores)), "length": float(np.mean([len(r) for r in roll.response_ids]))}
    if samples > 0:
        sampled = sample_groups(model, tokenizer, prompts, k=samples, max_new_tokens=max_new_tokens,
                                temperature=temperature, seed=seed)
        out["sampled_reward"] = float(np.mean(reward(sampled.group_prompts(), sampled.texts)))
    return out


def _train_config(cfg: MdlooConfig, model_cfg: Any) -> Any:
    from afm.training.core.config import TrainConfig

    overrides = {f.name: getattr(model_cfg, f.name) for f in dataclasses.fields(model_cfg)}
    steps = cfg.iterations * cfg.steps_per_iteration
    return load_config(TrainConfig, {
        "name": f"rl-{cfg.algorithm}", "task": "mdloo",
        "task_options": {"algorithm": cfg.algorithm, "gamma": cfg.gamma, "clip": cfg.clip,
                         "temperature": cfg.temperature},
        "model": "tiny", "model_overrides": overrides,
        "data": {"seq_len": cfg.seq_len, "global_batch_size": cfg.prompts_per_iteration * cfg.k},
        "optimizer": {"name": "adamw", "learning_rate": cfg.learning_rate, "weight_decay": 0.0,
                      "b1": 0.9, "b2": 0.95, "eps": 1e-8, "muparam": False},
        "schedule": {"kind": "constant", "warmup_steps": 0}, "mesh": cfg.mesh,
        "total_steps": max(steps, 1), "seed": cfg.seed,
    })


def run_mdloo(cfg: MdlooConfig, workdir: str | Path, *, progress: bool = True,
              reward_fn: Any = None, eval_reward_fn: Any = None) -> dict[str, Any]:
    """Run ``cfg.iterations`` iterations; write ``metrics.jsonl``, ``summary.json`` and the
    final policy (``model/``, afm.model format) under ``workdir``. ``reward_fn`` /
    ``eval_reward_fn`` (a :class:`~afm.training.rl.rewards.RewardFn`) replace ``cfg.reward`` /
    ``cfg.eval_reward`` when given (a reward model already in memory, tests)."""
    from afm.model.checkpoint import load_config as load_model_config
    from afm.model.checkpoint import load_model, save_params
    from afm.model.sharding import make_mesh
    from afm.model.tokenizer import Tokenizer
    from afm.training.core.checkpoint import restore_params_only
    from afm.training.core.engine import Engine
    from afm.training.rl.rewards import load_reward
    from afm.training.rl.rollout import pack_responses, response_logprobs, sample_groups

    if cfg.algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}")
    if not cfg.temperature > 0:
        raise ValueError("temperature must be > 0: online RL samples its policy (0 would be greedy)")
    for name in ("policy", "tokenizer", "prompts"):
        if not getattr(cfg, name):
            raise ValueError(f"MDLOO needs {name}")
    out = Path(workdir)
    out.mkdir(parents=True, exist_ok=True)
    model_cfg = load_model_config(cfg.policy)
    train_cfg = _train_config(cfg, model_cfg)
    mesh = make_mesh(train_cfg.mesh)
    engine = Engine.build(train_cfg, mesh)
    abstract = engine.abstract_state
    like = {k: abstract.params.get(k, abstract.frozen.get(k)) for k in engine.layout.keys}
    params, _ = restore_params_only(cfg.policy, like, engine.layout)
    state = engine.init_state(params)
    ref_model, _ = load_model(cfg.reference or cfg.policy)
    tok = Tokenizer.load(cfg.tokenizer)
    reward = reward_fn or load_reward(cfg.reward)
    true_reward = eval_reward_fn or (load_reward(cfg.eval_reward) if cfg.eval_reward else None)
    prompts = read_prompts(cfg.prompts)
    # Rows are a fixed shape (one compile): a prompt whose longest response cannot fit is
    # dropped up front, counted, rather than failing mid-run.
    fits = [p for p in prompts
            if len(tok.encode_chat(p, add_generation_prompt=True)[0]) + cfg.max_new_tokens <= cfg.seq_len + 1]
    if len(fits) < len(prompts) and progress:
        print(f"{len(prompts) - len(fits)} of {len(prompts)} prompts dropped: prompt + max_new_tokens "
              f"({cfg.max_new_tokens}) exceeds seq_len + 1 ({cfg.seq_len + 1})", flush=True)
    if not fits:
        raise ValueError(f"no prompt fits seq_len {cfg.seq_len} with max_new_tokens {cfg.max_new_tokens}")
    prompts = fits
    eval_prompts = read_prompts(cfg.eval_prompts, cfg.eval_limit) if cfg.eval_prompts else []
    rng = np.random.default_rng(cfg.seed)
    order: list[int] = []
    history: list[dict[str, Any]] = []
    evals: list[dict[str, Any]] = []
    n, k = cfg.prompts_per_iteration, cfg.k

    def run_eval(iteration: int) -> None:
        if eval_prompts and true_reward is not None:
            # The same sampling seed at every evaluation: differences are the policy's.
            result = evaluate_policy(engine.model(state), tok, eval_prompts, true_reward,
                                     max_new_tokens=cfg.max_new_tokens, samples=cfg.eval_samples,
                                     temperature=cfg.temperature, seed=cfg.seed + 1)
            evals.append({"iteration": iteration, **result})
            if progress:
                sampled = (f", sampled ({cfg.eval_samples}/prompt, T={cfg.temperature:g}) "
                           f"{result['sampled_reward']:.3f}" if "sampled_reward" in result else "")
                print(f"  eval @ {iteration}: greedy true reward {result['reward']:.3f}{sampled}, "
                      f"length {result['length']:.1f}", flush=True)

    run_eval(0)
    step = 0
    start = time.perf_counter()
    with (out / "metrics.jsonl").open("w") as log:
        for it in range(cfg.iterations):
            if len(order) < n:
                order += rng.permutation(len(prompts)).tolist()
            batch_prompts = [prompts[i] for i in order[:n]]
            order = order[n:]
            policy = engine.model(state)
            roll = sample_groups(policy, tok, batch_prompts, k=k, max_new_tokens=cfg.max_new_tokens,
                                 temperature=cfg.temperature, seed=cfg.seed * 100_003 + it)
            packed = pack_responses([p for p in roll.prompt_ids for _ in range(k)], roll.response_ids,
                                    pad_id=tok.pad_id, width=cfg.seq_len)
            old_tok = response_logprobs(policy, packed, cfg.temperature)
            ref_tok = response_logprobs(ref_model, packed, cfg.temperature)
            scores = np.asarray(reward(roll.group_prompts(), roll.texts), np.float32)
            rewards = kl_penalised_reward(scores, old_tok, ref_tok, packed["response_mask"], cfg.beta)
            adv = loo_advantage(rewards, k).astype(np.float32)
            batch = {**packed, "old_logprobs": old_tok.sum(-1).astype(np.float32), "advantages": adv}
            global_batch = engine.global_batch(batch)
            first: dict[str, float] = {}
            metrics: dict[str, Any] = {}
            for _ in range(cfg.steps_per_iteration):
                state, metrics = engine.train_step(state, global_batch, step)
                step += 1
                if not first:
                    first = {k_: float(v) for k_, v in metrics.items()}
            last = {k_: float(v) for k_, v in metrics.items()}
            lengths = np.array([len(r) for r in roll.response_ids])
            row = {
                "iteration": it, "reward": float(scores.mean()), "reward_kl_penalised": float(rewards.mean()),
                "kl_ref": float(((old_tok - ref_tok) * packed["response_mask"]).sum(-1).mean()),
                "kl_prev": last.get("kl_prev", float("nan")), "ratio": last.get("ratio", float("nan")),
                # 1 when the sampler's policy and the loss's agree (same params, same temperature)
                "ratio_first_step": first.get("ratio", float("nan")),
                "objective": -last["loss"], "grad_norm": first.get("grad_norm", float("nan")),
                "length": float(lengths.mean()), "stopped": float(roll.stopped.mean()),
                "adv_mean": float(adv.mean()), "adv_std": float(adv.std()),
                "adv_min": float(adv.min()), "adv_max": float(adv.max()),
                "tokens_per_second": roll.tokens_per_second,
            }
            if "clipped" in last:
                row["clipped"] = last["clipped"]
            history.append(row)
            log.write(json.dumps(row) + "\n")
            log.flush()
            if progress:
                print(f"iter {it:3d}  reward {row['reward']:.3f}  kl_ref {row['kl_ref']:.3f}  "
                      f"kl_prev {row['kl_prev']:.4f}  len {row['length']:.1f}  "
                      f"adv {row['adv_mean']:+.3f}±{row['adv_std']:.3f}  "
                      f"{row['tokens_per_second']:.0f} tok/s", flush=True)
            if cfg.eval_every and (it + 1) % cfg.eval_every == 0 and it + 1 < cfg.iterations:
                run_eval(it + 1)
    run_eval(cfg.iterations)
    params = engine.all_params(state)
    model_params = {k_: params[k_] for k_ in engine.layout.keys}
    save_params(engine.layout.unflatten(model_params), out / "model",
                dataclasses.replace(engine.model_config, max_segments=0), overwrite=True)
    summary = {"algorithm": cfg.algorithm, "iterations": cfg.iterations, "seconds": time.perf_counter() - start,
               "first": history[0] if history else {}, "last": history[-1] if history else {},
               "eval": evals, "model": str(out / "model"), "config": dataclasses.asdict(cfg)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


__all__ = ["ALGORITHMS", "MdlooConfig", "MdlooOptions", "MdlooTask", "evaluate_policy", "kl_penalised_reward",
           "loo_advantage", "mdloo_terms", "ppo_clip_terms", "read_prompts", "run_mdloo"]
