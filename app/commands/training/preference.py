"""``afm rm train|score|eval`` (the reward model), ``afm dpo`` / ``afm ipo`` (preference
optimisation) and ``afm rm best-of-n`` (rejection sampling). Light imports only."""

from __future__ import annotations

import json

import click

from afm.app.commands.options import FRACTION, POSITIVE, SEED


def _user_errors() -> tuple[type[BaseException], ...]:
    from afm.config import ConfigError
    from afm.training.core.trainer import TrainingDiverged
    from afm.training.data.preferences import PreferenceDataError
    from afm.training.data.shards import DataError

    return (TrainingDiverged, DataError, ConfigError, PreferenceDataError, ValueError, FileNotFoundError)


def _echo_rejects(result: dict) -> None:
    """What each pair input lost and why (the one reader's reasons, every reference mode)."""
    for role, r in (result.get("rejects") or {}).items():
        click.echo(f"{role} pairs: {r['summary']}")


def _quiet_logs() -> None:
    from afm.console import setup_logging

    setup_logging("WARNING")


@click.group("rm", epilog="""\b
Examples:
  afm rm train --config tiny-rm --workdir runs/rm --init-from runs/sft/best \\
      --data prefs/train.jsonl --heldout prefs/heldout.jsonl --tokenizer tok/
  afm rm score --model runs/rm/reward-model --input replies.jsonl --output scored.jsonl
  afm rm eval --model runs/rm/reward-model --heldout prefs/heldout.jsonl
  afm rm best-of-n --policy runs/sft/best --model runs/rm/reward-model \\
      --prompts prompts.jsonl --n 8 --output rs/sft.jsonl
\b
Preference records (JSONL or Parquet): prompt (conversation or string), chosen, rejected,
level (negligibly_better | slightly_better | better | significantly_better) and optional
chosen_grades / rejected_grades (instruction_following, verbosity, truthfulness,
harmlessness: 0/1/2). Bad records are counted as rejects with a reason.
""")
def rm_group() -> None:
    """The reward model (report §4.3, appendix E.1): soft-label Bradley-Terry + grading heads."""


@rm_group.command("train", epilog="""\b
Example:
  afm rm train --config tiny-rm --workdir runs/rm --init-from runs/sft/best \\
      --data prefs/train.jsonl --heldout prefs/heldout.jsonl --tokenizer tok/
""")
@click.option("--config", default="tiny-rm", show_default=True,
              help="A stage (rm, tiny-rm: afm train --list-configs) or YAML file.")
@click.option("--workdir", required=True, help="Run directory; the model is exported to WORKDIR/reward-model.")
@click.option("--init-from", default=None, help="Start from this model (the SFT run / afm.model checkpoint).")
@click.option("--data", multiple=True, required=True, help="Preference file/dir/glob, repeatable.")
@click.option("--heldout", multiple=True, help="Held-out preference data: accuracy by level.")
@click.option("--tokenizer", required=True, help="Tokenizer directory.")
@click.option("--steps", type=int, default=None, help="Stop at this step.")
@click.option("--set", "overrides", multiple=True, help="Config override KEY=VALUE (task_options.lam=0.1, ...).")
def rm_train(config, workdir, init_from, data, heldout, tokenizer, steps, overrides) -> None:
    """Train a reward model on preference pairs."""
    _quiet_logs()
    from afm.preflight import check_data_paths

    check_data_paths(data, config=config, overrides=overrides)
    check_data_paths(heldout, "held-out data", config=config, overrides=overrides, key="eval.heldout")
    from afm.training.runs.train import train

    try:
        out = train(config, workdir, task="reward_model", data=list(data), heldout=list(heldout) or None,
                    init_from=init_from, steps=steps, overrides=list(overrides), task_options={"tokenizer": tokenizer})
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    _echo_rejects(out)
    click.echo(f"reward model: {out['reward_model']}")
    if "heldout" in out:
        click.echo(json.dumps(out["heldout"], indent=2))


@rm_group.command("eval", epilog="""\b
Example:
  afm rm eval --model runs/rm/reward-model --heldout prefs/heldout.jsonl
""")
@click.option("--model", "model_dir", required=True, help="An exported reward model (WORKDIR/reward-model).")
@click.option("--heldout", multiple=True, required=True, help="Preference data.")
@click.option("--tokenizer", default=None, help="Tokenizer (default: the one it was trained with).")
def rm_eval(model_dir, heldout, tokenizer) -> None:
    """Pairwise accuracy overall and by preference level."""
    _quiet_logs()
    from afm.training.rl.reward_model import RewardModelScorer, pairwise_accuracy

    try:
        click.echo(json.dumps(pairwise_accuracy(RewardModelScorer(model_dir, tokenizer), list(heldout)), indent=2))
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc


