"""Paired differences against a start model, with standard errors over problems, from
``greedy_eval.py --per-problem`` files.

For each model and measure (greedy / sampled; reward / correct): per problem, the model's
mean over that problem's replies minus the start's mean over its replies; the figure is the
mean of these differences over problems, its standard error the sample standard deviation of
the differences over sqrt(number of problems). Models named ``GROUP-sN`` (one seed each) are
also pooled: per problem, the difference averaged over the group's seeds (and replies), then
the mean and standard error over problems -- the seeds' variation enters through the
per-problem averages, and the problems are the unit the standard error counts.

Run: ``python experiments/rl-arith/paired_se.py --start sft FILE [FILE ...] [--out result.json]``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

METRICS = ("reward", "correct", "other")
CORRECT_WEIGHT = 1.0  # the task reward's weight of a correct answer (GraderConfig.correct_weight)


def per_problem_means(entry: dict, mode: str, metric: str) -> np.ndarray:
    """[n] mean over each problem's replies. ``other``: the reward less its correctness
    term (the format, length, true-working and harm terms), so a reward difference splits
    into a correctness part and the rest, each with its own paired error."""
    if metric == "other":
        return per_problem_means(entry, mode, "reward") - CORRECT_WEIGHT * per_problem_means(entry, mode, "correct")
    return np.asarray([np.mean(row) for row in entry[mode][metric]], dtype=np.float64)


def paired(diffs: np.ndarray) -> dict:
    n = len(diffs)
    se = float(np.std(diffs, ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return {"diff": round(float(np.mean(diffs)), 4), "se": round(se, 4), "problems": n}


def analyse(models: dict, start: str) -> dict:
    modes = [m for m in ("greedy", "sampled") if m in models[start]]
    groups: dict[str, list[str]] = {}
    for name in models:
        match = re.fullmatch(r"(.+)-s\d+", name)
        if match:
            groups.setdefault(match.group(1), []).append(name)
    out: dict = {"start": start, "models": {}, "pooled": {}}
    for name, entry in models.items():
        row = {}
        for mode in modes:
            for metric in METRICS:
                own = per_problem_means(entry, mode, metric)
                row[f"{mode}/{metric}"] = {"mean": round(float(np.mean(own)), 4)}
                if name != start:
                    row[f"{mode}/{metric}"] |= paired(own - per_problem_means(models[start], mode, metric))
        out["models"][name] = row
    for group, names in sorted(groups.items()):
        row = {"seeds": sorted(names)}
        for mode in modes:
            for metric in METRICS:
                avg = np.mean([per_problem_means(models[n], mode, metric) for n in names], axis=0)
                row[f"{mode}/{metric}"] = {"mean": round(float(np.mean(avg)), 4)}
                row[f"{mode}/{metric}"] |= paired(avg - per_problem_means(models[start], mode, metric))
        out["pooled"][group] = row
    names = sorted(groups)
    for i, a in enumerate(names):  # pooled group minus pooled group, paired per problem
        for b in names[i + 1:]:
            row = {}
            for mode in modes:
                for metric in METRICS:
                    mean_a, mean_b = (np.mean([per_problem_means(models[n], mode, metric) for n in groups[g]], axis=0)
                                      for g in (a, b))
                    row[f"{mode}/{metric}"] = paired(mean_a - mean_b)
            out.setdefault("between_groups", {})[f"{a} - {b}"] = row
    return out


def table(result: dict) -> str:
    """A markdown table: mean, and difference vs the start +- paired s.e."""
    def cell(v: dict, pct: bool) -> str:
        f = (lambda x: f"{100 * x:.1f}%") if pct else (lambda x: f"{x:.3f}")
        g = (lambda x: f"{100 * x:+.1f}") if pct else (lambda x: f"{x:+.3f}")
        return f(v["mean"]) + (f" ({g(v['diff'])} +- {(100 if pct else 1) * v['se']:.{1 if pct else 3}f})"
                               if "diff" in v else "")

    cols = [c for c in ("greedy/reward", "greedy/correct", "sampled/reward", "sampled/correct")
            if c in next(iter(result["models"].values()))]
    lines = ["| model | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    rows = [(n, r) for n, r in result["models"].items()]
    rows += [(f"**{g} pooled ({len(r['seeds'])} seeds)**", r) for g, r in result["pooled"].items()]
    for name, r in rows:
        lines.append(f"| {name} | " + " | ".join(cell(r[c], c.endswith("correct")) for c in cols) + " |")
    for name, r in result.get("between_groups", {}).items():
        lines.append(f"| {name} (pooled, paired) | " + " | ".join(
            (f"{100 * r[c]['diff']:+.1f} +- {100 * r[c]['se']:.1f}" if c.endswith("correct")
             else f"{r[c]['diff']:+.3f} +- {r[c]['se']:.3f}") for c in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="greedy_eval.py --per-problem outputs (same test problems)")
    ap.add_argument("--start", default="sft", help="the model differences are taken against")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    models: dict = {}
    meta = None
    for f in a.files:
        data = json.loads(Path(f).read_text())
        if meta is not None and (data["meta"]["n"], data["meta"]["samples"]) != (meta["n"], meta["samples"]):
            raise SystemExit(f"{f}: a different test set or sample count than {a.files[0]}")
        meta = meta or data["meta"]
        models |= data["models"]
    result = analyse(models, a.start) | {"meta": meta}
    print(table(result))
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
