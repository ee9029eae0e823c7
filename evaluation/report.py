"""Tables on the terminal, and one PNG + one self-contained HTML page per run.

The PNG shows each task's primary metric with its standard error and, for a multiple-choice
task, its chance level (and, when the run has one, the needle-in-a-haystack grid as a
heatmap); the HTML page carries the same picture
inline with every metric, the post-training tasks' sources, scorers, judge failures and
breakdowns, the decontamination coverage and the run's settings, so it can be mailed or
archived as one file.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from afm.console import print_table
from afm.evaluation.results import compare, headline


def _fmt(x: float | None, digits: int = 4) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def _chance(results: dict[str, Any], task: str) -> float | None:
    """A multiple-choice task's chance level (None for others)."""
    return (results.get("tasks", {}).get(task) or {}).get("chance")


def print_results(results: dict[str, Any]) -> None:
    rows = [[t, m, _fmt(v), _fmt(s), _fmt(_chance(results, t), 2), _n(results, t)]
            for t, m, v, s in headline(results)]
    print_table("afm eval", ["task", "metric", "value", "stderr", "chance", "items"], rows)
    cov = results.get("decontamination")
    if cov:
        print_table("decontamination index coverage",
                    ["task", "items", "covered", "fraction", "matched benchmarks"],
                    [[t, c["items"], c["covered"], f"{c['fraction']:.1%}",
                      ", ".join(c["matched_benchmarks"]) or "-"] for t, c in cov.items()])
    grid = results.get("long_context")
    if grid:
        header = ["length \\ depth"] + [f"{d:.2f}" for d in grid["depths"]]
        print_table("needle in a haystack (accuracy)", header,
                    [[n, *[f"{a:.2f}" for a in row]] for n, row in zip(grid["lengths"], grid["accuracy"])])


def _n(results: dict[str, Any], task: str) -> str:
    entry = results.get("tasks", {}).get(task, {})
    return "" if entry.get("samples") is None else str(entry["samples"])


def print_comparison(a: dict[str, Any], b: dict[str, Any], name_a: str, name_b: str) -> list[dict[str, Any]]:
    rows = compare(a, b)
    table = []
    for r in rows:
        mark = "" if r["significant"] is None else ("*" if r["significant"] else "")
        delta = "" if r["delta"] is None else f"{r['delta']:+.4f}{mark}"
        table.append([r["task"], r["metric"], _fmt(r["a"]), _fmt(r["b"]), delta])
    print_table(f"A = {name_a}   B = {name_b}   (* : |B-A| > 2 combined stderr)",
                ["task", "metric", "A", "B", "B - A"], table)
    return rows