@rm_group.command("score", epilog="""\b
Example:
  afm rm score --model runs/rm/reward-model --input replies.jsonl --output scored.jsonl
""")
@click.option("--model", "model_dir", required=True, help="An exported reward model.")
@click.option("--input", "input_path", required=True, help="JSONL: {prompt, response} (or messages ending with the reply).")
@click.option("--output", required=True, help="JSONL: the input rows plus reward and gradings.")
@click.option("--tokenizer", default=None)
def rm_score(model_dir, input_path, output, tokenizer) -> None:
    """Reward (and the four gradings) of each (prompt, response) row; bad rows are reported."""
    _quiet_logs()
    from afm.training.data.preferences import GRADES
    from afm.training.rl.reward_model import RewardModelScorer

    rows, prompts, responses, bad = [], [], [], []
    with open(input_path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            try:
                rec = json.loads(line)
                if "messages" in rec and "response" not in rec:
                    prompt, resp = rec["messages"][:-1], rec["messages"][-1]["content"]
                else:
                    prompt, resp = rec["prompt"], rec["response"]
                if isinstance(prompt, str):
                    prompt = [{"role": "user", "content": prompt}]
                if not isinstance(resp, str) or not isinstance(prompt, list):
                    raise ValueError("prompt must be a conversation/string and response a string")
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                bad.append(f"line {n}: {exc}")
                continue
            rows.append(rec)
            prompts.append(prompt)
            responses.append(resp)
    try:
        scorer = RewardModelScorer(model_dir, tokenizer)
        rewards, grades = scorer.score_with_gradings(prompts, responses)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    with open(output, "w", encoding="utf-8") as fh:
        for rec, r, g in zip(rows, rewards, grades, strict=True):
            fh.write(json.dumps({**rec, "reward": float(r), "gradings": dict(zip(GRADES, map(int, g), strict=True))}) + "\n")
    click.echo(f"scored {len(rows)} rows -> {output}; rejected {len(bad)}")
    for b in bad[:10]:
        click.echo(f"  reject {b}", err=True)


@rm_group.command("best-of-n", epilog="""\b
Example:
  afm rm best-of-n --policy runs/sft/best --model runs/rm/reward-model \\
      --prompts prompts.jsonl --n 8 --output rs/sft.jsonl
""")
@click.option("--policy", required=True, help="The policy (afm.model checkpoint) to sample from.")
@click.option("--model", "model_dir", required=True, help="The reward model that picks the best reply.")
@click.option("--prompts", "prompts_path", required=True, help="JSONL with a 'prompt' or 'messages' conversation per line.")
@click.option("--n", type=int, default=8, show_default=True)
@click.option("--max-new-tokens", type=int, default=96, show_default=True)
@click.option("--temperature", type=POSITIVE, default=1.0, show_default=True)
@click.option("--output", required=True, help="SFT JSONL (chat messages) of the best replies.")
@click.option("--seed", type=SEED, default=0)
@click.option("--max-unscored", type=FRACTION, default=0.5, show_default=True,
              help="Stop when the reward cannot score more than this share of the replies.")
def rm_best_of_n(policy, model_dir, prompts_path, n, max_new_tokens, temperature, output, seed, max_unscored) -> None:
    """Rejection sampling: best of N replies per prompt by the reward model -> SFT data."""
    _quiet_logs()
    from afm.model.checkpoints.checkpoint import load_model
    from afm.training.data.prompts import read_prompts
    from afm.training.rl.rejection_sampling import best_of_n, write_sft_rows
    from afm.training.rl.reward_model import RewardModelScorer

    try:
        prompts = read_prompts(prompts_path)  # the one reader: a bad line is one line, with its number
        scorer = RewardModelScorer(model_dir)
        model, _ = load_model(policy, dropout=0.0)
        s = best_of_n(model, scorer.tokenizer, prompts, scorer, n, max_new_tokens=max_new_tokens,
                      temperature=temperature, seed=seed, max_unscored=max_unscored)
    except _user_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    write_sft_rows(output, s.rows)
    click.echo(f"{s.kept}/{s.prompts} prompts kept ({s.no_stopped_reply} without a finished, scored reply; "
               f"{s.cut_replies} replies cut at --max-new-tokens, {s.unscored_replies} unscored); "
               f"mean reward {s.mean_reward:.3f}, best-of-{n} {s.mean_best_reward:.3f}; "
               f"{s.tokens} tokens in {s.seconds:.1f}s ({s.tokens / max(s.seconds, 1e-9):.0f} tok/s) -> {output}")


def _po_command(kind: str) -> click.Command:
    @click.command(kind, epilog=f"""\b
Example:
  afm {kind} --config tiny-{kind} --workdir runs/{kind} --init-from runs/sft/best \\
      --data prefs/train.jsonl --heldout prefs/heldout.jsonl --tokenizer tok/ --beta 0.1
""")
    @click.option("--config", default=f"tiny-{kind}", show_default=True,
                  help=f"A stage ({kind}, tiny-{kind}: afm train --list-configs) or YAML file; runs the {kind} task.")
    @click.option("--workdir", required=True)
    @click.option("--init-from", required=True, help="The SFT model (also the reference).")
    @click.option("--data", multiple=True, required=True)
    @click.option("--heldout", multiple=True)
    @click.option("--tokenizer", required=True)
    @click.option("--beta", type=POSITIVE, default=None, help="KL strength (default 0.1).")
    @click.option("--reference", type=click.Choice(["frozen", "precomputed"]), default=None)
    @click.option("--steps", type=int, default=None)
    @click.option("--set", "overrides", multiple=True)
    def command(config, workdir, init_from, data, heldout, tokenizer, beta, reference, steps, overrides) -> None:
        _quiet_logs()
        from afm.preflight import check_data_paths

        check_data_paths(data, config=config, overrides=overrides)
        check_data_paths(heldout, "held-out data", config=config, overrides=overrides, key="eval.heldout")
        from afm.training.runs.train import train

        try:
            # a reward-model stage works too: its data and model settings, this command's task
            out = train(config, workdir, data=list(data), heldout=list(heldout) or None, init_from=init_from,
                        steps=steps, overrides=[*overrides, f"task={kind}"],
                        task_options={"tokenizer": tokenizer, "beta": beta, "reference": reference})
        except _user_errors() as exc:
            raise click.ClickException(str(exc)) from exc
        _echo_rejects(out)
        click.echo(f"policy: {out['model']}")

    command.help = f"{kind.upper()} on preference pairs (a frozen copy of --init-from is the reference)."
    return command


COMMANDS = [rm_group, _po_command("dpo"), _po_command("ipo")]
