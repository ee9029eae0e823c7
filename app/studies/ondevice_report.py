"""The pruning / distillation ablation as a table and a plot (``afm prune report``).

Reads the runs of a Table-6-style ablation (``experiments/on-device-ablation/run.sh``): each run's
``metrics.jsonl`` (the trainer's held-out loss every ``eval.every_steps``) and, when
present, its ``afm eval`` results file (the task group's accuracies and the held-out
per-token NLL over whole documents). The controls for the learned masks
(``prune-random-<seed>``, ``prune-magnitude``: students from the same teacher's units
chosen at random or by magnitude) get a row each after "Prune", and with several random
seeds a row of their mean. Writes ``ablation.md`` (the table) and
``ablation.png`` (held-out loss against training step, one curve per student, the
teacher's final loss as a line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from afm.training.core.metrics import read_metrics

# run directory -> (label, start, targets, relative compute), in the order of Table 6; the
# controls for the learned masks (afm prune apply --method random|magnitude) follow "Prune":
# RANDOM_PREFIX<seed> for each seed present, then their mean, then the magnitude control.
RUNS = {
    "baseline": ("Baseline", "scratch", "labels", "1x"),
    "prune-only": ("Prune", "pruned teacher", "labels", "1x"),
    "prune-magnitude": ("Prune: magnitude units", "pruned teacher, largest-L2 units", "labels", "1x"),
    "distill-only": ("Distill", "scratch", "0.9 top-1 + 0.1 label", "1x"),
    "both": ("Both", "pruned teacher", "0.9 top-1 + 0.1 label", "1x"),
    "baseline-1.5x": ("Baseline 1.5x", "scratch", "labels", "1.5x"),
    "teacher": ("Teacher (3x FFN)", "scratch", "labels", "-"),
}
RANDOM_PREFIX = "prune-random-"
# a student run -> the pruned checkpoint it started from (afm prune apply --out runs/<start>)
STARTS = {"prune-only": "pruned", "both": "pruned", "prune-magnitude": "pruned-magnitude"}
LOSS = "eval/heldout/loss"
ACCURACY = "eval/heldout/accuracy"


def heldout_curve(run: Path, key: str = LOSS) -> list[tuple[int, float]]:
    """``(step, value)`` of every evaluation of a run: the held-out label loss (``key=LOSS``,
    for distilled runs too: their evaluation scores the labels) or next-token accuracy."""
    return [(int(r["step"]), float(r[key])) for r in read_metrics(run) if key in r]


def eval_summary(path: Path) -> dict[str, float]:
    """Primary metric per task and the held-out NLL per token of an ``afm eval`` file."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    out: dict[str, float] = {}
    for task, entry in data.get("tasks", {}).items():
        metric = entry.get("primary")
        if metric and not entry.get("parent") and not entry.get("group"):
            out[task] = float(entry["metrics"][metric]["value"])
    if data.get("perplexity"):
        out["nll"] = float(data["perplexity"]["nll"])
    return out


def run_specs(runs: Path) -> list[tuple[str, str, str, str, str]]:
    """``(directory, label, start, targets, compute)`` of the table's rows in order: the
    fixed runs of :data:`RUNS`, with one row per random-pruning seed (``prune-random-<seed>``
    directories under ``runs``, by seed) placed after "Prune"."""
    seeds = sorted(int(d.name[len(RANDOM_PREFIX):]) for d in runs.glob(RANDOM_PREFIX + "*")
                    if d.name[len(RANDOM_PREFIX):].isdigit())
    specs = []
    for name, spec in RUNS.items():
        specs.append((name, *spec))
        if name == "prune-only":
            specs += [(f"{RANDOM_PREFIX}{s}", f"Prune: random units (seed {s})", "pruned teacher, random units", "labels",
                       "1x") for s in seeds]
    return specs


def _mean_row(rows: list[dict[str, Any]], label: str, keys: list[str]) -> dict[str, Any]:
    """The mean over ``rows`` (several seeds of one control) of every numeric column all of
    them have; the seeds' own rows stay in the table beside it."""
    first = rows[0]
    out: dict[str, Any] = {**{k: first[k] for k in ("start", "targets", "compute", "steps")}, "run": label,
                           "dir": "mean"}
    for key in keys:
        values = [r.get(key) for r in rows]
        out[key] = sum(values) / len(values) if all(v is not None for v in values) else None
    return out


