"""``afm rl train`` (online RL: MDLOO, or the PPO, GRPO, Dr. GRPO and DAPO baselines; ``afm
rl mdloo`` is the same command) and ``afm itec`` (a committee-distillation round, the
preference-pair export, a whole round from a config).
Light imports only; the work happens in the command bodies."""

from __future__ import annotations

import json

import click

from afm.app.commands.options import FRACTION, POSITIVE, SEED


def _user_errors() -> tuple[type[BaseException], ...]:
    from afm.config import ConfigError

    return (ConfigError, ValueError, FileNotFoundError)


@click.group("rl")
def rl_group() -> None:
    """Online reinforcement learning from a reward (report §4.3.3)."""


# The online-RL algorithms (afm.training.rl.objectives.ALGORITHMS; a test keeps them equal):
# named here so the command's help needs no JAX import.
ALGORITHM_CHOICES = ("mdloo", "ppo", "grpo", "dr_grpo", "dapo")


@click.command("train", epilog="""\b
Examples:
  afm rl train --policy runs/sft/best --tokenizer tok/ --prompts prompts.jsonl \\
      --eval-prompts heldout.jsonl --reward task:arith --eval-reward task:arith --workdir runs/mdloo
  afm rl train --config mdloo.yaml --workdir runs/mdloo --set task_options.beta=0.1 --set task_options.k=8
  afm rl train --config mdloo.yaml --workdir runs/grpo --algorithm grpo      # a baseline
  afm rl train --config mdloo.yaml --workdir runs/dapo --algorithm dapo --top-k 50
  afm rl train --config mdloo.yaml --workdir runs/mdloo-rm --rm runs/rm/reward-model
  afm rl mdloo ...                                                           # the same command
  afm train --config mdloo.yaml --workdir runs/mdloo                         # the same run
\b
Each iteration samples K responses for each of n prompts (batched, KV cache) and runs a
few optimiser steps of the chosen algorithm on them (afm.training.rl.objectives):
  mdloo    the report's: leave-one-out advantage of reward - beta * log(pi/pi_ref),
           KL(pi || pi_k) trust region (weight gamma), whole-response ratios
  ppo      the same advantage, PPO's clipped surrogate
  grpo     group-normalised advantage, per-token clipped ratio, k3 KL to pi_ref in the loss
           (task_options.kl_coef, 0.04)
  dr_grpo  GRPO without the std and per-length normalisation (Dr. GRPO)
  dapo     clip-higher (task_options.clip_high 0.28), token-level loss, dynamic sampling
           (groups whose rewards are all equal dropped, more prompts sampled)
There is no default reward: a task reward scores only its own task's prompts. Responses the
reward cannot score are left out of the update and counted per iteration; past
--max-unscored (task_options.max_unscored, default 0.5) the run stops and says why.
The model is the start policy's (its shapes); run-time settings apply (--set
model_overrides.dtype=float32, scan_layers, remat), and a changed shape is refused.
A stage like every training stage (task mdloo; tiny-mdloo by default, or a YAML file with
`base: tiny-mdloo`, options under task_options; afm train --list-configs): checkpoints,
and re-running the same command resumes (also after SIGTERM mid-iteration); --iterations
says where to stop, so 2 iterations then a rerun to 4 end with the same params_sha256 as 4
at once, for every algorithm. Writes WORKDIR/metrics.jsonl (per step; the rollout's reward,
both KLs, length and advantage statistics on each iteration's first step),
WORKDIR/summary.json, WORKDIR/model and WORKDIR/curves.png.
""")
@click.option("--config", default="tiny-mdloo", show_default=True,
              help="An online-RL stage (mdloo, tiny-mdloo) or a YAML file (base: tiny-mdloo, task_options: ...).")
@click.option("--workdir", required=True)
@click.option("--policy", default=None, help="Start checkpoint (afm.model format, e.g. an SFT run's best/); init_from.")
@click.option("--reference", default=None, help="pi_ref (default: the start policy).")
@click.option("--tokenizer", default=None)
@click.option("--prompts", default=None, help="JSONL of prompts ('messages' or 'prompt').")
@click.option("--eval-prompts", default=None,
              help="Held-out prompts scored with --eval-reward (greedy, and eval_samples sampled replies each).")
@click.option("--reward", default=None, help="task:NAME (a program's reward), e.g. task:arith. This or --rm is required.")
@click.option("--rm", "rm", default=None, help="A reward-model checkpoint (afm rm train) as the reward.")
@click.option("--eval-reward", default=None,
              help="The true reward the held-out replies are scored with (required with --eval-prompts).")
