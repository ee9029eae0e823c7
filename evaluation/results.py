"""The results file of one ``afm eval`` run: one writer, one reader, and the comparison.

Format ``afm-eval-v1`` (JSON)::

    {"format": "afm-eval-v1", "created": ISO time,
     "model": {"checkpoint", "config", "params", "dtype", "tokenizer"},
     "settings": {"tasks", "num_fewshot", "limit", "data_dir", "seed", ...},
     "tasks": {name: {"primary": metric, "metrics": {metric: {"value", "stderr"}},
                      "samples": n, "num_fewshot": k, "group": bool, "higher_is_better": {...},
                      "chance": accuracy of a uniform guess (multiple-choice tasks only)}},
     "perplexity": {...} | null, "long_context": {"lengths", "depths", "accuracy"} | null,
     "decontamination": {task: {"items", "covered", "fraction", ...}} | null,
     "engine": {...}, "timing": {...}, "notes": {task: text}, "versions": {...},
     "data": {"task split": "N items from FILE (or: the bundled demo items)"},
     "items": {task: {"doc_ids", "doc_hashes", "metrics": {metric: [value per item]}}}}

``items`` is there only when the run was asked for per-item scores (``EvalSpec.item_scores``,
``afm eval --items``): what a paired comparison of two models on the same items needs.

Metric names are lm-eval's ``metric,filter`` keys (``acc,none``,
``exact_match,strict-match``), so a file can be read next to lm-eval's own output.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from afm import fs

FORMAT = "afm-eval-v1"

# The number the report quotes for each task (Table 7: accuracy without length
# normalisation; exact match; pass@1).
PRIMARY = {
    "gsm8k_cot": "exact_match,strict-match", "gsm8k": "exact_match,strict-match",
    "triviaqa": "exact_match,remove_whitespace", "humaneval": "pass_at_1,create_test",
    "ifeval": "prompt_level_strict_acc,none", "afm_niah": "niah_match,none",
    "minerva_math": "exact_match,none", "webqs": "exact_match,none",
}


class ResultsError(ValueError):
    """Not an afm eval results file."""


def primary_metric(task: str, metrics: dict[str, Any]) -> str | None:
    if task in PRIMARY and PRIMARY[task] in metrics:
        return PRIMARY[task]
    for name in ("acc,none", "exact_match,none", "pass_at_1,create_test"):
        if name in metrics:
            return name
    if task.startswith("minerva_math") and "exact_match,none" in metrics:
        return "exact_match,none"
    return next(iter(sorted(metrics)), None)


def from_lm_eval(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """lm-eval's ``simple_evaluate`` output -> our per-task entries."""
    groups = set(out.get("groups", {}))
    n_shot = out.get("n-shot", {})
    n_samples = out.get("n-samples", {})
    hib = out.get("higher_is_better", {})
    parent = {sub: group for group, subs in out.get("group_subtasks", {}).items() for sub in subs}
    tasks: dict[str, dict[str, Any]] = {}
    entries = {**out.get("results", {}), **out.get("groups", {})}  # group aggregates (mmlu, ...)
    for name, res in entries.items():
        metrics: dict[str, dict[str, float | None]] = {}
        for key, value in res.items():
            if "," not in key or "_stderr," in key or not isinstance(value, (int, float)):
                continue
            metric, filt = key.split(",", 1)
            stderr = res.get(f"{metric}_stderr,{filt}")
            metrics[key] = {"value": _num(value), "stderr": _num(stderr) if isinstance(stderr, (int, float)) else None}
        if not metrics:
            continue
        samples = n_samples.get(name, {})
        tasks[name] = {
            "primary": primary_metric(name, metrics),
            "metrics": metrics,
            "samples": samples.get("effective") if isinstance(samples, dict) else None,
            "num_fewshot": n_shot.get(name),
            "group": name in groups,
            "parent": parent.get(name),
            "higher_is_better": hib.get(name, {}),
        }
    return tasks


def add_chance(tasks: dict[str, dict[str, Any]], choices: dict[tuple[str, int], int],
               configs: dict[str, dict[str, Any]]) -> None:
    """Each multiple-choice task's chance level: the mean over its scored items of 1 / the
    answers offered (``choices``: (task, item) -> answers, as the model was asked); what a
    score near it means (nothing learnt) is then on the page, not in the reader's head."""
    offered: dict[str, list[int]] = {}
    for (task, _item), n in choices.items():
        offered.setdefault(task, []).append(n)
    for name, entry in tasks.items():
        counts = offered.get(name)
        if counts and (configs.get(name) or {}).get("output_type") == "multiple_choice":
            entry["chance"] = sum(1.0 / n for n in counts) / len(counts)


