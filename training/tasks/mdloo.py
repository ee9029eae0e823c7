"""MDLOO: online RL with a leave-one-out advantage and a mirror-descent KL trust region
(report §4.3.3 and App. E.2; SPEC 4), with PPO-clip as a switch for comparison, as a task
of the one trainer.

Iteration ``k`` is ``steps_per_iteration`` trainer steps. Before the first of them the
loop calls the task's ``before_step`` hook with the current policy, which

1. samples ``K`` responses for each of ``n`` prompts from :math:`\\pi_{\\theta_k}` with the
   batched KV-cache sampler (``afm.training.rl.rollout``), the prompts and the sampling
   key a function of (seed, k) only;
2. scores them: :math:`R = r - \\beta \\log(\\pi_{\\theta_k}/\\pi_{ref})`, the log-ratio summed
   over the response's tokens (:func:`kl_penalised_reward`), where ``r`` is any
   :class:`~afm.training.rl.rewards.RewardFn` (a reward model or a task's program) and
   :math:`\\pi_{ref}` a frozen copy of the start policy (``ref/...`` parameters, or
   ``task_options.reference``);
3. takes the LOO advantage :math:`\\hat A_i = R_i - \\frac{1}{K-1}\\sum_{j\\ne i} R_j` (eq. 7,
   :func:`loo_advantage`) and hands the batch to the run's input (:class:`RolloutInput`);

then each step maximises eq. 8 with its expectations replaced by the ``nK`` samples
(:func:`mdloo_terms`): per response :math:`\\rho_i \\hat A_i - \\gamma\\, \\rho_i \\log \\rho_i`
with :math:`\\rho_i = \\pi_\\theta(y_i|x)/\\pi_{\\theta_k}(y_i|x)`. The first term's gradient is
eq. 9's first term; :math:`\\mathbb E_{y\\sim\\pi_{\\theta_k}}[\\rho\\log\\rho] =
D_{KL}(\\pi_\\theta\\|\\pi_{\\theta_k})`, so the second is an unbiased sample estimate of the
trust-region KL whose gradient is eq. 9's second term. The response is one action (the
report's bandit setting), so ratios are of whole-sequence probabilities. With
``algorithm: ppo`` the step uses the clipped surrogate
:math:`\\min(\\rho A, \\mathrm{clip}(\\rho, 1-\\epsilon, 1+\\epsilon) A)` instead (TRL's RLOO
loss), with the same rollouts, rewards and advantages.

Because the rollout is a hook of the loop, online RL has what every task has:
checkpoints (the iteration's batch is part of the input's state, so a run stopped
mid-iteration resumes on the very same batch), auto-resume, preemption, the metrics
writer (one row per step; the iteration's rollout statistics on its first step), the
divergence checks and evaluation hooks (:func:`policy_reward_hook`: the held-out true
reward of greedy and sampled replies). N iterations, or N/2 and a resumed run to N, end
with the same ``params_sha256``.

A stage like every other task's (``mdloo``, ``tiny-mdloo`` in ``configs/rl.yaml``, options in
``task_options``): ``afm rl mdloo`` and ``afm train`` run it the same way, the task preparing
the run (:meth:`MdlooTask.prepare_config`: the policy's model, ``n x K`` rows a step, the
held-out hook) and writing ``summary.json`` at the end (:meth:`MdlooTask.finish_run`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from afm.config import ConfigError
from afm.console import console
from afm.model.checkpoint import load_config as load_model_config
from afm.model.parts import ModelParts
from afm.model.sampling import sample_program
from afm.training.core.checkpoint import restore_params_only
from afm.training.core.config import model_config
from afm.training.core.hooks import HookContext, ModelView
from afm.training.core.metrics import read_metrics
from afm.training.core.task import (
    Field,
    LossContext,
    LossOutput,
    ParamSpec,
    SideProgram,
    TaskBase,
    compiler_options,
    frozen_model,
    frozen_model_copy,
    frozen_storage,
    parse_task_options,
    task_tokenizer,
)
from afm.training.data.loader import LoaderState
from afm.training.data.prompts import read_prompts
from afm.training.rl.rewards import check_unscored, load_reward, score_responses
from afm.training.rl.rollout import pack_responses, response_logprobs_of, sample_groups

ALGORITHMS = ("mdloo", "ppo")
REF = "ref/"
POLICY_HOOK = "afm.training.tasks.mdloo:policy_reward_hook"  # the held-out policy reward (eval hook)


# -- the equations ---------------------------------------------------------------------------


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
    beta: float = 0.05  # KL(pi || pi_ref) penalty in the reward
    tokenizer: str = ""
    prompts: str = ""  # JSONL rows with "messages" (the prompt conversation) or "prompt"
    reward: str = ""  # task:NAME or a reward-model directory: required (no default reward scores every prompt)
    max_unscored: float = 0.5  # stop when the reward cannot score more than this share of an iteration's responses
    reference: str = ""  # pi_ref checkpoint (default: a frozen copy of the start policy)
    prompts_per_iteration: int = 8  # n
    k: int = 4  # responses per prompt
    steps_per_iteration: int = 4  # optimiser steps on each collected batch
    max_new_tokens: int = 48
    rollout_batch: int = 0  # responses sampled per sampler call (0: all n x k at once); bounds the KV cache
    # held-out evaluation (policy_reward_hook)
    eval_prompts: str = ""
    eval_reward: str = ""  # the true reward, for reporting (required with eval_prompts)
    eval_limit: int = 64
    eval_samples: int = 4  # per held-out prompt, at `temperature` (0: greedy only)
    iterations: int = 0  # the run's length in iterations (sets total_steps); 0: the stage's total_steps

    def check(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"task_options.algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        if not self.temperature > 0:
            raise ConfigError("task_options.temperature must be > 0: online RL samples its policy (0 would be greedy)")
        if self.k < 2:
            raise ConfigError("task_options.k must be >= 2: the leave-one-out advantage needs two responses per prompt")
        if self.steps_per_iteration < 1 or self.prompts_per_iteration < 1:
            raise ConfigError("task_options.steps_per_iteration and prompts_per_iteration must be >= 1")
        if not 0.0 <= self.max_unscored <= 1.0:
            raise ConfigError(f"task_options.max_unscored must be a share in [0, 1], got {self.max_unscored}")
        if self.iterations < 0:
            raise ConfigError(f"task_options.iterations must be >= 0, got {self.iterations}")


class RolloutInput:
    """The run's input: the batch of the iteration under way (set by ``before_step``),
    this host's rows of it at every step of the iteration. Its state carries the batch
    itself (``LoaderState.arrays``): it cannot be re-read, only re-sampled from the policy
    at the iteration's start, which a resumed run mid-iteration no longer has."""

    KIND = "rollout"

    def __init__(self, *, global_batch: int, process_index: int, process_count: int, state: Any = None):
        if global_batch % process_count:
            raise ConfigError(f"the rollout batch ({global_batch} responses) does not split over {process_count} hosts")
        self.per_host, self.offset = global_batch // process_count, process_index * (global_batch // process_count)
        self.iteration, self.batch = -1, {}
        if state is not None:
            if state.spec.get("kind") != self.KIND:
                raise ConfigError(f"checkpoint's data state is {state.spec.get('kind')!r}, not a rollout (another task?)")
            self.iteration, self.batch = int(state.spec["iteration"]), dict(state.arrays)

    def set(self, iteration: int, batch: dict[str, np.ndarray]) -> None:
        self.iteration, self.batch = iteration, batch

    def __next__(self) -> dict[str, np.ndarray]:
        if not self.batch:
            raise RuntimeError("no rollout batch: MDLOO's before_step samples it before the first step")
        return {k: v[self.offset:self.offset + self.per_host] for k, v in self.batch.items()}

    def state(self) -> LoaderState:
        return LoaderState({"kind": self.KIND, "version": 1, "iteration": self.iteration},
                           np.zeros((1, 4), np.int64), dict(self.batch))

    def describe(self) -> dict[str, Any]:
        return {"lanes": 1, "iteration": self.iteration}

    def close(self) -> None:
        """Nothing runs in the background."""


