"""``afm ablate``: does a curation choice make a better model? A DCLM-style comparison.

Two corpora (two curate outputs, or two curate configs over one input) -> **one**
tokenizer (trained on both, so neither arm gets a vocabulary fitted to it alone) -> each
corpus tokenized -> the **same** model config, seeds and token budget trained on each (a
corpus smaller than the budget is repeated; the table says how many times) -> ``afm eval``
on the **same** items for every model -> per task and metric, the difference B - A with
its paired standard error over items (the items both models answered, so what is hard for
both cancels), the tokens each corpus kept, a table and a plot.

With several seeds each item's score is first averaged over the seeds of its arm; the
standard error is then over items, and the spread of the task's difference across seeds
is reported beside it (the part of the noise paired items cannot remove).

At ``tiny`` on a CPU this checks the mechanics in minutes; it is not evidence about the
filter (docs/ablation.md gives the budget a meaningful comparison needs).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from afm.errors import UserError


class AblationError(UserError):
    """An ablation that cannot run as asked (an arm without data, mismatched items...)."""


@dataclass
class Arm:
    """One side of the comparison: a curated corpus, or inputs and a curate config."""

    name: str
    corpus: str | None = None  # a curate output directory (documents-*.parquet)
    inputs: list[str] = field(default_factory=list)  # or: curate these ...
    config: Any = None  # ... with this CurateConfig (YAML path or dict)


@dataclass
class AblationSpec:
    """Everything the two arms share."""

    arms: tuple[Arm, Arm]
    workdir: Path
    train_config: str = "tiny-core"
    token_budget: int | None = None  # None: the config's total_steps x batch x sequence
    seeds: tuple[int, ...] = (0,)
    overrides: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ("arc_easy", "piqa", "hellaswag")
    data_dir: str | None = None  # None: the bundled demo items
    limit: int | None = None
    num_fewshot: int = 0
    tokenizer: str | None = None  # an existing tokenizer directory, else one is trained
    vocab_size: int = 512
    curate_args: tuple[str, ...] = ("--direct_running_mode=in_memory", "--direct_num_workers=1")

    def check(self) -> None:
        names = [a.name for a in self.arms]
        if len(set(names)) != 2 or not all(names):
            raise AblationError(f"the two arms need two different, non-empty names, got {names}")
        for arm in self.arms:
            if bool(arm.corpus) == bool(arm.inputs):
                raise AblationError(f"arm {arm.name!r}: give a curated corpus or inputs to curate (one of them)")
        if self.token_budget is not None and self.token_budget < 1:
            raise AblationError(f"token budget must be >= 1, got {self.token_budget}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise AblationError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        if not self.tasks:
            raise AblationError("no tasks to evaluate on")
        if self.limit is not None and self.limit < 1:
            raise AblationError(f"limit must be >= 1, got {self.limit}")


@dataclass
class PairedRow:
    """One (task, metric): both arms' means over the same items and B - A."""

    task: str
    metric: str
    items: int
    a: float
    b: float
    delta: float  # b - a
    se: float  # paired standard error of delta over items
    seed_sd: float | None  # SD of the per-seed differences (None with one seed)

    @property
    def z(self) -> float:
        return self.delta / self.se if self.se > 0 else (0.0 if self.delta == 0 else math.inf)


def paired_difference(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float, float]:
    """(mean a, mean b, mean of b - a, its standard error) over paired items."""
    n = len(a)
    if n != len(b) or n == 0:
        raise AblationError(f"paired items: {len(a)} vs {len(b)}")
    diffs = [y - x for x, y in zip(a, b)]
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1) if n > 1 else 0.0
    return sum(a) / n, sum(b) / n, mean, math.sqrt(var / n)


def _item_means(runs: list[dict[str, Any]], task: str, metric: str) -> tuple[list[int], list[str], list[float]]:
    """Per item (by doc_id), the metric averaged over the seeds' runs of one arm."""
    ids = runs[0]["items"][task]["doc_ids"]
    hashes = runs[0]["items"][task]["doc_hashes"]
    for r in runs[1:]:
        if r["items"][task]["doc_ids"] != ids:
            raise AblationError(f"{task}: the seeds' runs evaluated different items")
    values = [r["items"][task]["metrics"][metric] for r in runs]
    return ids, hashes, [sum(v[i] for v in values) / len(values) for i in range(len(ids))]