def add_groups(tasks: dict[str, dict[str, Any]], groups: dict[str, tuple[list[str], str]]) -> None:
    """Size-weighted mean of each group's members (and the standard error of that mean,
    members being independent samples); members get ``parent``."""
    for group, (members, metric) in groups.items():
        rows = [(tasks[m]["samples"] or 0, tasks[m]["metrics"][metric]) for m in members
                if m in tasks and metric in tasks[m]["metrics"]]
        total = sum(n for n, _ in rows)
        if not total:
            continue
        value = sum(n * m["value"] for n, m in rows if m["value"] is not None) / total
        errs = [(n * m["stderr"]) ** 2 for n, m in rows if m["stderr"] is not None]
        stderr = math.sqrt(sum(errs)) / total if len(errs) == len(rows) else None
        for m in members:
            if m in tasks:
                tasks[m]["parent"] = group
        tasks[group] = {"primary": metric, "metrics": {metric: {"value": value, "stderr": stderr}},
                        "samples": total, "num_fewshot": tasks[members[0]].get("num_fewshot"),
                        "group": True, "parent": None, "higher_is_better": {}, "members": len(rows)}
        chances = [(tasks[m]["samples"] or 0, tasks[m].get("chance")) for m in members if m in tasks]
        weight = sum(n for n, _ in chances)
        if weight and all(c is not None for _, c in chances):
            tasks[group]["chance"] = sum(n * c for n, c in chances) / weight


# lm-eval logs a loglikelihood task's per-item log-probability under the name of the
# metric it aggregates into (``perplexity`` = exp(-mean ll)): per item it is the
# log-likelihood of the continuation, so that is what it is called here.
ITEM_METRIC_NAMES = {"perplexity": "loglikelihood"}


def item_scores(samples: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """lm-eval's logged samples -> per task, the items in ``doc_id`` order with every
    scalar metric's value per item (metrics whose per-item value is not one number, such
    as rolling log-likelihoods, are left out)."""
    out: dict[str, dict[str, Any]] = {}
    for task, rows in samples.items():
        rows = sorted(rows, key=lambda r: r["doc_id"])
        metrics: dict[str, list[float]] = {}
        for name in (rows[0].get("metrics") or []) if rows else []:
            values = [r.get(name) for r in rows]
            if all(isinstance(v, (int, float)) for v in values):
                metrics[ITEM_METRIC_NAMES.get(name, name)] = [float(v) for v in values]
        out[task] = {"doc_ids": [int(r["doc_id"]) for r in rows],
                     "doc_hashes": [str(r.get("doc_hash", "")) for r in rows], "metrics": metrics}
    return out


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def write_results(results: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    fs.write_text_atomic(str(path), json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
    return Path(path)


def read_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ResultsError(f"{path}: not an afm eval results file (format {FORMAT!r} expected)")
    return data


def headline(results: dict[str, Any], subtasks: bool = False) -> list[tuple[str, str, float | None, float | None]]:
    """(task, metric, value, stderr) of every task's primary metric (members of a group
    such as the 57 MMLU subjects only with ``subtasks``), plus perplexity."""
    rows = []
    for task, entry in results.get("tasks", {}).items():
        metric = entry.get("primary")
        if metric is None or (entry.get("parent") and not subtasks):
            continue
        m = entry["metrics"][metric]
        rows.append((task, metric, m["value"], m.get("stderr")))
    ppl = results.get("perplexity")
    if ppl:
        rows.append(("held-out tokens", "perplexity", ppl["perplexity"], None))
        rows.append(("held-out tokens", "bits_per_token", ppl["bits_per_token"], None))
    return rows


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Side by side: every (task, metric) in either run, with B - A where both have it."""
    def index(r: dict[str, Any]) -> dict[tuple[str, str], tuple[float | None, float | None]]:
        return {(t, m): (v, s) for t, m, v, s in headline(r)}

    ia, ib = index(a), index(b)
    rows = []
    for key in list(ia) + [k for k in ib if k not in ia]:
        va, sa = ia.get(key, (None, None))
        vb, sb = ib.get(key, (None, None))
        delta = None if va is None or vb is None else vb - va
        # A difference larger than twice the combined standard error is worth a look.
        sig = None
        if delta is not None and sa is not None and sb is not None and (sa or sb):
            sig = abs(delta) > 2 * math.hypot(sa, sb)
        rows.append({"task": key[0], "metric": key[1], "a": va, "b": vb, "delta": delta,
                     "significant": sig})
    return rows