class MdlooTask(TaskBase):
    """The policy update on each iteration's rollouts (see the module docstring).

    Batch: prompt + response rows (``inputs``/``targets``/``response_mask``/``segment_ids``/
    ``positions``) and per response ``old_logprobs`` (sequence log-prob under
    pi_theta_k) and ``advantages``. Loss: minus the summed objective, weight = responses.
    ``reward_fn`` / ``eval_reward_fn`` may be set to a reward already in memory (a reward
    model, a test's program) before the run starts; else ``task_options`` name them."""

    name = "mdloo"
    Options = MdlooOptions
    exact_rounding = True  # KL to the reference exactly 0 at the start (core/task.py EXACT_ROUNDING)

    def __init__(self, config: Any):
        super().__init__(config)
        opts = self.options
        if opts.prompts_per_iteration * opts.k != config.data.global_batch_size:
            raise ConfigError(f"data.global_batch_size ({config.data.global_batch_size}) must be "
                              f"prompts_per_iteration x k ({opts.prompts_per_iteration} x {opts.k})")
        self.reward_fn: Any = None
        self.eval_reward_fn: Any = None
        self._source: RolloutInput | None = None
        self._prompts: list[Any] | None = None
        self._logprobs: Any = None

    # -- the run ---------------------------------------------------------------------------------
    @classmethod
    def prepare_config(cls, config: Any, workdir: str) -> Any:
        """An online-RL run from a start policy (``init_from``): the model is the policy's
        (its checkpoint's shapes), a step's batch is ``n x K`` responses, a log line per
        iteration, ``iterations`` sets ``total_steps``, and the held-out policy reward is an
        evaluation hook (at the start and the end, and every ``eval.every_steps``) when
        ``eval_prompts`` are given."""

        opts = parse_task_options(MdlooOptions, config.task_options, cls.name)
        for name in ("tokenizer", "prompts"):
            if not getattr(opts, name):
                raise ConfigError(f"online RL needs task_options.{name} (--{name})")
        if not config.init_from:
            raise ConfigError("online RL starts from a policy: set init_from (--policy: an SFT run's best/ or model/)")
        model = load_model_config(config.init_from)
        spi = opts.steps_per_iteration
        changes: dict[str, Any] = {
            "model_overrides": {**config.model_overrides,
                                **{f.name: getattr(model, f.name) for f in dataclasses.fields(model)}},
            "data": dataclasses.replace(config.data, global_batch_size=opts.prompts_per_iteration * opts.k),
            "log_every": spi,
        }
        if opts.iterations:
            changes["total_steps"] = opts.iterations * spi
        ev = config.eval
        if opts.eval_prompts:
            hooks = list(ev.hooks) if POLICY_HOOK in ev.hooks else [*ev.hooks, POLICY_HOOK]
            changes["eval"] = dataclasses.replace(ev, hooks=hooks, at_start=True, at_end=True)
        return dataclasses.replace(config, **changes)

    def start_run(self, workdir: str) -> None:
        """No default reward: a task reward scores only its own task's prompts."""
        if self.reward_fn is None and not self.options.reward:
            raise ConfigError("online RL needs a reward: --reward task:NAME (a program's reward, e.g. task:arith) "
                              "or --rm CHECKPOINT (a reward model from afm rm train); task_options.reward")
        if self.options.eval_prompts and self.eval_reward_fn is None and not self.options.eval_reward:
            raise ConfigError("--eval-prompts needs --eval-reward (task_options.eval_prompts needs eval_reward): "
                              "the true reward the held-out replies are scored with")

    def finish_run(self, workdir: str, result: dict[str, Any]) -> dict[str, Any]:
        """``workdir/summary.json``: per-iteration rollout statistics (the first and the last),
        the held-out evaluations, the exported policy and its ``params_sha256``."""

        rows = read_metrics(Path(workdir))
        spi = self.options.steps_per_iteration
        history = iteration_rows(rows, spi)
        evals = [{"iteration": r["step"] // spi,
                  **{k.split("/", 2)[2]: v for k, v in r.items() if k.startswith("eval/policy/")}}
                 for r in rows if "eval/policy/reward" in r]
        summary = {"algorithm": self.options.algorithm, "iterations": result["steps"] // spi,
                   "seconds": result["seconds"], "first": history[0] if history else {}, "last": history[-1] if history else {},
                   "eval": evals, "model": result["model_checkpoint"], "params_sha256": result["params_sha256"],
                   "preempted": result["preempted"], "task_options": dataclasses.asdict(self.options)}
        (Path(workdir) / "summary.json").write_text(json.dumps(summary, indent=2))
        return {**result, "summary": summary}

    # -- model ---------------------------------------------------------------------------------
    def configure_model(self, model_config: Any) -> Any:
        # No dropout: the ratio pi_theta / pi_theta_k must be 1 before the first step.
        return dataclasses.replace(model_config, dropout=0.0)

    def extra_params(self, model_config: Any) -> dict[str, ParamSpec]:
        """pi_ref: a frozen copy of the start policy (or of ``task_options.reference``)."""
        return frozen_model_copy(model_config, REF)

    def restore_extra_params(self, like: dict[str, Any]) -> dict[str, jax.Array]:
        if not self.options.reference:
            return {}

        mcfg = self.configure_model(_model_config_of(self.config))
        parts = ModelParts.build(mcfg, 0)
        # The checkpoint holds the model's own layout; the copy is stored as frozen_storage
        # says (compute dtype, layers pre-stacked when scanned), made once with its shardings.
        target = {k: like.get(REF + k, jax.ShapeDtypeStruct(shape, parts.dtypes[k]))
                  for k, shape in parts.shapes.items()}
        params, _ = restore_params_only(self.options.reference, target, parts.layout)
        shardings = {k: getattr(v, "sharding", None) for k, v in like.items()}
        return jax.jit(lambda p: frozen_storage(p, mcfg, REF), out_shardings=shardings)(params)

    # -- data ----------------------------------------------------------------------------------
    def batch_fields(self) -> dict[str, Field]:
        return {
            "inputs": Field("int32"), "targets": Field("int32"), "response_mask": Field("float32"),
            "segment_ids": Field("int32"), "positions": Field("int32"),
            "old_logprobs": Field("float32", ("batch",)), "advantages": Field("float32", ("batch",)),
        }

    def make_input(self, *, vocab_size: int, process_index: int, process_count: int, state: Any = None):
        self._source = RolloutInput(global_batch=self.config.data.global_batch_size, process_index=process_index,
                                    process_count=process_count, state=state)
        return self._source

    tokenizer = property(task_tokenizer)

    @property
    def prompts(self) -> list[Any]:
        """The training prompts that fit a row with their longest response (rows have one
        shape, one compile); the others are dropped once, and counted."""
        if self._prompts is None:
            opts, seq_len = self.options, self.config.data.seq_len
            if not opts.prompts:
                raise ConfigError("the mdloo task needs task_options.prompts (a JSONL of prompts)")
            prompts = read_prompts(opts.prompts)
            fits = [p for p in prompts if len(self.tokenizer.encode_chat(p, add_generation_prompt=True)[0])
                    + opts.max_new_tokens <= seq_len + 1]
            if len(fits) < len(prompts) and jax.process_index() == 0:
                console.print(f"[yellow]{len(prompts) - len(fits)} of {len(prompts)} prompts dropped: prompt + "
                              f"max_new_tokens ({opts.max_new_tokens}) exceeds data.seq_len + 1 ({seq_len + 1})")
            if not fits:
                raise ConfigError(f"no prompt fits data.seq_len {seq_len} with max_new_tokens {opts.max_new_tokens}")
            self._prompts = fits
        return self._prompts

    def iteration_prompts(self, iteration: int) -> list[Any]:
        """The ``n`` prompts of an iteration: seeded epochs of shuffled prompts, a function of
        (seed, iteration) only, so a resumed run draws what an uninterrupted one would."""
        prompts, n = self.prompts, self.options.prompts_per_iteration
        picked = []
        for position in range(iteration * n, (iteration + 1) * n):
            epoch, i = divmod(position, len(prompts))
            order = np.random.default_rng([self.config.seed, 17, epoch]).permutation(len(prompts))
            picked.append(prompts[int(order[i])])
        return picked

    def reward(self) -> Any:
        if self.reward_fn is None:
            self.reward_fn = load_reward(self.options.reward, self.tokenizer)
        return self.reward_fn

    # -- the rollout, before the first step of an iteration -------------------------------------------
    def before_step(self, step: int, view: ModelView) -> dict[str, float]:
        opts = self.options
        if step % opts.steps_per_iteration:
            return {}

        iteration = step // opts.steps_per_iteration
        tok, k = self.tokenizer, opts.k
        roll = sample_groups(view.model, tok, self.iteration_prompts(iteration), k=k,
                             max_new_tokens=opts.max_new_tokens, temperature=opts.temperature,
                             seed=self.config.seed * 100_003 + iteration, batch_size=opts.rollout_batch or None)
        packed = pack_responses([p for p in roll.prompt_ids for _ in range(k)], roll.response_ids,
                                pad_id=tok.pad_id, width=self.config.data.seq_len)

        policy, ref = self._response_logprobs(view, packed)
        finished = roll.finished()
        scored = score_responses(self.reward(), roll.group_prompts(), roll.texts, stopped=finished)
        check_unscored(scored, opts.max_unscored, reward=self.reward(), where=f"in iteration {iteration}",
                       option="task_options.max_unscored / afm rl mdloo --set max_unscored=...")
        if scored.reasons and jax.process_index() == 0:
            console.print(f"[yellow]iteration {iteration}: {scored.unscored_share:.0%} of the responses unscored "
                          f"({scored.describe()}); left out of the update", highlight=False)
        valid = scored.scored
        # An unscored response takes no part in the update: no advantage, no loss terms.
        packed["response_mask"] = packed["response_mask"] * valid[:, None].astype(np.float32)
        policy, ref = policy * packed["response_mask"], ref * packed["response_mask"]
        scores = scored.filled(0.0)
        mask = packed["response_mask"]
        rewards = kl_penalised_reward(scores, policy, ref, mask, opts.beta)
        adv = loo_advantage(rewards, k, valid).astype(np.float32)
        assert self._source is not None, "make_input runs before the first step"
        self._source.set(iteration, {**packed, "old_logprobs": policy.sum(-1).astype(np.float32), "advantages": adv})
        lengths = np.array([len(r) for r in roll.response_ids])
        kl = ((policy - ref) * mask).sum(-1)
        return {
            "iteration": iteration, "reward": float(scores[valid].mean()) if valid.any() else float("nan"),
            "reward_kl_penalised": float(rewards[valid].mean()) if valid.any() else float("nan"),
            "unscored_share": scored.unscored_share,
            "kl_ref": float(kl[valid].mean()) if valid.any() else float("nan"), "length": float(lengths.mean()),
            "stopped": float(finished.mean()), "adv_mean": float(adv.mean()), "adv_std": float(adv.std()),
            "adv_min": float(adv.min()), "adv_max": float(adv.max()), "rollout_tokens_per_s": roll.tokens_per_second,
        }

    def _scoring_fn(self, build: Any) -> Any:
        """(params, batch) -> the responses' per-token log-probs under pi_theta_k and pi_ref."""

        temperature, chunk = self.options.temperature, self.config.loss_chunk

        def both(params: dict[str, jax.Array], batch: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
            return (response_logprobs_of(build(params), batch, temperature, chunk),
                    response_logprobs_of(frozen_model(build, params, REF), batch, temperature, chunk))

        return both

    def _scoring_rows(self, rows: int) -> int:
        """Rows per scoring call: the run's micro-batch, as the loss sees them."""
        return max(1, rows // max(1, self.config.microbatches))

    def side_programs(self, engine: Any) -> dict[str, SideProgram]:
        """The rollout sampler (``rollout_batch`` rows, or all n x K at once; the longest
        prompt that fits ``data.seq_len`` with ``max_new_tokens``; its KV cache) and the
        scoring pass (one micro-batch of responses through policy and reference), lowered
        on abstract inputs, for the run's memory plan."""
        from flax import nnx

        opts, seq_len = self.options, self.config.data.seq_len
        every = engine.abstract_params()
        model_keys = engine.layout.keys
        own = {k: every[k] for k in model_keys}
        model = nnx.eval_shape(lambda p: engine.build_model(p), own)
        responses = opts.prompts_per_iteration * opts.k
        rows = min(opts.rollout_batch or responses, responses)
        prompt_len = max(1, seq_len + 1 - opts.max_new_tokens)

        def size(tree: Any) -> int:
            return sum(x.size * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))

        rollout = SideProgram(sample_program(model, rows, prompt_len, max_new_tokens=opts.max_new_tokens),
                              size(own))
        fields = self.batch_fields()
        width = {"batch": self._scoring_rows(responses), "seq": seq_len}
        batch = {k: jax.ShapeDtypeStruct(tuple(width[d] if isinstance(d, str) else d for d in f.shape), np.dtype(f.dtype))
                 for k, f in fields.items() if k in ("inputs", "targets", "response_mask", "segment_ids", "positions")}
        scoring = SideProgram(jax.jit(self._scoring_fn(engine.build_model), compiler_options=compiler_options(self))
                              .lower(every, batch), size(every))
        return {"rollout": rollout, "scoring": scoring}

    def _response_logprobs(self, view: ModelView, packed: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Per-token log-probs of the responses under pi_theta_k and pi_ref ([N, T] each),
        teacher-forced through the one chunked scoring function, jitted once per run, and
        in the run's micro-batches (``microbatches``: the same rows at a time as the
        loss), so scoring never holds more activations than a training step."""
        if self._logprobs is None:
            self._logprobs = jax.jit(self._scoring_fn(view.build_model), compiler_options=compiler_options(self))
        rows = len(packed["inputs"])
        step = self._scoring_rows(rows)
        policy, ref = [], []
        for at in range(0, rows, step):
            part = {k: jnp.asarray(v[at:at + step]) for k, v in packed.items()}
            p, r = self._logprobs(view.params, part)
            policy.append(np.asarray(p))
            ref.append(np.asarray(r))
        return np.concatenate(policy), np.concatenate(ref)

    # -- the objective ---------------------------------------------------------------------------
    def loss(self, params: dict[str, Any], batch: dict[str, Any], ctx: LossContext) -> LossOutput:
        policy = {k: v for k, v in params.items() if not k.startswith(REF)}
        logp = response_logprobs_of(ctx.model(policy), batch, self.options.temperature,
                                    self.config.loss_chunk).sum(axis=-1)
        opts = self.options
        if opts.algorithm == "ppo":
            terms = ppo_clip_terms(logp, batch["old_logprobs"], batch["advantages"], opts.clip)
        else:
            terms = mdloo_terms(logp, batch["old_logprobs"], batch["advantages"], opts.gamma)
        valid = (batch["response_mask"].sum(axis=-1) > 0).astype(jnp.float32)
        n = valid.sum()
        metrics = {k: ((v * valid).sum(), n) for k, v in terms.items() if k != "objective"}
        metrics["objective"] = ((terms["objective"] * valid).sum(), n)
        return LossOutput(loss=(-(terms["objective"] * valid).sum(), n), metrics=metrics)


def _model_config_of(config: Any) -> Any:
    return model_config(config)


class PolicyRewardHook:
    """The true reward of the policy on held-out prompts, as a trainer eval hook
    (``eval/policy/reward``, ``.../sampled_reward``, ``.../length``): the same prompts and
    sampling seed at every evaluation, so differences are the policy's."""

    name = "policy"

    def __init__(self, task: MdlooTask):
        opts = task.options
        self.task = task
        self.prompts = read_prompts(opts.eval_prompts, opts.eval_limit)
        self.reward = task.eval_reward_fn
        if self.reward is None and not opts.eval_reward:
            raise ConfigError("--eval-prompts needs --eval-reward (task_options.eval_prompts needs eval_reward): "
                              "the true reward the held-out replies are scored with")
        if self.reward is None:
            self.reward = load_reward(opts.eval_reward, task.tokenizer)

    def __call__(self, step: int, view: ModelView) -> dict[str, float]:
        opts = self.task.options
        return evaluate_policy(view.model, self.task.tokenizer, self.prompts, self.reward,
                               max_new_tokens=opts.max_new_tokens, samples=opts.eval_samples,
                               temperature=opts.temperature, seed=self.task.config.seed + 1)


def policy_reward_hook(context: HookContext) -> PolicyRewardHook:
    """``eval.hooks: ["afm.training.tasks.mdloo:policy_reward_hook"]`` (an MDLOO run's)."""
    task = context.engine.task
    if not isinstance(task, MdlooTask):
        raise ConfigError("policy_reward_hook evaluates an mdloo run's policy (task: mdloo)")
    if not task.options.eval_prompts:
        raise ConfigError("policy_reward_hook needs task_options.eval_prompts")
    return PolicyRewardHook(task)


# -- held-out reward ------------------------------------------------------------------------


def evaluate_policy(model: Any, tokenizer: Any, prompts: list[Any], reward: Any, *,
                    max_new_tokens: int, samples: int = 0, temperature: float = 1.0,
                    seed: int = 0) -> dict[str, float]:
    """The true reward of the policy on held-out ``prompts``: of its greedy response
    (``reward``, ``length``) and, when ``samples`` > 0, the mean over ``samples`` responses
    sampled at ``temperature`` per prompt (``sampled_reward``) -- the expected reward RL
    maximises, which greedy decoding of a small model can hide."""

    roll = sample_groups(model, tokenizer, prompts, k=1, max_new_tokens=max_new_tokens, temperature=0.0)
    greedy = score_responses(reward, roll.group_prompts(), roll.texts, roll.finished())
    out = {**greedy.metrics(), "length": float(np.mean([len(r) for r in roll.response_ids]))}
    if samples > 0:
        sampled = sample_groups(model, tokenizer, prompts, k=samples, max_new_tokens=max_new_tokens,
                                temperature=temperature, seed=seed)
        out["sampled_reward"] = score_responses(reward, sampled.group_prompts(), sampled.texts,
                                                sampled.finished()).metrics()["reward"]
    return out


OPTIMISATION_KEYS = ("kl_prev", "ratio", "objective", "pg", "clipped")


def iteration_rows(rows: list[dict[str, Any]], steps_per_iteration: int) -> list[dict[str, Any]]:
    """One row per iteration from a run's logged steps (``read_metrics``): the rollout's
    statistics (logged on the iteration's first step, with ``ratio_first_step``, which is 1
    when the sampler's and the loss's policies agree) and the optimisation terms of its
    last step (``kl_prev`` after the updates so far, ``ratio``, ``objective``)."""
    by_step = {int(r["step"]): r for r in rows}
    out = []
    for row in rows:
        if "iteration" not in row:
            continue
        last = by_step.get((int(row["iteration"]) + 1) * steps_per_iteration, row)
        out.append({**row, "iteration": int(row["iteration"]), "ratio_first_step": row.get("ratio", float("nan")),
                    **{k: last[k] for k in OPTIMISATION_KEYS if k in last}})
    return out


__all__ = ["ALGORITHMS", "POLICY_HOOK", "MdlooOptions", "MdlooTask", "PolicyRewardHook", "RolloutInput",
           "evaluate_policy", "iteration_rows", "kl_penalised_reward", "loo_advantage", "mdloo_terms",
           "policy_reward_hook", "ppo_clip_terms"]