def compare_items(runs_a: list[dict[str, Any]], runs_b: list[dict[str, Any]]) -> list[PairedRow]:
    """Every (task, metric) both arms have per-item scores for, paired by item."""
    rows: list[PairedRow] = []
    for task in sorted(runs_a[0].get("items", {})):
        if task not in runs_b[0].get("items", {}):
            continue
        metrics = runs_a[0]["items"][task]["metrics"]
        for metric in metrics:
            if metric not in runs_b[0]["items"][task]["metrics"]:
                continue
            ids_a, hashes_a, a = _item_means(runs_a, task, metric)
            ids_b, hashes_b, b = _item_means(runs_b, task, metric)
            if ids_a != ids_b or hashes_a != hashes_b:
                raise AblationError(f"{task}: the two arms were evaluated on different items")
            mean_a, mean_b, delta, se = paired_difference(a, b)
            seed_sd = None
            if len(runs_a) > 1 and len(runs_a) == len(runs_b):
                per_seed = []
                for ra, rb in zip(runs_a, runs_b):
                    va, vb = ra["items"][task]["metrics"][metric], rb["items"][task]["metrics"][metric]
                    per_seed.append(sum(vb) / len(vb) - sum(va) / len(va))
                m = sum(per_seed) / len(per_seed)
                seed_sd = math.sqrt(sum((x - m) ** 2 for x in per_seed) / (len(per_seed) - 1))
            rows.append(PairedRow(task, metric, len(a), mean_a, mean_b, delta, se, seed_sd))
    return rows


# ------------------------------------------------------------------------------------- driver


def _curate(arm: Arm, out: Path, spec: AblationSpec) -> str:
    from afm.pipelines.curate.pipeline import run_curate

    run_curate(list(arm.inputs), out, config=arm.config, pipeline_args=list(spec.curate_args),
               quiet=True, command=f"curate ({arm.name})")
    return str(out)


def _tokens_per_step(spec: AblationSpec) -> tuple[int, int | None]:
    from afm.training.core.config import get_train_config

    cfg = get_train_config(spec.train_config, list(spec.overrides))
    return int(cfg.data.global_batch_size) * int(cfg.data.seq_len), cfg.total_steps