def start_of(name: str) -> str | None:
    """The pruned checkpoint a student run started from (``pruned``, ``pruned-random-<seed>``,
    ``pruned-magnitude``), or None for a run from scratch."""
    if name.startswith(RANDOM_PREFIX):
        return "pruned-" + name[len("prune-"):]
    return STARTS.get(name)


def build_report(runs: Path, evals: Path, out: Path, start_evals: Path | None = None) -> dict[str, Any]:
    """Write ``out/ablation.md`` and ``out/ablation.png``; returns the table rows. With
    ``start_evals`` (``afm eval`` files of the pruned checkpoints, ``<start>.json``), a
    column of each pruned start's held-out NLL before any student step: how much the choice
    of units matters before training recovers from it."""
    rows, curves, accuracy, tasks, labels = [], {}, {}, [], {}
    for name, label, start, targets, compute in run_specs(runs):
        run = runs / name
        if not (run / "metrics.jsonl").exists():
            continue
        labels[name] = label
        curve = heldout_curve(run)
        curves[name] = curve
        accuracy[name] = heldout_curve(run, ACCURACY)
        ev = eval_summary(evals / f"{name}.json")
        start_file = start_evals / f"{start_of(name)}.json" if start_evals and start_of(name) else None
        if start_file is not None and start_file.is_file():
            ev["start_nll"] = eval_summary(start_file)["nll"]
        tasks += [t for t in ev if t not in ("nll", "start_nll") and t not in tasks]
        rows.append({"run": label, "dir": name, "start": start, "targets": targets, "compute": compute,
                     "steps": curve[-1][0] if curve else None, "heldout_loss": curve[-1][1] if curve else None,
                     "heldout_accuracy": accuracy[name][-1][1] if accuracy[name] else None, **ev})
    if not rows:
        raise FileNotFoundError(f"no ablation runs (metrics.jsonl) under {runs}")
    seeds = [r for r in rows if r["dir"].startswith(RANDOM_PREFIX)]
    if len(seeds) > 1:
        at = rows.index(seeds[-1]) + 1
        rows.insert(at, _mean_row(seeds, f"Prune: random units (mean of {len(seeds)} seeds)",
                                  ["heldout_loss", "heldout_accuracy", "nll", "start_nll", *tasks]))
    out.mkdir(parents=True, exist_ok=True)
    starts = ["start's NLL/token"] if start_evals is not None else []
    head = ["run", "start", "targets", "compute", "steps", *starts, "held-out loss", "held-out top-1 acc",
            "held-out NLL/token", *tasks, "task mean"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        accs = [r[t] for t in tasks if r.get(t) is not None]
        mean = sum(accs) / len(accs) if accs else None
        cells = [r["run"], r["start"], r["targets"], r["compute"], str(r["steps"]),
                 *[_fmt(r.get("start_nll")) for _ in starts], _fmt(r["heldout_loss"]),
                 _fmt(r["heldout_accuracy"]), _fmt(r.get("nll")), *[_fmt(r.get(t), 3) for t in tasks], _fmt(mean, 3)]
        lines.append("| " + " | ".join(cells) + " |")
    (out / "ablation.md").write_text("\n".join(lines) + "\n")
    _plot({"held-out loss (nats/token)": curves, "held-out next-token accuracy": accuracy}, labels,
          out / "ablation.png")
    return {"rows": rows, "table": str(out / "ablation.md"), "plot": str(out / "ablation.png")}


def _fmt(x: float | None, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _plot(panels: dict[str, dict[str, list[tuple[int, float]]]], labels: dict[str, str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2))
    for ax, (ylabel, curves) in zip(axes, panels.items(), strict=True):
        ax.set_prop_cycle(color=plt.cm.tab20.colors)  # more curves than the default 10 colours
        for name, curve in curves.items():
            if name == "teacher" or not curve:
                continue
            steps, values = zip(*curve, strict=True)
            ax.plot(steps, values, marker=".", label=labels[name],
                    linestyle=":" if name.startswith(RANDOM_PREFIX) or name == "prune-magnitude" else "-")
        if curves.get("teacher"):
            ax.axhline(curves["teacher"][-1][1], color="grey", linestyle="--", label="teacher (final)")
        ax.set_xlabel("training step (16 x 128 tokens)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Students of one size: scratch / pruned start (learned, random, magnitude units) x labels / top-1")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["build_report", "eval_summary", "heldout_curve", "run_specs", "start_of"]
