"""iTeC: iterative teaching committee (report §4.3.2, SPEC 4).

A round: every committee member (SFT, rejection sampling, DPO, IPO, online-RL models,
previous rounds' bests) samples ``K`` responses per prompt; the reward model scores all
``members x K`` candidates and the best one *per prompt* goes into a new SFT dataset
(committee distillation), whichever member wrote it. The round records which member won
how often, and exports response pairs from the committee for the next round of preference
collection (annotated at once when a scripted grader exists, e.g. the arithmetic task).

Outputs of :func:`run_round` in ``out/``:

* ``candidates.jsonl`` -- every response: prompt index, member, reward (``null`` where the
  reward could not score it), why it stopped (``end_of_turn``, ``end_of_text``, ``length``)
  and the true reward when an ``eval_reward`` is given;
* ``sft.jsonl`` -- the distilled dataset: one ``{"id", "messages"}`` conversation per prompt
  (prompt + the best *finished* response: a reply cut at ``max_new_tokens`` never wins, so
  no truncated reply becomes a complete turn: ``afm.finish``), the chat JSONL that ``afm sft
  prepare`` reads;
* ``round.json`` -- wins per member, mean reward per member and of the reranked set, the
  replies cut at the token limit (``cut_replies``, per member and in all), and the round's
  config (so it can be re-run).

:class:`RoundConfig` is the whole round as YAML: the prompts, the reward, the committee and,
per member, how it is (re)trained (``train: {algorithm: mdloo|ppo|grpo|dr_grpo|dapo, config: FILE}``) when its
checkpoint does not exist yet, so ``afm itec run --config round.yaml`` re-runs everything.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from afm.config import ConfigError, load_config, read_yaml
from afm.finish import STAT, is_cut
from afm.model.checkpoints.checkpoint import load_model
from afm.model.text.tokenizer import Tokenizer
from afm.synth.arith_task import preference_record
from afm.training.data.prompts import read_prompts
from afm.training.rl.objectives import ALGORITHMS as ONLINE_RL
from afm.training.rl.rewards import check_unscored, load_reward, score_responses
from afm.training.rl.rollout import sample_groups
from afm.training.runs.train import train


@dataclass
class MemberTrain:
    """How a member is produced: ``algorithm`` (an online-RL algorithm: mdloo, ppo, grpo,
    dr_grpo or dapo, ``afm rl train``) and its config file."""

    algorithm: str = ""
    config: str = ""
    workdir: str = ""


@dataclass
class Member:
    name: str = ""
    checkpoint: str = ""
    train: MemberTrain = field(default_factory=MemberTrain)


@dataclass
class RoundConfig:
    """One iTeC round (``afm itec run --config FILE``)."""

    name: str = "itec-round"
    prompts: str = ""
    tokenizer: str = ""
    reward: str = ""  # a reward-model checkpoint or task:NAME
    eval_reward: str = ""  # the true reward, for reporting only (e.g. task:arith)
    committee: list[Member] = field(default_factory=list)
    k: int = 4
    max_new_tokens: int = 48
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    prompt_limit: int = 0
    out: str = ""
    pairs_per_prompt: int = 1
    annotate: str = ""  # a scripted grader (arith) that turns the exported pairs into preferences
    max_unscored: float = 0.5  # stop when the reward cannot score more than this share of a member's replies


def parse_committee(spec: str) -> list[Member]:
    """``NAME=CKPT,NAME2=CKPT2`` or bare checkpoint paths (named by their directory)."""
    members = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, _, path = item.partition("=") if "=" in item else ("", "", item)
        path = path or item
        name = name or (Path(path).name if Path(path).name not in ("model", "best") else Path(path).parent.name)
        members.append(Member(name=name, checkpoint=path))
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        raise ConfigError(f"committee member names must differ: {names} (use NAME=PATH)")
    if not members:
        raise ConfigError("the committee is empty")
    return members


def load_round(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RoundConfig:
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return load_config(RoundConfig, data, overrides)


def train_missing_members(cfg: RoundConfig, *, progress: bool = True) -> list[str]:
    """Train every member whose checkpoint is missing from its ``train`` spec; the names trained."""

    trained = []
    for m in cfg.committee:
        if Path(m.checkpoint, "config.json").exists():
            continue
        algo = m.train.algorithm
        if not algo:
            raise ConfigError(f"member {m.name!r}: checkpoint {m.checkpoint} is missing and it has no train spec")
        if algo in ONLINE_RL:  # mdloo, ppo, grpo, dr_grpo, dapo: afm rl train
            workdir = m.train.workdir or str(Path(m.checkpoint).parent)
            summary = train(m.train.config, workdir, task="mdloo", require_task="mdloo",
                            task_options={"algorithm": algo}, quiet=not progress)["summary"]
            if Path(summary["model"]).resolve() != Path(m.checkpoint).resolve():
                raise ConfigError(f"member {m.name!r}: training wrote {summary['model']}, the round expects "
                                  f"{m.checkpoint} (set checkpoint to WORKDIR/model)")
        else:
            raise ConfigError(f"member {m.name!r}: training algorithm {algo!r} is not driven by iTeC in this build; "
                              "train it with its own command and give its checkpoint")
        trained.append(m.name)
    return trained


def _mean(values: Any) -> float:
    """Mean of the finite values (NaN marks what a reward could not score), NaN if none."""
    x = np.asarray(values, np.float64)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else float("nan")


def _coverage(values: Any) -> dict[str, int]:
    """How many of the values a mean of :func:`_mean` rests on, of how many: a column that
    averages what could be scored says how much could not."""
    x = np.asarray(values, np.float64)
    return {"scored": int(np.isfinite(x).sum()), "of": int(x.size)}


def paired_margin(set_reward: np.ndarray, member_reward: np.ndarray) -> dict[str, float]:
    """Mean per-prompt difference (reranked set minus a member alone) and its standard
    error: both are scored on the same prompts, so the paired error is the honest one."""
    d = np.asarray(set_reward, np.float64) - np.asarray(member_reward, np.float64)
    prompts = int(d.size)
    d = d[np.isfinite(d)]  # a prompt the true reward could not score has no difference
    if not d.size:
        return {"mean": float("nan"), "stderr": float("nan"), "prompts": 0, "of": prompts}
    se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    return {"mean": float(d.mean()), "stderr": se, "prompts": int(d.size), "of": prompts}


def run_round(cfg: RoundConfig, *, reward_fn: Any = None, eval_reward_fn: Any = None,
              progress: bool = True) -> dict[str, Any]:
    """Sample, rerank per prompt, write the distilled SFT set; see the module docstring."""

    if not cfg.committee:
        raise ConfigError("the committee is empty")
    if not cfg.out:
        raise ConfigError("the round needs an output directory (out)")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    prompts = read_prompts(cfg.prompts, cfg.prompt_limit or None)
    tok = Tokenizer.load(cfg.tokenizer)
    reward = reward_fn or load_reward(cfg.reward)
    truth = eval_reward_fn or (load_reward(cfg.eval_reward) if cfg.eval_reward else None)
    n, k = len(prompts), cfg.k
    texts: dict[str, list[str]] = {}
    scores: dict[str, np.ndarray] = {}
    usable: dict[str, np.ndarray] = {}
    reasons: dict[str, list[str]] = {}
    true: dict[str, np.ndarray] = {}
    greedy_true: dict[str, np.ndarray] = {}
    speed: dict[str, float] = {}
    for i, m in enumerate(cfg.committee):
        model, _ = load_model(m.checkpoint)
        roll = sample_groups(model, tok, prompts, k=k, max_new_tokens=cfg.max_new_tokens,
                             temperature=cfg.temperature, top_p=cfg.top_p, seed=cfg.seed * 1009 + i)
        texts[m.name], reasons[m.name] = roll.texts, roll.stop_reasons
        finished = roll.finished()
        batch = score_responses(reward, roll.group_prompts(), roll.texts, stopped=finished)
        check_unscored(batch, cfg.max_unscored, reward=reward, where=f"of member {m.name}",
                       option="max_unscored in the round config")
        scores[m.name] = batch.scores.reshape(n, k)
        # Only a finished, scored, non-empty reply may win: a reply cut at the token limit
        # would enter the SFT set as a complete turn.
        usable[m.name] = (finished & batch.scored & np.asarray([bool(t) for t in roll.texts])).reshape(n, k)
        if truth is not None:
            true[m.name] = score_responses(truth, roll.group_prompts(), roll.texts, finished).scores.reshape(n, k)
            # The member alone at its most likely: one greedy reply per prompt.
            greedy = sample_groups(model, tok, prompts, k=1, max_new_tokens=cfg.max_new_tokens, temperature=0.0)
            greedy_true[m.name] = score_responses(truth, greedy.group_prompts(), greedy.texts,
                                                  greedy.finished()).scores
        speed[m.name] = roll.tokens_per_second
        if progress:
            cut = int((~finished).sum())
            print(f"member {m.name}: {n * k} responses ({cut} cut at max_new_tokens, "
                  f"{int((~batch.scored).sum())} unscored), mean reward {_mean(batch.scores):.3f}, "
                  f"{roll.tokens_per_second:.0f} tok/s", flush=True)

    names = [m.name for m in cfg.committee]
    eligible = np.stack([usable[nm] for nm in names], axis=1).reshape(n, -1)  # [n, M * k]
    flat = np.where(eligible, np.stack([scores[nm] for nm in names], axis=1).reshape(n, -1), -np.inf)
    # Ties (common with a coarse task reward) are broken at random, not by committee order,
    # so the win counts do not favour whichever member is listed first.
    tie_rng = np.random.default_rng(cfg.seed)
    best = np.array([tie_rng.choice(np.flatnonzero(row == row.max())) for row in flat])
    ties = int(sum((row == row.max()).sum() > 1 for row in flat if np.isfinite(row.max())))
    wins: Counter[str] = Counter()
    chosen_true = []
    without = 0
    with (out / "sft.jsonl").open("w", encoding="utf-8") as sft, \
            (out / "candidates.jsonl").open("w", encoding="utf-8") as cand:
        for p in range(n):
            for nm in names:
                for j in range(k):
                    value = scores[nm][p, j]
                    row = {"prompt_index": p, "member": nm, "sample": j, "response": texts[nm][p * k + j],
                           "reward": float(value) if np.isfinite(value) else None,
                           "stop_reason": reasons[nm][p * k + j]}
                    if truth is not None:
                        t = true[nm][p, j]
                        row["true_reward"] = float(t) if np.isfinite(t) else None
                    cand.write(json.dumps(row, ensure_ascii=False) + "\n")
            if not np.isfinite(flat[p].max()):
                without += 1  # no member finished a scorable reply to this prompt
                continue
            mi, j = divmod(int(best[p]), k)
            nm = names[mi]
            wins[nm] += 1
            if truth is not None:
                chosen_true.append(float(true[nm][p, j]))
            sft.write(json.dumps({
                "id": f"{cfg.name}-{p}", "source": cfg.name, "member": nm, "reward": float(scores[nm][p, j]),
                "messages": [*prompts[p], {"role": "assistant", "content": texts[nm][p * k + j]}],
            }, ensure_ascii=False) + "\n")
    members: dict[str, Any] = {}
    kept = [p for p in range(n) if np.isfinite(flat[p].max())]
    for nm in names:
        stats: dict[str, Any] = {"wins": wins[nm], "win_rate": wins[nm] / n,
                                 "mean_reward": _mean(scores[nm]), "tokens_per_second": speed[nm],
                                 "stop_reasons": dict(Counter(reasons[nm])),
                                 STAT: int(sum(is_cut(r) for r in reasons[nm]))}
        if truth is not None:
            t = true[nm]
            own = np.where(usable[nm], scores[nm], -np.inf).argmax(1)
            # The member alone, three ways: greedy, a sample, its own best-of-K by the same
            # reward (among its finished replies: NaN where it has none, like the set).
            alone = {"greedy": greedy_true[nm], "mean_of_samples": np.asarray([_mean(row) for row in t]),
                     "own_best_of_k": np.where(usable[nm].any(1), t[np.arange(n), own], np.nan)}
            stats["mean_true_reward"] = _mean(t)
            stats["greedy_true_reward"] = _mean(alone["greedy"])
            stats["best_of_k_true_reward"] = _mean(alone["own_best_of_k"])
            # what each of those means rests on (the true reward leaves unscored replies NaN)
            stats["true_reward_coverage"] = {"samples": _coverage(t), "greedy": _coverage(alone["greedy"]),
                                             "best_of_k": _coverage(alone["own_best_of_k"])}
            stats["set_margin"] = {way: paired_margin(np.asarray(chosen_true), per_prompt[kept])
                                   for way, per_prompt in alone.items()}
        members[nm] = stats
    summary: dict[str, Any] = {
        "name": cfg.name, "prompts": n, "k": k, "members": members,
        "reranked_mean_reward": float(flat[kept].max(axis=1).mean()) if kept else float("nan"),
        "prompts_with_tied_best": ties, "prompts_without_a_finished_reply": without,
        # replies that stopped for length: never a candidate for the SFT set (afm.finish)
        STAT: int(sum(members[nm][STAT] for nm in names)),
        "sft_dataset": str(out / "sft.jsonl"), "candidates": str(out / "candidates.jsonl"),
        "config": asdict(cfg),
    }
    if truth is not None and chosen_true:
        summary["reranked_true_reward"] = _mean(chosen_true)
        summary["reranked_true_reward_coverage"] = {**_coverage(chosen_true), "prompts": n}
        # Does the reranked set beat each member alone, and by how much at the closest?
        margins = [(nm, way, m) for nm in names for way, m in members[nm]["set_margin"].items()]
        nm, way, m = min(margins, key=lambda x: x[2]["mean"])
        summary["smallest_set_margin"] = {"member": nm, "against": way, **m}
    (out / "round.json").write_text(json.dumps(summary, indent=2))
    return summary


def export_pairs(candidates: str | Path, prompts_path: str | Path, out: str | Path, *,
                 per_prompt: int = 1, annotate: str = "", seed: int = 0) -> dict[str, int]:
    """Response pairs for the next preference collection: per prompt, ``per_prompt`` pairs
    of responses from two *different* members (the committee's diversity is the point),
    the first drawn from the top-rewarded half. Without ``annotate`` a row is
    ``{"prompt", "response_a", "response_b", "member_a", "member_b"}`` for annotators; with
    ``annotate="arith"`` the scripted grader turns it into a preference record
    (``afm.training.data.preferences`` format)."""

    prompts = read_prompts(str(prompts_path))
    by_prompt: dict[int, list[dict[str, Any]]] = {}
    with open(candidates, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            by_prompt.setdefault(int(row["prompt_index"]), []).append(row)
    grader = None
    if annotate == "arith":
        grader = preference_record
    elif annotate:
        raise ConfigError(f"unknown grader {annotate!r} (known: arith)")
    rng = random.Random(seed)
    counts = Counter({"pairs": 0, STAT: 0, "skipped_unscored": 0})
    with open(out, "w", encoding="utf-8") as fh:
        for p, rows in sorted(by_prompt.items()):
            if p >= len(prompts):
                raise ConfigError(f"candidate prompt_index {p} but only {len(prompts)} prompts in {prompts_path}")
            # A reply cut at the token limit (afm.finish) or left unscored is no candidate for a preference.
            finished = [r for r in rows if not is_cut(r.get("stop_reason"))]
            counts[STAT] += len(rows) - len(finished)
            rows = [r for r in finished if r["reward"] is not None]
            counts["skipped_unscored"] += len(finished) - len(rows)
            if not rows:
                continue
            rows = sorted(rows, key=lambda r: -r["reward"])
            for _ in range(per_prompt):
                a = rng.choice(rows[: max(1, len(rows) // 2)])
                others = [r for r in rows if r["member"] != a["member"] and r["response"] != a["response"]]
                if not others:
                    counts["skipped_no_distinct_reply"] += 1
                    continue
                b = rng.choice(others)
                if grader is not None:
                    rec = grader(prompts[p], a["response"], b["response"], record_id=f"pair-{p}-{counts['pairs']}")
                    rec["members"] = {"chosen": a["member"] if rec["chosen"] == a["response"] else b["member"],
                                      "rejected": b["member"] if rec["chosen"] == a["response"] else a["member"]}
                else:
                    rec = {"id": f"pair-{p}-{counts['pairs']}", "prompt": prompts[p], "response_a": a["response"],
                           "response_b": b["response"], "member_a": a["member"], "member_b": b["member"]}
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                counts["pairs"] += 1
    return dict(counts)


__all__ = ["Member", "MemberTrain", "RoundConfig", "export_pairs", "load_round", "paired_margin", "parse_committee",
           "run_round", "train_missing_members"]
