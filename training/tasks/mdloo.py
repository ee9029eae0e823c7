"""Online RL as a task of the one trainer: MDLOO, with a leave-one-out advantage and a
mirror-descent KL trust region (report §4.3.3 and App. E.2; SPEC 4), and the objectives
people compare it with as ``task_options.algorithm`` (``afm rl train --algorithm``): PPO-clip,
GRPO, Dr. GRPO and DAPO (``afm.training.rl.objectives``), on the same rollouts, rewards,
checkpoints, resume and preemption.

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
loss), with the same rollouts, rewards and advantages. The GRPO family
(``grpo``, ``dr_grpo``, ``dapo``) takes per-token ratios instead: the batch carries every
response token's log-prob under pi_theta_k and pi_ref, the advantage is the group's
(normalised) reward, the reference KL is in the loss, and DAPO's dynamic sampling draws
more prompts in ``before_step`` until the batch holds ``n`` groups whose rewards differ.

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
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from afm.config import ConfigError, coerce
from afm.console import console
from afm.model.checkpoints.checkpoint import load_config as load_model_config
from afm.model.distributed.partitioning import activation_sharding
from afm.model.distributed.sharding import ACTIVATION_RULES, BATCH_AXES, batch_spec
from afm.model.inference.sampling import sample_program
from afm.model.parts import ModelParts
from afm.model.transformer import RUNTIME_FIELDS
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
from afm.training.rl.objectives import ALGORITHMS as ALGORITHM_SPECS
from afm.training.rl.objectives import (
    group_advantage,
    informative_groups,
    kl_penalised_reward,
    loo_advantage,
    mdloo_terms,
    normalised_sum,
    ppo_clip_terms,
    token_clip_terms,
)
from afm.training.rl.rewards import check_unscored, load_reward, score_responses
from afm.training.rl.rollout import pack_responses, response_logprobs_of, sample_groups

ALGORITHMS = tuple(ALGORITHM_SPECS)  # mdloo, ppo, grpo, dr_grpo, dapo (training/rl/objectives.py)
REF = "ref/"
POLICY_HOOK = "afm.training.tasks.mdloo:policy_reward_hook"  # the held-out policy reward (eval hook)


# -- the task --------------------------------------------------------------------------------


@dataclass
class MdlooOptions:
    """``task_options`` of the online-RL task (every algorithm)."""

    algorithm: str = "mdloo"  # mdloo | ppo | grpo | dr_grpo | dapo (training/rl/objectives.py)
    gamma: float = 0.1  # MDLOO: weight of KL(pi_theta || pi_theta_k) (eq. 8)
    clip: float = 0.2  # PPO's and the GRPO family's epsilon (DAPO's epsilon_low)
    clip_high: float = 0.28  # DAPO's decoupled epsilon_high (clip-higher)
    temperature: float = 1.0  # the policy is softmax(logits / T), the distribution sampled
    top_k: int = 0  # sample (and score) the top-k distribution; 0: every token
    beta: float = 0.05  # MDLOO / PPO: KL(pi || pi_ref) penalty in the reward
    kl_coef: float | None = None  # GRPO family: k3 KL(pi || pi_ref) weight in the loss (None: the algorithm's)
    max_sample_rounds: int = 4  # DAPO's dynamic sampling: rounds of n prompts to fill the batch
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

    @property
    def spec(self) -> Any:
        """The algorithm's definition (``afm.training.rl.objectives.ALGORITHMS``)."""
        return ALGORITHM_SPECS[self.algorithm]

    @property
    def loss_kl_coef(self) -> float:
        """The weight of the reference KL in a token-level loss: the option, or the
        algorithm's default (GRPO 0.04; Dr. GRPO and DAPO 0)."""
        return self.spec.kl_coef if self.kl_coef is None else float(self.kl_coef)

    def check(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"task_options.algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        if not self.temperature > 0:
            raise ConfigError("task_options.temperature must be > 0: online RL samples its policy (0 would be greedy)")
        if self.k < 2:
            raise ConfigError("task_options.k must be >= 2: an advantage needs two responses per prompt")
        if self.steps_per_iteration < 1 or self.prompts_per_iteration < 1:
            raise ConfigError("task_options.steps_per_iteration and prompts_per_iteration must be >= 1")
        if not 0.0 <= self.max_unscored <= 1.0:
            raise ConfigError(f"task_options.max_unscored must be a share in [0, 1], got {self.max_unscored}")
        if self.iterations < 0:
            raise ConfigError(f"task_options.iterations must be >= 0, got {self.iterations}")
        if not 0.0 < self.clip < 1.0 or not self.clip_high > 0.0:
            raise ConfigError(f"task_options.clip must be in (0, 1) and clip_high > 0, got {self.clip} and "
                              f"{self.clip_high}")
        if self.kl_coef is not None and not self.kl_coef >= 0.0:
            raise ConfigError(f"task_options.kl_coef must be >= 0, got {self.kl_coef}")
        if self.top_k < 0:
            raise ConfigError(f"task_options.top_k must be >= 0 (0: every token), got {self.top_k}")
        if self.max_sample_rounds < 1:
            raise ConfigError(f"task_options.max_sample_rounds must be >= 1, got {self.max_sample_rounds}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"task_options.max_new_tokens must be >= 1, got {self.max_new_tokens}")


def policy_model_overrides(config: Any) -> dict[str, Any]:
    """The run's model: the start policy's config (``init_from``: its shapes, its dtypes),
    with the run-time settings the run's overrides give (``--set
    model_overrides.dtype=float32``, ``scan_layers``, ``remat``, ``attention_impl``, ...:
    ``afm.model.transformer.RUNTIME_FIELDS``) applied, and ``max_seq_len`` raised to
    ``data.seq_len`` when shorter. An override of a shape that differs from the policy's
    is refused with one line: the parameters come from the checkpoint."""
    model = load_model_config(config.init_from)
    start = {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}
    given = dict(config.model_overrides)
    hints = typing.get_type_hints(type(model))
    fixed = {k: v for k, v in given.items() if k in start and k not in RUNTIME_FIELDS
             and coerce(v, hints[k], f"model_overrides.{k}") != start[k]}
    if fixed:
        key, value = next(iter(fixed.items()))
        raise ConfigError(f"model_overrides.{key}={value!r} differs from the start policy's {start[key]!r} "
                          f"({config.init_from}): its shapes and parameter dtype come from the checkpoint; only "
                          f"run-time fields can be set ({', '.join(sorted(RUNTIME_FIELDS - {'name', 'notes'}))})")
    runtime = {k: v for k, v in given.items() if k in RUNTIME_FIELDS}
    if "max_seq_len" not in runtime and config.data.seq_len > model.max_seq_len:
        runtime["max_seq_len"] = config.data.seq_len
    if runtime and jax.process_index() == 0:
        console.print(f"policy model: {config.init_from} (its shapes); run-time settings from this run: "
                      + ", ".join(f"{k} {v}" for k, v in runtime.items()), highlight=False)
    return {**start, **runtime}


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
        spi = opts.steps_per_iteration
        changes: dict[str, Any] = {
            "model_overrides": policy_model_overrides(config),
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
        """Prompt + response rows and per response the advantage; the whole response's
        log-prob under pi_theta_k (``old_logprobs``: MDLOO, PPO) or every token's under
        pi_theta_k and pi_ref (``old_token_logprobs``, ``ref_token_logprobs``: the GRPO
        family's per-token ratios and KL)."""
        fields = {
            "inputs": Field("int32"), "targets": Field("int32"), "response_mask": Field("float32"),
            "segment_ids": Field("int32"), "positions": Field("int32"), "advantages": Field("float32", ("batch",)),
        }
        if self.options.spec.level == "token":
            return fields | {"old_token_logprobs": Field("float32"), "ref_token_logprobs": Field("float32")}
        return fields | {"old_logprobs": Field("float32", ("batch",))}

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

    def iteration_prompts(self, iteration: int, round_: int = 0) -> list[Any]:
        """The ``n`` prompts of an iteration: seeded epochs of shuffled prompts, a function of
        (seed, iteration) only, so a resumed run draws what an uninterrupted one would.
        ``round_`` > 0: the extra prompts of DAPO's dynamic sampling, ``n`` drawn at random
        from (seed, iteration, round), equally reproducible."""
        prompts, n = self.prompts, self.options.prompts_per_iteration
        if round_:
            pick = np.random.default_rng([self.config.seed, 23, iteration, round_]).integers(0, len(prompts), n)
            return [prompts[int(i)] for i in pick]
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
    def _rollout(self, view: ModelView, prompts: list[Any], seed: int, where: str) -> dict[str, Any]:
        """K responses to each prompt, packed; their per-token log-probs under pi_theta_k
        and pi_ref; their rewards (NaN where unscored, the run stopped past
        ``max_unscored``). Per response (row ``i * K + j``)."""
        opts, tok, k = self.options, self.tokenizer, self.options.k
        roll = sample_groups(view.model, tok, prompts, k=k, max_new_tokens=opts.max_new_tokens,
                             temperature=opts.temperature, top_k=opts.top_k, seed=seed,
                             batch_size=opts.rollout_batch or None)
        packed = pack_responses([p for p in roll.prompt_ids for _ in range(k)], roll.response_ids,
                                pad_id=tok.pad_id, width=self.config.data.seq_len)
        policy, ref, policy_sums = self._response_logprobs(view, packed)
        finished = roll.finished()
        scored = score_responses(self.reward(), roll.group_prompts(), roll.texts, stopped=finished)
        check_unscored(scored, opts.max_unscored, reward=self.reward(), where=where,
                       option="--set task_options.max_unscored=SHARE (afm rl train --max-unscored SHARE)")
        if scored.reasons and jax.process_index() == 0:
            console.print(f"[yellow]{where}: {scored.unscored_share:.0%} of the responses unscored "
                          f"({scored.describe()}); left out of the update", highlight=False)
        valid = scored.scored
        # An unscored response takes no part in the update: no advantage, no loss terms.
        packed["response_mask"] = packed["response_mask"] * valid[:, None].astype(np.float32)
        mask = packed["response_mask"]
        return {"packed": packed, "policy": policy * mask, "ref": ref * mask, "scores": scored.filled(0.0),
                "policy_sums": np.where(valid, policy_sums, 0.0).astype(np.float32),
                "valid": valid, "finished": finished, "unscored_share": scored.unscored_share,
                "lengths": np.array([len(r) for r in roll.response_ids]), "seconds": roll.seconds,
                "new_tokens": roll.new_tokens}

    def _dynamic_sampling(self, view: ModelView, iteration: int, first: dict[str, Any]) -> tuple[dict[str, Any], dict]:
        """DAPO's dynamic sampling: keep the groups whose scored rewards differ, and sample
        ``n`` more prompts (``iteration_prompts(iteration, round)``) until ``n`` such groups
        are found or ``max_sample_rounds`` rounds are done; a batch still short is filled
        with left-out groups whose responses are masked out (no loss term), and counted."""
        opts, k, n = self.options, self.options.k, self.options.prompts_per_iteration
        rounds, kept, spare, sampled = [first], [], [], 0
        for round_ in range(opts.max_sample_rounds):
            if round_:
                seed = self.config.seed * 100_003 + iteration + 1_000_003 * round_
                rounds.append(self._rollout(view, self.iteration_prompts(iteration, round_), seed,
                                            f"in iteration {iteration} (dynamic sampling round {round_})"))
            r = rounds[-1]
            good = informative_groups(r["scores"], k, r["valid"])
            sampled += len(good)
            kept += [(len(rounds) - 1, g) for g in np.flatnonzero(good)]
            spare += [(len(rounds) - 1, g) for g in np.flatnonzero(~good)]
            if len(kept) >= n:
                break
        chosen = kept[:n]
        filler = spare[: n - len(chosen)]
        rows = lambda picks: [(ri, g * k + j) for ri, g in picks for j in range(k)]  # noqa: E731
        pick = rows(chosen) + rows(filler)
        out: dict[str, Any] = {"packed": {f: np.stack([rounds[ri]["packed"][f][i] for ri, i in pick])
                                          for f in first["packed"]}}
        for key in ("policy", "ref", "policy_sums", "scores", "valid", "finished", "lengths"):
            out[key] = np.stack([rounds[ri][key][i] for ri, i in pick])
        dropped = np.zeros(len(pick), bool)
        dropped[len(chosen) * k:] = True  # filler groups: no loss term
        out["valid"] = out["valid"] & ~dropped
        out["packed"]["response_mask"] = out["packed"]["response_mask"] * (~dropped)[:, None]
        stats = {"ds_rounds": len(rounds), "ds_groups_sampled": sampled, "ds_groups_kept": len(chosen),
                 "ds_groups_short": n - len(chosen)}
        return out, stats

    def before_step(self, step: int, view: ModelView) -> dict[str, float]:
        opts = self.options
        if step % opts.steps_per_iteration:
            return {}

        iteration, k, spec = step // opts.steps_per_iteration, opts.k, opts.spec
        first = self._rollout(view, self.iteration_prompts(iteration), self.config.seed * 100_003 + iteration,
                              f"in iteration {iteration}")
        extra: dict[str, float] = {}
        batch = first
        if spec.dynamic_sampling:
            batch, extra = self._dynamic_sampling(view, iteration, first)
        packed, policy, ref, valid = batch["packed"], batch["policy"], batch["ref"], batch["valid"]
        mask = packed["response_mask"]
        if spec.advantage == "loo_kl":
            rewards = kl_penalised_reward(batch["scores"], policy, ref, mask, opts.beta)
            adv = loo_advantage(rewards, k, valid).astype(np.float32)
        else:
            rewards = batch["scores"]
            adv = group_advantage(rewards, k, valid, scale=spec.advantage == "group_std")
        arrays = {**packed, "advantages": adv}
        if spec.level == "token":
            arrays |= {"old_token_logprobs": policy.astype(np.float32), "ref_token_logprobs": ref.astype(np.float32)}
        else:
            arrays["old_logprobs"] = batch["policy_sums"]
        assert self._source is not None, "make_input runs before the first step"
        self._source.set(iteration, arrays)
        # The iteration's statistics are of its first round of n prompts (the policy's own
        # reward, comparable across algorithms); the advantages of the batch trained on.
        ok, fmask = first["valid"], first["packed"]["response_mask"]
        kl = ((first["policy"] - first["ref"]) * fmask).sum(-1)
        penalised = kl_penalised_reward(first["scores"], first["policy"], first["ref"], fmask, opts.beta)
        return {
            "iteration": iteration, "reward": float(first["scores"][ok].mean()) if ok.any() else float("nan"),
            "reward_kl_penalised": float(penalised[ok].mean()) if ok.any() else float("nan"),
            "unscored_share": first["unscored_share"],
            "kl_ref": float(kl[ok].mean()) if ok.any() else float("nan"), "length": float(first["lengths"].mean()),
            "stopped": float(first["finished"].mean()), "adv_mean": float(adv.mean()), "adv_std": float(adv.std()),
            "adv_min": float(adv.min()), "adv_max": float(adv.max()),
            "rollout_tokens_per_s": first["new_tokens"] / first["seconds"] if first["seconds"] > 0 else float("nan"),
            **extra,
        }

    def _scoring_fn(self, build: Any) -> Any:
        """(params, batch) -> the responses' per-token log-probs under pi_theta_k and pi_ref."""

        temperature, chunk, top_k = self.options.temperature, self.config.loss_chunk, self.options.top_k

        def both(params: dict[str, jax.Array], batch: dict[str, jax.Array]) -> tuple[jax.Array, ...]:
            policy = response_logprobs_of(build(params), batch, temperature, chunk, top_k)
            # the whole response's log-prob summed as the loss sums it (the same reduction
            # on device, not NumPy's pairwise order): the first step's ratio is exactly 1
            return (policy, response_logprobs_of(frozen_model(build, params, REF), batch, temperature, chunk, top_k),
                    policy.sum(axis=-1))

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

        rollout = SideProgram(sample_program(model, rows, prompt_len, max_new_tokens=opts.max_new_tokens,
                                             top_k=opts.top_k), size(own))
        fields = self.batch_fields()
        width = {"batch": self._scoring_rows(responses), "seq": seq_len}
        batch = {k: jax.ShapeDtypeStruct(tuple(width[d] if isinstance(d, str) else d for d in f.shape), np.dtype(f.dtype))
                 for k, f in fields.items() if k in ("inputs", "targets", "response_mask", "segment_ids", "positions")}
        scoring = SideProgram(jax.jit(self._scoring_fn(engine.build_model), compiler_options=compiler_options(self))
                              .lower(every, batch), size(every))
        return {"rollout": rollout, "scoring": scoring}

    def _batch_placement(self, mesh: Any, rows: int) -> Any:
        """How a scoring call's ``[rows, seq]`` arrays are placed: sharded over the mesh as
        the train step's batch is (and traced under the same activation rules), so each
        device multiplies the same shapes in both programs and the first step's ratio is
        exactly 1 on a multi-device mesh too (per-device matmul shapes change float32
        accumulation order); one device, or rows the data axes do not divide: as they are."""
        spec = batch_spec(mesh, self.config.data.seq_len) if mesh is not None else None
        if spec is None or rows % int(np.prod([mesh.shape[a] for a in BATCH_AXES])):
            return jnp.asarray
        sharding = NamedSharding(mesh, spec)
        return lambda v: jax.device_put(np.asarray(v), sharding if np.ndim(v) >= 2 else NamedSharding(mesh, PartitionSpec(spec[0])))

    def _response_logprobs(self, view: ModelView, packed: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        """Per-token log-probs of the responses under pi_theta_k and pi_ref ([N, T] each)
        and the whole responses' under pi_theta_k ([N]),
        teacher-forced through the one chunked scoring function, jitted once per run, and
        in the run's micro-batches (``microbatches``: the same rows at a time as the
        loss), so scoring never holds more activations than a training step."""
        if self._logprobs is None:
            self._logprobs = jax.jit(self._scoring_fn(view.build_model), compiler_options=compiler_options(self))
        rows = len(packed["inputs"])
        step = self._scoring_rows(rows)
        policy, ref, sums = [], [], []
        place = self._batch_placement(view.mesh, step)
        for at in range(0, rows, step):
            part = {k: place(v[at:at + step]) for k, v in packed.items()}
            with activation_sharding(view.mesh, ACTIVATION_RULES):
                p, r, total = self._logprobs(view.params, part)
            policy.append(np.asarray(p))
            ref.append(np.asarray(r))
            sums.append(np.asarray(total))
        return np.concatenate(policy), np.concatenate(ref), np.concatenate(sums)

    # -- the objective ---------------------------------------------------------------------------
    def loss(self, params: dict[str, Any], batch: dict[str, Any], ctx: LossContext) -> LossOutput:
        """Minus the algorithm's objective (``afm.training.rl.objectives``) as (sum,
        weight): per response for MDLOO / PPO and GRPO / Dr. GRPO, per token for DAPO."""
        opts, spec = self.options, self.options.spec
        policy = {k: v for k, v in params.items() if not k.startswith(REF)}
        logp_tok = response_logprobs_of(ctx.model(policy), batch, opts.temperature, self.config.loss_chunk,
                                        opts.top_k)
        mask = batch["response_mask"]
        if spec.level == "token":
            terms = token_clip_terms(logp_tok, batch["old_token_logprobs"], batch["ref_token_logprobs"],
                                     batch["advantages"], clip_low=opts.clip,
                                     clip_high=opts.clip_high if spec.decoupled_clip else opts.clip,
                                     kl_coef=opts.loss_kl_coef)
            objective, weight = normalised_sum(terms["objective"], mask, spec.normalise, opts.max_new_tokens)
            tokens = mask.sum()
            metrics = {k: ((v * mask).sum(), tokens) for k, v in terms.items() if k != "objective"}
            metrics["objective"] = (objective, weight)
            return LossOutput(loss=(-objective, weight), metrics=metrics)
        logp = logp_tok.sum(axis=-1)
        if opts.algorithm == "ppo":
            terms = ppo_clip_terms(logp, batch["old_logprobs"], batch["advantages"], opts.clip)
        else:
            terms = mdloo_terms(logp, batch["old_logprobs"], batch["advantages"], opts.gamma)
        valid = (mask.sum(axis=-1) > 0).astype(jnp.float32)
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
                               temperature=opts.temperature, seed=self.task.config.seed + 1, top_k=opts.top_k)


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
                    seed: int = 0, top_k: int = 0) -> dict[str, float]:
    """The true reward of the policy on held-out ``prompts``: of its greedy response
    (``reward``, ``length``) and, when ``samples`` > 0, the mean over ``samples`` responses
    sampled at ``temperature`` per prompt (``sampled_reward``) -- the expected reward RL
    maximises, which greedy decoding of a small model can hide."""

    roll = sample_groups(model, tokenizer, prompts, k=1, max_new_tokens=max_new_tokens, temperature=0.0)
    greedy = score_responses(reward, roll.group_prompts(), roll.texts, roll.finished())
    out = {**greedy.metrics(), "length": float(np.mean([len(r) for r in roll.response_ids]))}
    if samples > 0:
        sampled = sample_groups(model, tokenizer, prompts, k=samples, max_new_tokens=max_new_tokens,
                                temperature=temperature, seed=seed, top_k=top_k)
        out["sampled_reward"] = score_responses(reward, sampled.group_prompts(), sampled.texts,
                                                sampled.finished()).metrics()["reward"]
    return out


OPTIMISATION_KEYS = ("kl_prev", "ratio", "objective", "pg", "clipped", "kl_ref_k3")


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
           "policy_model_overrides", "policy_reward_hook", "ppo_clip_terms"]
