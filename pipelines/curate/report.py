"""``report.html``: the curate run's funnel as a chart, stage table and sample rejects.

One self-contained file (the chart is a PNG embedded as base64), so it can be opened from
a bucket or attached to a ticket without its neighbours.
"""

from __future__ import annotations

import base64
import html
import io
import json
from typing import Any

from afm import fs
from afm.filters.base import explain
from afm.pipelines.curate.kinds import report_html as kinds_html
from afm.pipelines.curate.stages import registry


def funnel_png(funnel: list[dict[str, Any]]) -> bytes:
    """A horizontal bar chart: documents entering each stage, split kept / dropped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = [f["stage"] for f in funnel]
    kept = [f["kept"] for f in funnel]
    dropped = [f["dropped"] for f in funnel]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(stages) + 1.4), dpi=110)
    y = list(range(len(stages)))[::-1]
    ax.barh(y, kept, color="#2b8a3e", label="kept")
    ax.barh(y, dropped, left=kept, color="#c92a2a", label="dropped")
    for yi, k, d in zip(y, kept, dropped):
        ax.text(k + d, yi, f"  {k:,} kept / {d:,} dropped", va="center", fontsize=8)
    ax.set_yticks(y, stages)
    ax.set_xlabel("documents")
    ax.set_title("curate funnel: documents entering each stage")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_xlim(0, max([k + d for k, d in zip(kept, dropped)] + [1]) * 1.45)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


SAMPLE_PREVIEW_CHARS = 600  # of a sample reject's text, in the report (the rejects file has it all)


def _preview(text: Any) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= SAMPLE_PREVIEW_CHARS else text[:SAMPLE_PREVIEW_CHARS] + " [...]"


def render_report(manifest: dict[str, Any], samples: dict[str, list[dict[str, Any]]]) -> str:
    """The report's HTML text. Stages with nothing of their kind in the input (extraction
    of document files) are left out, named in one line."""
    funnel = [f for f in manifest["funnel"] if f.get("applies", True)]
    left_out = [f["stage"] for f in manifest["funnel"] if not f.get("applies", True)]
    png = base64.b64encode(funnel_png(funnel)).decode("ascii")
    acc = manifest["accounting"]
    verdict = (f'<p class="ok">Accounting holds ({acc["checks"]} checks): '
               f'{manifest["totals"]["in"]:,} in = {manifest["totals"]["kept"]:,} kept + '
               f'{manifest["totals"]["rejected"]:,} rejected.</p>' if acc["ok"] else
               '<p class="bad">ACCOUNTING VIOLATED:</p><ul>'
               + "".join(f"<li>{_e(p)}</li>" for p in acc["problems"]) + "</ul>")
    rows = "".join(
        f"<tr><td>{_e(f['stage'])}</td><td>{_e(f['status'])}</td><td>{f['in']:,}</td>"
        f"<td>{f['kept']:,}</td><td>{f['dropped']:,}</td>"
        f"<td>{100.0 * f['dropped'] / f['in'] if f['in'] else 0:.1f}%</td></tr>"
        for f in funnel
    )
    reason_rows = []
    for f in funnel:
        for reason, n in sorted(f["reasons"].items(), key=lambda kv: -kv[1]):
            reason_rows.append(f"<tr><td>{_e(f['stage'])}</td><td>{_e(reason)}</td>"
                               f"<td>{n:,}</td></tr>")
    # Folded: one line per reason, opened on demand (written out, the samples' text made
    # the page 21,733 px tall); each sample shows its first SAMPLE_PREVIEW_CHARS.
    sample_html = []
    for key in sorted(samples):
        stage, reason = key.split("|", 1)
        items = "".join(
            f"<li><b>{_e(s.get('url') or s.get('id'))}</b>"
            + (f" <code>{_e(explain(s['details']))}</code>" if s.get("details") else "")
            + f"<pre>{_e(_preview(s.get('text')))}</pre></li>"
            for s in samples[key]
        )
        sample_html.append(f"<details><summary><b>{_e(stage)}</b>: {_e(reason)} ({len(samples[key])} "
                           f"sample(s))</summary><ul>{items}</ul></details>")
    notices = []
    for stage in registry():  # safeguards (decontamination): on, or OFF and why below
        state = manifest.get(stage.off_flag) if stage.off_flag else None
        if state == "on":
            notices.append(f'<p class="ok">{_e(stage.off_flag.capitalize())}: on.</p>')
        elif state == "off":
            notices.append(f'<p class="bad">{_e(stage.off_flag.capitalize())}: OFF.</p>')
    for warning in manifest.get("warnings", []):
        notices.append(f'<p class="bad">Warning: {_e(warning)}</p>')
    not_docs = manifest.get("not_documents") or {}
    if not_docs:
        listed = ", ".join(f"{_e(k)} {v:,}" for k, v in sorted(not_docs.items()))
        notices.append(f"<p>Input records that are not documents (not counted above): "
                       f"{listed}.</p>")
    notes = manifest.get("read_notes") or {}
    if notes:
        listed = ", ".join(f"{_e(k)} {v:,}" for k, v in sorted(notes.items()))
        notices.append(f"<p>Fields converted, cleared or repaired while reading: {listed}.</p>")
    sections = _stage_sections(manifest.get("stage_reports") or {})
    if left_out:
        notices.append(f"<p>Not applicable to this input (nothing of their kind was read, "
                       f"left out below): {_e(', '.join(left_out))}.</p>")
    most = "".join(f"<li><b>{_e(a['stage'])}</b>: {a['rejected']:,} rejected "
                   f"({100 * a['share']:.0f}% of the input; most: {_e(a['top_reason'])} "
                   f"{a['top_reason_count']:,}). To keep more: <code>{_e(a['setting'])}</code></li>"
                   for a in manifest.get("rejected_most") or [])
    costs = _costs_html(manifest.get("costs"))
    shards = manifest["outputs"]["documents"]
    total_bytes = sum(f["bytes"] for f in shards)
    config = json.dumps(manifest["config"], indent=2, sort_keys=False)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>afm curate report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 1100px; overflow-wrap: anywhere; }}
img {{ max-width: 100%; height: auto; }}
code {{ overflow-wrap: anywhere; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 4px 10px; text-align: right; }}
td:first-child, th:first-child, td:nth-child(2) {{ text-align: left; }}
pre {{ white-space: pre-wrap; background: #f6f6f6; padding: 6px; font-size: 12px; }}
.ok {{ color: #2b8a3e; font-weight: bold; }} .bad {{ color: #c92a2a; font-weight: bold; }}
</style></head><body>
<h1>afm {_e(manifest.get('command', 'curate'))} report</h1>
<p>Source <b>{_e(manifest['source'])}</b>, runner <b>{_e(manifest['runner'])}</b>,
{len(manifest['inputs'])} input file(s), {manifest['elapsed_s']:.1f} s, created
{_e(manifest['created_at'])}. Output: <code>{_e(manifest['output'])}</code>
({len(shards)} document shard(s), {total_bytes:,} bytes).</p>
{verdict}
{''.join(notices)}
<h2>Funnel</h2>
<img alt="curate funnel" src="data:image/png;base64,{png}">
<table><tr><th>stage</th><th>status</th><th>in</th><th>kept</th><th>dropped</th>
<th>dropped %</th></tr>{rows}</table>
{sections}
{kinds_html(manifest.get("by_kind") or {})}
{f"<h2>Rejected most, and what keeps more</h2><ul>{most}</ul>" if most else ""}
{costs}
<h2>Rejects by reason</h2>
<table><tr><th>stage</th><th>reason</th><th>documents</th></tr>{''.join(reason_rows)}</table>
<h2>Sample rejects</h2>
{''.join(sample_html) or '<p>No rejects.</p>'}
<h2>Config</h2><details><summary>the run's config ({len(config.splitlines())} lines)</summary>
<pre>{_e(config)}</pre></details>
</body></html>
"""