@click.option("--algorithm", type=click.Choice(ALGORITHM_CHOICES), default=None,
              help="The objective (task_options.algorithm; default the stage's, mdloo).")
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help="Stop after this many iterations (task_options.iterations).")
@click.option("--top-k", type=click.IntRange(min=0), default=None,
              help="Sample (and score) the top-k distribution (task_options.top_k; 0: every token).")
@click.option("--max-unscored", type=FRACTION, default=None,
              help="Stop when the reward cannot score more than this share of an iteration's responses "
                   "(task_options.max_unscored, default 0.5).")
@click.option("--set", "overrides", multiple=True,
              help="Config override KEY=VALUE, e.g. task_options.beta=0.1, optimizer.learning_rate=3e-4, seed=1.")
def train_command(config, workdir, policy, reference, tokenizer, prompts, eval_prompts, reward, rm,
                  eval_reward, algorithm, iterations, top_k, max_unscored, overrides) -> None:
    """Online RL from a start policy and a reward: MDLOO, or PPO, GRPO, Dr. GRPO, DAPO."""
    from afm.app.studies.rl_curves import plot_rl_curves
    from afm.training.runs.train import train

    options = {"reference": reference, "tokenizer": tokenizer, "prompts": prompts, "eval_prompts": eval_prompts,
               "reward": rm or reward, "eval_reward": eval_reward, "algorithm": algorithm, "iterations": iterations,
               "top_k": top_k, "max_unscored": max_unscored}
    try:
        result = train(config, workdir, task="mdloo", require_task="mdloo", init_from=policy,
                       overrides=list(overrides), task_options=options)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    summary = result["summary"]
    png = plot_rl_curves([f"{workdir}/metrics.jsonl"], f"{workdir}/curves.png", labels=[summary["algorithm"]])
    first, last = summary["first"], summary["last"]
    click.echo(f"{summary['algorithm']}: sampled reward {first.get('reward', float('nan')):.3f} -> "
               f"{last.get('reward', float('nan')):.3f}, KL to reference {last.get('kl_ref', float('nan')):.3f}")
    if summary["eval"]:
        e0, e1 = summary["eval"][0], summary["eval"][-1]
        click.echo(f"held-out greedy true reward {e0['reward']:.3f} -> {e1['reward']:.3f}")
        if "sampled_reward" in e0:
            click.echo(f"held-out sampled true reward {e0['sampled_reward']:.3f} -> {e1['sampled_reward']:.3f}")
    if summary["preempted"]:
        click.echo(f"stopped at iteration {summary['iterations']} (signal): rerun the command to resume")
    click.echo(f"model: {summary['model']}\ncurves: {png}")
    click.echo(f"params_sha256: {summary['params_sha256']}")


rl_group.add_command(train_command)
rl_group.add_command(train_command, name="mdloo")  # the command's first name: old invocations work


@click.group("itec")
def itec_group() -> None:
    """iTeC: committee distillation rounds (report §4.3.2)."""


