"""AFM optimizer vs Appendix A's AdamW baseline: same config, data and steps; one plot.

The baseline switches only the optimizer block: AdamW (b1 0.9, b2 0.95, eps 1e-15),
weight decay 1e-4 and a schedule decaying to 1e-4 of peak (report, Appendix A). Both
runs use the same decoupled, scheduled weight decay and the same muParam multipliers,
so the curves differ by the update rule only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from afm.training.core.metrics import read_metrics
from afm.training.runs.train import train

ADAMW_APPENDIX_A = [
    "optimizer.name=adamw",
    "optimizer.b1=0.9",
    "optimizer.b2=0.95",
    "optimizer.eps=1.0e-15",
    "optimizer.weight_decay=0.0001",
    "schedule.final_fraction=0.0001",
]


def _tail_mean(rows: list[dict[str, Any]], n: int = 5) -> float:
    losses = [float(r["loss"]) for r in rows[-n:]]
    return sum(losses) / max(len(losses), 1)


def compare_optimizers(
    config: str,
    data: list[str],
    out: Path,
    *,
    steps: int | None = None,
    adamw_lr: float | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """Run both optimizers into ``out/afm`` and ``out/adamw``; plot and summarise."""
    out = Path(out)
    common = [*(overrides or []), "log_every=1"]
    afm = train(config, out / "afm", steps=steps, data=data, overrides=common, quiet=True)
    base_over = [*common, *ADAMW_APPENDIX_A]
    if adamw_lr is not None:
        base_over.append(f"optimizer.learning_rate={float(adamw_lr):.10e}")
    adamw = train(config, out / "adamw", steps=steps, data=data, overrides=base_over, quiet=True)
    curves = {"AFM RMSProp+momentum": read_metrics(out / "afm"), "AdamW (App. A)": read_metrics(out / "adamw")}
    plot = plot_curves(curves, out / "optimizer_comparison.png", title=f"{config}: AFM optimizer vs AdamW")
    return {
        "steps": afm["steps"],
        "afm final loss (mean of last 5)": _tail_mean(curves["AFM RMSProp+momentum"]),
        "adamw final loss (mean of last 5)": _tail_mean(curves["AdamW (App. A)"]),
        "afm first loss": afm["first_loss"],
        "adamw first loss": adamw["first_loss"],
        "plot": str(plot) if plot else "matplotlib not installed: no plot",
    }


def plot_curves(curves: dict[str, list[dict[str, Any]]], path: Path, title: str) -> Path | None:
    """Loss vs step for each run as a PNG (None when matplotlib is unavailable)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, rows in curves.items():
        ax.plot([r["step"] for r in rows], [float(r["loss"]) for r in rows], label=label, linewidth=1.4)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats/token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