def _stage_sections(reports: dict[str, Any]) -> str:
    """The sections of the stages whose reports have a ``report_html`` hook (what opting
    out cost), in run order."""
    return "".join(stage.hook("report_html")(reports[stage.name]) for stage in registry()
                   if stage.report_html and reports.get(stage.name))


def _costs_html(costs: dict[str, Any] | None) -> str:
    """The run's CPU per stage and document, and peak memory (``costs``, pipeline's
    :mod:`~afm.pipelines.curate.costs`)."""
    if not costs:
        return ""
    def row(s: dict[str, Any]) -> str:
        per_doc = "" if s["ms_per_document"] is None else f"{s['ms_per_document']:.3f}"
        return (f"<tr><td>{_e(s['stage'])}</td><td>{s['documents']:,}</td><td>{s['cpu_s']:,.2f}</td>"
                f"<td>{per_doc}</td></tr>")

    rows = "".join(row(s) for s in costs["stages"])
    total = costs.get("stages_ms_per_document")
    lines = [f"Stages: {costs['stages_cpu_s']:,.2f} CPU s"
             + (f", {total:.3f} ms per document read" if total is not None else "")]
    if "process_cpu_s" in costs:
        lines.append(f"every process of the run: {costs['process_cpu_s']:,.2f} CPU s, of which "
                     f"{costs['other_cpu_s']:,.2f} s outside the stages (Beam's runner, shuffles, "
                     "worker start-up)")
    memory = ", ".join(f"{k.replace('_', ' ')} {v:,.0f} MB" for k, v in costs["peak_memory_mb"].items())
    lines.append(f"peak memory: {memory}")
    return ("<h2>Cost per stage</h2><table><tr><th>stage</th><th>documents in</th><th>CPU s</th>"
            f"<th>CPU ms per document</th></tr>{rows}</table><p>{_e('; '.join(lines))}.</p>")


def write_report(manifest: dict[str, Any], samples: dict[str, list[dict[str, Any]]],
                 path: str) -> str:
    fs.write_bytes(path, render_report(manifest, samples).encode("utf-8"))
    return path