@itec_group.command("round", epilog="""\b
Examples:
  afm itec round --committee sft=runs/sft/best,mdloo=runs/mdloo/model --prompts prompts.jsonl \\
      --rm runs/rm/model --tokenizer tok/ --out runs/itec1
  afm itec round --committee runs/sft/best,runs/mdloo/model --prompts p.jsonl --rm task:arith \\
      --tokenizer tok/ --out runs/itec1 --k 8 --eval-reward task:arith
\b
Writes OUT/sft.jsonl (prompt + the reward's best response per prompt over all members;
input of `afm sft prepare`), OUT/candidates.jsonl and OUT/round.json (wins per member).
""")
@click.option("--committee", required=True, help="NAME=CKPT,NAME=CKPT (or bare checkpoint paths).")
@click.option("--prompts", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--rm", "rm", required=True, help="Reward-model checkpoint, or task:NAME for a program's reward.")
@click.option("--tokenizer", required=True, type=click.Path(exists=True))
@click.option("--out", required=True)
@click.option("--k", type=int, default=4, show_default=True, help="Responses per prompt per member.")
@click.option("--max-new-tokens", type=int, default=48, show_default=True)
@click.option("--temperature", type=POSITIVE, default=1.0, show_default=True)
@click.option("--eval-reward", default="", help="A true reward to report alongside (e.g. task:arith).")
@click.option("--limit", type=int, default=0, help="Use the first N prompts only.")
@click.option("--seed", type=SEED, default=0, show_default=True)
def round_command(committee, prompts, rm, tokenizer, out, k, max_new_tokens, temperature, eval_reward, limit,
                  seed) -> None:
    """One committee-distillation round: sample, rerank per prompt, write an SFT set."""
    from afm.training.runs.itec import RoundConfig, parse_committee, run_round

    try:
        cfg = RoundConfig(prompts=prompts, tokenizer=tokenizer, reward=rm, eval_reward=eval_reward,
                          committee=parse_committee(committee), k=k, max_new_tokens=max_new_tokens,
                          temperature=temperature, seed=seed, prompt_limit=limit, out=out)
        summary = run_round(cfg)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    _print_round(summary)


def _print_round(summary: dict) -> None:
    from afm.console import print_summary

    def of(c: dict) -> str:  # what a true-reward mean rests on, when the reward could not score all
        return "" if c["scored"] == c["of"] else f" (of {c['scored']}/{c['of']} scored)"

    rows = []
    for name, s in summary["members"].items():
        extra = ""
        if "mean_true_reward" in s:
            cov = s["true_reward_coverage"]
            extra = (f", true reward: samples {s['mean_true_reward']:.3f}{of(cov['samples'])}, own best-of-K "
                     f"{s['best_of_k_true_reward']:.3f}{of(cov['best_of_k'])}, greedy "
                     f"{s['greedy_true_reward']:.3f}{of(cov['greedy'])}")
        rows.append((f"member {name}", f"won {s['wins']} ({s['win_rate']:.0%}), reward {s['mean_reward']:.3f}, "
                                       f"{s['cut_replies']} cut at the token limit{extra}"))
    rows.append(("reranked set reward", f"{summary['reranked_mean_reward']:.3f}"))
    if "reranked_true_reward" in summary:
        rows.append(("reranked set true reward",
                     f"{summary['reranked_true_reward']:.3f}{of(summary['reranked_true_reward_coverage'])}"))
        m = summary["smallest_set_margin"]
        rows.append(("set minus closest member", f"{m['mean']:+.3f} +- {m['stderr']:.3f} (paired s.e.; "
                                                 f"{m['member']}, {m['against'].replace('_', ' ')}; "
                                                 f"{m['prompts']} of {m['of']} prompts scored)"))
    rows.append(("SFT dataset", summary["sft_dataset"]))
    print_summary(f"iTeC round {summary['name']}", rows)


@itec_group.command("pairs", epilog="""\b
Examples:
  afm itec pairs --round runs/itec1 --out runs/itec1/pairs.jsonl
  afm itec pairs --round runs/itec1 --out prefs.jsonl --annotate arith --per-prompt 2
""")
@click.option("--round", "round_dir", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", required=True)
@click.option("--per-prompt", type=int, default=1, show_default=True)
@click.option("--annotate", default="", help="A scripted grader (arith) to turn pairs into preferences.")
@click.option("--seed", type=SEED, default=0, show_default=True)
def pairs_command(round_dir, out, per_prompt, annotate, seed) -> None:
    """Export response pairs from a round's committee for the next preference collection."""
    from pathlib import Path

    from afm.training.runs.itec import export_pairs

    try:
        meta = json.loads((Path(round_dir) / "round.json").read_text())
        counts = export_pairs(Path(round_dir) / "candidates.jsonl", meta["config"]["prompts"], out,
                              per_prompt=per_prompt, annotate=annotate, seed=seed)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{counts.get('pairs', 0)} pairs -> {out}" +
               (f" ({counts['skipped_no_distinct_reply']} pair draws skipped: no other member replied differently)"
                if counts.get("skipped_no_distinct_reply") else ""))


@itec_group.command("run", epilog="""\b
Examples:
  afm itec run --config round.yaml
  afm itec run --config round.yaml --set k=8 --set out=runs/itec2
\b
The YAML is a RoundConfig: prompts, tokenizer, reward, committee (name, checkpoint and,
for members to (re)train, train: {algorithm: mdloo|ppo|grpo|dr_grpo|dapo, config: FILE}), k, out,
pairs_per_prompt, annotate. Missing members are trained first, then the round and the pair
export run.
""")
@click.option("--config", "config_file", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--set", "overrides", multiple=True)
def run_command(config_file, overrides) -> None:
    """A whole iTeC round from its config: train missing members, distil, export pairs."""
    from pathlib import Path

    from afm.training.runs.itec import export_pairs, load_round, run_round, train_missing_members

    try:
        cfg = load_round(config_file, list(overrides))
        trained = train_missing_members(cfg)
        summary = run_round(cfg)
        counts = export_pairs(Path(cfg.out) / "candidates.jsonl", cfg.prompts, Path(cfg.out) / "pairs.jsonl",
                              per_prompt=cfg.pairs_per_prompt, annotate=cfg.annotate, seed=cfg.seed)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    if trained:
        click.echo(f"trained: {', '.join(trained)}")
    _print_round(summary)
    click.echo(f"{counts.get('pairs', 0)} pairs -> {Path(cfg.out) / 'pairs.jsonl'}")


COMMANDS = [rl_group, itec_group]
