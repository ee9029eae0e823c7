"""``afm sft sweep``: tune the SFT mixture by perturbing one weight at a time (report §4.2).

The report treats the mixture weights ``(w_1 .. w_n)`` as an optimisation problem: train
with ``w_i -> w_i +/- delta_i`` and evaluate the change on benchmarks. Here each run is a
short SFT run on the same budget, seed, data order and initial checkpoint as the
baseline, differing only in one weight (the others keep their values; the loader
renormalises), so the comparison is paired: the difference is the weight's effect plus
the noise of a different draw sequence, not of a different initialisation. A weight
taken to 0 (``delta = 1``) removes the component, which is how the report finds "the
least impactful data components".

Output in ``OUT``: ``sweep.json`` (every run: weights, metric, change vs the baseline,
whether it helped), ``sweep.png`` (the change per dataset and direction) and a table on
the console. At tiny budgets the noise between two runs can be as large as a weight's
effect: repeat with another ``--seed`` before acting on a small difference.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from afm.training.core.config import get_train_config
from afm.training.runs.train import train


def base_weights(cfg: Any) -> dict[str, float]:
    """The mixture the baseline trains with (configured weights, else natural proportions)."""
    from afm.training.data.shards import ShardIndex, expand_paths, mixture_weights

    index = ShardIndex(expand_paths(cfg.data.paths), cfg.data.open_files)
    return mixture_weights(index.documents, cfg.data.weights)


def perturbations(weights: dict[str, float], delta: float, only: list[str] | None = None
                  ) -> list[tuple[str, str, dict[str, float]]]:
    """``(dataset, "+"|"-", weights)`` for every dataset (or those in ``only``)."""
    if not 0 < delta <= 1:
        raise ValueError(f"delta must be in (0, 1], got {delta}")
    unknown = sorted(set(only or []) - set(weights))
    if unknown:
        raise ValueError(f"unknown dataset(s) {unknown}; the mixture has {sorted(weights)}")
    runs = []
    for name in only or sorted(weights):
        for sign in ("+", "-"):
            w = dict(weights)
            w[name] = weights[name] * (1 + delta if sign == "+" else 1 - delta)
            if sum(v for v in w.values() if v > 0) > 0:
                runs.append((name, sign, w))
    return runs


def sweep(
    config: str,
    out: str | Path,
    *,
    data: list[str] | None = None,
    heldout: list[str] | None = None,
    init_from: str | None = None,
    steps: int = 50,
    delta: float = 0.5,
    metric: str = "eval/heldout/loss",
    mode: str = "min",
    only: list[str] | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run the baseline and every perturbation; write ``sweep.json`` and ``sweep.png``."""
    import jax

    from afm.console import console, print_table

    if mode not in ("min", "max"):
        raise ValueError(f"mode must be min or max, got {mode!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if not jax.config.jax_compilation_cache_dir:  # the runs compile the same step
        jax.config.update("jax_compilation_cache_dir", str(out / ".jax-cache"))
    cfg = get_train_config(config, overrides, task="sft")
    if data:
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, paths=list(data)))
    # Selection writes checkpoints; a sweep only compares end-of-run metrics.
    cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, select_metric="", every_steps=0, at_end=True),
                              checkpoint=dataclasses.replace(cfg.checkpoint, every_steps=max(steps, 1) * 10))
    weights = base_weights(cfg)
    plan = [("baseline", "", weights)] + perturbations(weights, delta, only)
    runs: list[dict[str, Any]] = []
    for i, (name, sign, w) in enumerate(plan):
        label = name if not sign else f"{name}{sign}"
        console.print(f"[bold]sweep run {i + 1}/{len(plan)}: {label}[/] weights "
                      + ", ".join(f"{k}={v:.3g}" for k, v in sorted(w.items())))
        run_cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, weights=w))
        result = train(run_cfg, out / f"run-{label}", heldout=heldout, init_from=init_from,
                       steps=steps, quiet=True)
        if metric not in result:
            known = ", ".join(k for k in result if k.startswith("eval/")) or "none"
            raise ValueError(f"metric {metric!r} not among the run's results ({known}); pass --heldout "
                             "or configure eval hooks")
        runs.append({"dataset": name, "direction": sign, "weights": w, "value": float(result[metric]),
                     "final_train_loss": result.get("final_loss")})
    base = runs[0]["value"]
    for r in runs[1:]:
        r["change"] = r["value"] - base
        r["helps"] = (r["change"] < 0) if mode == "min" else (r["change"] > 0)
    summary = {"metric": metric, "mode": mode, "delta": delta, "steps": steps, "baseline": base,
               "runs": runs, "recommendation": recommend(runs[1:], mode)}
    (out / "sweep.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot = plot_sweep(runs[1:], metric, out / "sweep.png")
    summary["plot"] = str(plot) if plot else "matplotlib not installed: no plot"
    rows = [["baseline", "", f"{base:.4f}", "", ""]] + [
        [r["dataset"], r["direction"] + f"{delta:g}", f"{r['value']:.4f}", f"{r['change']:+.4f}",
         "yes" if r["helps"] else "no"] for r in runs[1:]]
    print_table(f"mixture sweep: {metric} ({mode} is better)", ["dataset", "change", metric, "vs baseline", "helps"], rows)
    for name, advice in summary["recommendation"].items():
        console.print(f"{name}: {advice}")
    return summary


def recommend(runs: list[dict[str, Any]], mode: str) -> dict[str, str]:
    """Per dataset: which direction helped (the better of + and -), or neither."""
    out: dict[str, str] = {}
    for name in sorted({r["dataset"] for r in runs}):
        mine = [r for r in runs if r["dataset"] == name]
        helping = [r for r in mine if r["helps"]]
        if not helping:
            out[name] = "keep: neither direction improved the metric"
            continue
        best = min(helping, key=lambda r: r["change"] if mode == "min" else -r["change"])
        verb = "raise" if best["direction"] == "+" else "lower"
        out[name] = f"{verb} its weight ({best['change']:+.4f})"
    return out


def plot_sweep(runs: list[dict[str, Any]], metric: str, path: Path) -> Path | None:
    """Grouped bars: change of the metric per dataset for + and - (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = sorted({r["dataset"] for r in runs})
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(names) + 2), 3.8))
    width = 0.38
    for k, (sign, color) in enumerate((("+", "#2b8cbe"), ("-", "#e34a33"))):
        values = [next((r["change"] for r in runs if r["dataset"] == n and r["direction"] == sign), math.nan)
                  for n in names]
        ax.bar([i + (k - 0.5) * width for i in range(len(names))], values, width, label=f"weight {sign}",
               color=color)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel(f"change in {metric}")
    ax.set_title("SFT mixture: one weight perturbed at a time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
