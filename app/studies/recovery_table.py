"""A Table-10-style comparison: a reference model, its quantized versions, their adapters.

Each entry is any model path ``load_model`` takes (a dense or palettized checkpoint, or
an adapter directory, which brings its base). Every entry gets the same measurements:

* bits per weight of its stored base (``afm.model.on_device.palettize.bits_report``; the
  reference is the 16-bit model) and the adapter's size;
* held-out loss: mean next-token nats on fixed rows of held-out token shards
  (``afm.training.compress.quantize.RowsLoss``);
* an ``afm eval`` task group through the evaluation package (lm-eval with the native
  engine), on the in-memory model;

and the report's normalisation: each score as a percentage of the reference's, plus,
for adapters, the share of the quantization loss gap they recover
(``(L_quantized - L_adapter) / (L_quantized - L_reference)``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Entry:
    label: str
    path: str


def parse_entry(text: str) -> Entry:
    """``"LABEL=PATH"`` (or just ``PATH``, labelled by its name)."""
    label, sep, path = text.partition("=")
    if not sep:
        return Entry(Path(text).name or text, text)
    if not path:
        raise ValueError(f"model entry {text!r}: expected LABEL=PATH")
    return Entry(label.strip(), path.strip())


def describe(path: str) -> dict[str, Any]:
    """Storage facts of a model path: base bits per weight, adapter rank and size."""
    from afm.model.checkpoints.adapter_io import is_adapter_dir, read_meta, resolve_base
    from afm.model.checkpoints.checkpoint import load_config
    from afm.model.on_device import palettize

    info: dict[str, Any] = {"adapter_rank": None, "adapter_mb": 0.0}
    base = path
    if is_adapter_dir(path):
        meta = read_meta(path)
        info.update(adapter_rank=meta["lora"]["rank"], adapter_mb=meta["megabytes"])
        base = resolve_base(path, meta)
    cfg = load_config(base)
    summary = palettize.summarize_bits(palettize.bits_report(cfg))
    info.update(bpw=summary["bpw"] if cfg.palettization else 16.0,
                projection_bpw=summary["projection_bpw"] if cfg.palettization else 16.0,
                base_mb=summary["megabytes"], quantized=cfg.palettization is not None)
    return info


def _scores(results: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """Each task's primary metric (the evaluation package's choice) and its stderr."""
    values: dict[str, float] = {}
    errors: dict[str, float] = {}
    for task, entry in (results.get("tasks") or {}).items():
        key = entry.get("primary")
        metric = (entry.get("metrics") or {}).get(key) if key else None
        if metric and isinstance(metric.get("value"), (int, float)):
            name = f"{task}/{key.split(',')[0]}"
            values[name] = float(metric["value"])
            if isinstance(metric.get("stderr"), (int, float)):
                errors[name] = float(metric["stderr"])
    return values, errors


def evaluate_entries(
    entries: list[Entry],
    *,
    tokenizer: str | None,
    heldout: list[str],
    tasks: list[str],
    limit: int | None = None,
    data_dir: str | None = None,
    rows: int = 64,
    seq_len: int = 256,
    dtype: str = "float32",
    progress: Any = None,
) -> dict[str, Any]:
    """Measure every entry; the first is the reference."""
    from afm.model.checkpoints.checkpoint import load_model
    from afm.training.compress.quantize import RowsLoss, token_rows

    heldout_rows = token_rows(heldout, rows, seq_len)
    measured = []
    for i, entry in enumerate(entries):
        if progress:
            progress(entry.label, i, len(entries))
        started = time.perf_counter()
        model, _cfg = load_model(entry.path, dtype=dtype)
        row: dict[str, Any] = {"label": entry.label, "path": entry.path, **describe(entry.path)}
        row["heldout_loss"] = RowsLoss(model, heldout_rows, batch_rows=8)()
        if tasks:
            from afm.evaluation.runner import EvalSpec, run_eval

            spec = EvalSpec(model=model, tokenizer=tokenizer, tasks=list(tasks), limit=limit,
                            data_dir=data_dir, dtype=dtype, show_progress=False)
            row["scores"], row["stderr"] = _scores(run_eval(spec))
        else:
            row["scores"], row["stderr"] = {}, {}
        row["seconds"] = time.perf_counter() - started
        measured.append(row)
    if progress:
        progress("done", len(entries), len(entries))
    return normalise({"entries": measured, "heldout": list(heldout), "heldout_rows": int(heldout_rows.shape[0]),
                      "seq_len": int(heldout_rows.shape[1] - 1), "tasks": list(tasks), "limit": limit})


def normalise(table: dict[str, Any]) -> dict[str, Any]:
    """Add percentages of the reference (first entry) and recovered loss-gap shares."""
    entries = table["entries"]
    ref = entries[0]
    by_path = {os.path.abspath(e["path"]): e for e in entries}
    for e in entries:
        e["scores_pct"] = {k: (100.0 * v / ref["scores"][k] if ref["scores"].get(k) else None)
                           for k, v in e["scores"].items()}
        e["heldout_delta"] = e["heldout_loss"] - ref["heldout_loss"]
        e["recovered"] = None
        base = _base_of(e)
        if base and base in by_path:
            gap = by_path[base]["heldout_loss"] - ref["heldout_loss"]
            if gap > 0:
                e["recovered"] = (by_path[base]["heldout_loss"] - e["heldout_loss"]) / gap
    return table


def _base_of(entry: dict[str, Any]) -> str | None:
    from afm.model.checkpoints.adapter_io import is_adapter_dir, read_meta, resolve_base

    if not is_adapter_dir(entry["path"]):
        return None
    return os.path.abspath(resolve_base(entry["path"], read_meta(entry["path"])))


def markdown(table: dict[str, Any]) -> str:
    """The table as Markdown (README-ready)."""
    keys = sorted({k for e in table["entries"] for k in e["scores"]})
    head = ["model", "bpw (all)", "bpw (projections)", "held-out loss", "Δ loss", "gap recovered", *[f"{k} (% of 16-bit)" for k in keys]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in table["entries"]:
        cells = [
            e["label"], f"{e['bpw']:.2f}", f"{e['projection_bpw']:.2f}", f"{e['heldout_loss']:.4f}", f"{e['heldout_delta']:+.4f}",
            "" if e["recovered"] is None else f"{100 * e['recovered']:.0f}%",
        ]
        for k in keys:
            v, pct, err = e["scores"].get(k), e["scores_pct"].get(k), e.get("stderr", {}).get(k)
            text = "" if v is None else f"{v:.3f}" + ("" if err is None else f" ± {err:.3f}")
            cells.append(text + ("" if pct is None else f" ({pct:.0f}%)"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(table: dict[str, Any], out: str | Path) -> Path:
    """Held-out loss per model, bars grouped as the table lists them, reference line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = table["entries"]
    labels = [e["label"] for e in entries]
    losses = [e["heldout_loss"] for e in entries]
    colors = ["#4c72b0" if not e["quantized"] else ("#dd8452" if e["adapter_rank"] is None else "#55a868")
              for e in entries]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(entries) + 2), 4))
    ax.bar(range(len(entries)), losses, color=colors)
    ax.axhline(losses[0], color="#4c72b0", linestyle="--", linewidth=1, label=f"{labels[0]} ({losses[0]:.3f})")
    lo = min(losses)
    hi = max(losses)
    ax.set_ylim(lo - 0.15 * (hi - lo + 1e-3), hi + 0.15 * (hi - lo + 1e-3))
    ax.set_xticks(range(len(entries)), labels, rotation=30, ha="right")
    ax.set_ylabel("held-out loss (nats/token)")
    ax.set_title("quantized (orange) and accuracy-recovered (green) vs 16-bit (blue)")
    ax.legend(loc="upper left")
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def write(table: dict[str, Any], out_prefix: str | Path) -> dict[str, Path]:
    prefix = Path(out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    paths = {"json": prefix.with_suffix(".json"), "md": prefix.with_suffix(".md"), "png": prefix.with_suffix(".png")}
    paths["json"].write_text(json.dumps(table, indent=2) + "\n")
    paths["md"].write_text(markdown(table))
    plot(table, paths["png"])
    return paths