def plot_png(results: dict[str, Any]) -> bytes:
    """Bar chart of the primary metrics (0..1 scale ones), plus the NIAH heatmap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [(t, v, s) for t, m, v, s in headline(results) if v is not None and "perplexity" not in m
            and "bits" not in m and 0.0 <= v <= 1.0]  # rates and accuracies (not 1-10 ratings)
    grid = results.get("long_context")
    # One column, the heatmap below the bars: 7 inches at 110 dpi is 770 px, so the
    # page fits a laptop window (1280 px) without scrolling sideways.
    bar_height = max(3.0, 0.35 * len(bars) + 1.5)
    heights = [bar_height] + ([max(3.0, 0.45 * len(grid["lengths"]) + 1.5)] if grid else [])
    fig, axes = plt.subplots(len(heights), 1, figsize=(7, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    ax = axes[0][0]
    names = [b[0] for b in bars]
    ax.barh(names, [b[1] for b in bars], xerr=[b[2] or 0.0 for b in bars], color="#4C72B0", capsize=3)
    for i, (_, value, _) in enumerate(bars):  # the value beside each bar: a score of 0 has no bar to see
        ax.text(min(value, 0.88) + 0.01, i, f"{value:.2f}", va="center", fontsize=8)
    chance = [(i, _chance(results, name)) for i, name in enumerate(names) if _chance(results, name) is not None]
    for i, level in chance:  # a guess's score: a bar that barely passes it says the model learnt nothing
        ax.plot([level, level], [i - 0.4, i + 0.4], color="#C44E52", linestyle="--", linewidth=1.5,
                label="chance" if i == chance[0][0] else None)
    if chance:
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("score (primary metric)")
    model = results.get("model", {})
    name = Path(str(model.get("checkpoint", ""))).name
    name = name if len(name) <= 40 else "..." + name[-37:]  # the page's heading has it whole
    ax.set_title(f"{model.get('config', '')}  {name}")
    if grid:
        hx = axes[1][0]
        im = hx.imshow(grid["accuracy"], vmin=0, vmax=1, cmap="viridis", aspect="auto")
        hx.set_xticks(range(len(grid["depths"])), [f"{d:.0%}" for d in grid["depths"]])
        hx.set_yticks(range(len(grid["lengths"])), [str(n) for n in grid["lengths"]])
        hx.set_xlabel("needle depth")
        hx.set_ylabel("context tokens")
        hx.set_title("needle in a haystack (accuracy per cell)")
        for i, row in enumerate(grid["accuracy"]):  # the value in each cell, readable on either end of the scale
            for j, value in enumerate(row):
                hx.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if value > 0.6 else "white")
        bar = fig.colorbar(im, ax=hx)
        bar.set_label("accuracy (0 = never found, 1 = always)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def write_report(results: dict[str, Any], png_path: Path, html_path: Path) -> None:
    png = plot_png(results)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    png_path.write_bytes(png)
    html_path.write_text(render_html(results, png), encoding="utf-8")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _post_row(task: str, d: dict[str, Any], results: dict[str, Any]) -> list[Any]:
    """One post-training task: where its data came from, who scored it, and its breakdown
    (BFCL outcomes, safety rates by category, judge failures)."""
    judge = d.get("judge") or (d.get("detector") if isinstance(d.get("detector"), dict) else None)
    scorer = judge["judge"] + f" ({judge['kind']})" if judge else (d.get("detector") or "BFCL checker")
    items = len(d.get("items", []))
    failed = d.get("failed", d.get("n_failed", 0)) or 0
    if "by_category" in d:  # safety: rate over items; Arena-Hard: score over questions
        def _one(c: str, v: dict[str, Any]) -> str:
            value = v.get("rate", v.get("score"))
            return f"{c} {'-' if value is None else f'{value:.2f}'} (n={v.get('items', v.get('questions'))})"

        detail = "; ".join(_one(c, v) for c, v in d["by_category"].items())
    elif "outcomes" in d:
        detail = "; ".join(f"{k} {n}" for k, n in sorted(d["outcomes"].items()))
    else:
        detail = "; ".join(f"{k} {d[k]}" for k in ("glm", "win_rate", "lower", "upper", "failed_games") if d.get(k) is not None)
    return [task, str(d.get("source", "")), scorer, items - failed, failed, detail]


def render_html(results: dict[str, Any], png: bytes) -> str:
    metrics = []
    for task, entry in results.get("tasks", {}).items():
        for name, m in sorted(entry["metrics"].items()):
            primary = name == entry.get("primary")
            metrics.append([task, name + (" (primary)" if primary else ""), _fmt(m["value"]), _fmt(m.get("stderr")),
                            _fmt(entry.get("chance"), 2) if primary else "", entry.get("num_fewshot", ""),
                            entry.get("samples", "")])
    model = results.get("model", {})
    label = Path(str(model.get("checkpoint", ""))).name or str(model.get("config", ""))
    label = label if len(label) <= 40 else "..." + label[-37:]
    tasks = ", ".join(results.get("tasks", {})) or ", ".join((results.get("posttrain") or {}).get("tasks") or {})
    title = "afm eval" + (f": {label}" if label else "") + (f" ({tasks})" if tasks else "")
    parts = [  # a title per run: a browser's tabs and history tell the reports apart
        f"<!doctype html><meta charset='utf-8'><title>{html.escape(title[:120])}</title>",
        # Fits a 1280-px window: the figure scales down, tables wrap long values instead of
        # widening the page.
        "<style>body{font-family:sans-serif;margin:2em;max-width:1100px;overflow-wrap:anywhere}"
        "img{max-width:100%;height:auto}"
        "table{border-collapse:collapse;margin:1em 0;max-width:100%}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;overflow-wrap:anywhere}"
        "td:first-child{text-align:left}</style>",
        f"<h1>afm eval: {html.escape(str(results.get('model', {}).get('checkpoint', '')))}</h1>",
        f"<img alt='scores' src='data:image/png;base64,{base64.b64encode(png).decode()}'>",
        "<h2>Metrics</h2>", _table(["task", "metric", "value", "stderr", "chance", "shots", "items"], metrics),
    ]
    ppl = results.get("perplexity")
    if ppl:
        rows = [["all", ppl["tokens"], _fmt(ppl["perplexity"], 3), _fmt(ppl["bits_per_token"], 4)]]
        rows += [[s, v["tokens"], _fmt(v["perplexity"], 3), _fmt(v["bits_per_token"], 4)]
                 for s, v in ppl.get("by_source", {}).items()]
        parts += ["<h2>Held-out perplexity</h2>", _table(["source", "tokens", "perplexity", "bits/token"], rows)]
    cov = results.get("decontamination")
    if cov:
        parts += ["<h2>Decontamination index coverage</h2>", _table(
            ["task", "items", "covered", "fraction"],
            [[t, c["items"], c["covered"], f"{c['fraction']:.1%}"] for t, c in cov.items()])]
    post = (results.get("posttrain") or {}).get("tasks") or {}
    if post:
        parts += ["<h2>Post-training tasks</h2>", _table(["task", "data", "scored by", "judged", "failed", "detail"],
                                                         [_post_row(t, d, results) for t, d in post.items()])]
    if results.get("notes"):
        parts += ["<h2>Notes</h2><ul>"] + [f"<li><b>{html.escape(t)}</b>: {html.escape(n)}</li>"
                                             for t, n in results["notes"].items()] + ["</ul>"]
    settings = {**results.get("settings", {}), **results.get("versions", {})}
    parts += ["<h2>Settings</h2>", _table(["setting", "value"], [[k, v] for k, v in settings.items()])]
    return "\n".join(parts)