def run_ablation(spec: AblationSpec, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the comparison into ``spec.workdir``; returns (and writes as
    ``ablation.json``) the arms, the paired rows, and the paths of the table and plot."""
    from afm.evaluation.runner import EvalSpec, run_eval
    from afm.evaluation.suite import prepare_demo_data
    from afm.model.text.tokenizer import train_tokenizer
    from afm.pipelines.tokenize import run_tokenize
    from afm.training.runs.train import train

    spec.check()
    root = Path(spec.workdir)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    per_step, total_steps = _tokens_per_step(spec)
    budget = spec.token_budget or per_step * int(total_steps or 0)
    if budget < per_step:
        raise AblationError(f"token budget {budget} is under one step ({per_step} tokens: batch x sequence)")
    steps = math.ceil(budget / per_step)

    corpora: dict[str, str] = {}
    for arm in spec.arms:
        if arm.corpus:
            if not (Path(arm.corpus) / "_SUCCESS").exists():
                raise AblationError(f"arm {arm.name!r}: {arm.corpus} is no finished curate output (no _SUCCESS)")
            corpora[arm.name] = arm.corpus
        else:
            log(f"curating arm {arm.name!r}")
            corpora[arm.name] = _curate(arm, root / arm.name / "corpus", spec)

    tokenizer = spec.tokenizer
    if tokenizer is None:
        log("training one tokenizer on both corpora")
        tokenizer = str(train_tokenizer(list(corpora.values()), root / "tokenizer", vocab_size=spec.vocab_size))

    data_dir = spec.data_dir or prepare_demo_data(root / "eval-data")
    arms_out: dict[str, dict[str, Any]] = {}
    runs: dict[str, list[dict[str, Any]]] = {}
    for arm in spec.arms:
        log(f"tokenizing arm {arm.name!r}")
        tokens_dir = root / arm.name / "tokens"
        manifest = run_tokenize([corpora[arm.name]], tokenizer, tokens_dir, overwrite=True)
        if not manifest["tokens"]:
            raise AblationError(f"arm {arm.name!r}: its corpus has no tokens to train on")
        info: dict[str, Any] = {"corpus": corpora[arm.name], "documents": manifest["documents"],
                                "tokens": manifest["tokens"], "epochs": budget / manifest["tokens"],
                                "seeds": {}}
        runs[arm.name] = []
        for seed in spec.seeds:
            log(f"training arm {arm.name!r}, seed {seed}: {steps} steps ({steps * per_step:,} tokens)")
            run_dir = root / arm.name / f"train-seed{seed}"
            result = train(spec.train_config, run_dir, steps=steps, data=[str(tokens_dir)],
                           overrides=[*spec.overrides, f"seed={seed}"], quiet=True)
            ckpt = result.get("model_checkpoint") or result.get("checkpoint")
            if not ckpt:
                raise AblationError(f"arm {arm.name!r}, seed {seed}: training wrote no checkpoint")
            log(f"evaluating arm {arm.name!r}, seed {seed}")
            try:
                evaluated = run_eval(EvalSpec(checkpoint=str(ckpt), tokenizer=tokenizer, tasks=list(spec.tasks),
                                              num_fewshot=spec.num_fewshot, data_dir=data_dir, limit=spec.limit,
                                              item_scores=True, show_progress=False))
            except ValueError as exc:  # e.g. an item longer than the model's window
                raise AblationError(f"evaluating arm {arm.name!r}, seed {seed}: {exc} (choose tasks whose "
                                    "items fit the model, or a larger model / vocabulary)") from exc
            from afm.evaluation.results import write_results

            write_results(evaluated, run_dir / "eval.json")
            runs[arm.name].append(evaluated)
            info["seeds"][seed] = {"final_loss": result.get("final_loss"), "checkpoint": str(ckpt),
                                   "eval": str(run_dir / "eval.json")}
        arms_out[arm.name] = info

    a, b = (arm.name for arm in spec.arms)
    rows = compare_items(runs[a], runs[b])
    result: dict[str, Any] = {
        "arms": {"a": a, "b": b, **arms_out},
        "settings": {"train_config": spec.train_config, "overrides": list(spec.overrides),
                     "seeds": list(spec.seeds), "token_budget": steps * per_step, "steps": steps,
                     "tokens_per_step": per_step, "tasks": list(spec.tasks), "data_dir": data_dir,
                     "limit": spec.limit, "num_fewshot": spec.num_fewshot, "tokenizer": tokenizer},
        "rows": [asdict(r) | {"z": r.z} for r in rows],
        "seconds": round(time.perf_counter() - started, 1),
    }
    result["table"] = str(write_markdown(result, root / "ablation.md"))
    plot = plot_ablation(result, root / "ablation.png")
    result["plot"] = str(plot) if plot else None
    (root / "ablation.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result


# ------------------------------------------------------------------------------------- output


SCALE_NOTE = ("At this scale the numbers test the mechanics, not the filter: a tiny model on a "
              "small corpus is close to chance on every task (docs/ablation.md: the budget a "
              "meaningful comparison needs).")


def table_lines(result: dict[str, Any]) -> list[str]:
    """The comparison as Markdown: the arms (tokens kept, repeats), then one row per
    (task, metric) with B - A and its paired standard error."""
    arms, settings = result["arms"], result["settings"]
    a, b = arms["a"], arms["b"]
    lines = [f"A = {a}, B = {b}; {settings['train_config']}, {settings['token_budget']:,} training tokens "
             f"each ({settings['steps']} steps), seeds {settings['seeds']}", "",
             "| arm | documents kept | tokens kept | times repeated to fill the budget |",
             "|---|---:|---:|---:|"]
    for name in (a, b):
        arm = arms[name]
        lines.append(f"| {name} | {arm['documents']:,} | {arm['tokens']:,} | {arm['epochs']:.2f} |")
    seeds = len(settings["seeds"]) > 1
    lines += ["", "| task | metric | items | A | B | B - A | paired SE | z |" + (" seed SD |" if seeds else ""),
              "|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if seeds else "")]
    for r in result["rows"]:
        extra = f" {r['seed_sd']:.4f} |" if seeds and r["seed_sd"] is not None else (" |" if seeds else "")
        lines.append(f"| {r['task']} | {r['metric']} | {r['items']} | {r['a']:.4f} | {r['b']:.4f} | "
                     f"{r['delta']:+.4f} | {r['se']:.4f} | {r['z']:+.2f} |{extra}")
    lines += ["", SCALE_NOTE]
    return lines


def write_markdown(result: dict[str, Any], path: Path) -> Path:
    path.write_text("\n".join(table_lines(result)) + "\n")
    return path


def plot_ablation(result: dict[str, Any], path: Path) -> Path | None:
    """Left: B - A per (task, metric) with 95% intervals (1.96 paired SE); right: the
    tokens each corpus kept. None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = result["rows"]
    a, b = result["arms"]["a"], result["arms"]["b"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 0.45 * max(len(rows), 4) + 1.5),
                                  gridspec_kw={"width_ratios": [3, 1]})
    labels = [f"{r['task']} {r['metric'].split(',')[0]}" for r in rows]
    ys = list(range(len(rows)))
    deltas = [r["delta"] for r in rows]
    errs = [1.96 * r["se"] for r in rows]
    colors = ["tab:green" if d - e > 0 else "tab:red" if d + e < 0 else "tab:gray" for d, e in zip(deltas, errs)]
    ax.barh(ys, deltas, xerr=errs, color=colors, alpha=0.8, capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"B - A  (B = {b}, A = {a}); bars: 95% paired interval over items")
    ax.set_title(f"{result['settings']['train_config']}, {result['settings']['token_budget']:,} tokens per arm")
    kept = [result["arms"][a]["tokens"], result["arms"][b]["tokens"]]
    ax2.bar(["A", "B"], kept, color=["tab:blue", "tab:orange"])
    ax2.set_title("tokens kept")
    for i, v in enumerate(kept):
        ax2.text(i, v, f"{v:,}", ha="center", va="bottom", fontsize=8)
    fig.text(0.01, 0.005, SCALE_NOTE if result["settings"]["train_config"].startswith("tiny") else "",
             fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["AblationError", "AblationSpec", "Arm", "PairedRow", "compare_items", "paired_difference",
           "plot_ablation", "run_ablation", "table_lines", "write_markdown"]
