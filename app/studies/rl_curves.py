"""Curves of online-RL runs (``metrics.jsonl`` of ``afm rl mdloo``) as one PNG."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from afm.training.core.metrics import read_metrics
from afm.training.tasks.mdloo import iteration_rows


def plot_rl_curves(metrics_files: Sequence[str], out: str, *, labels: Sequence[str] | None = None) -> str:
    """Sampled reward, KL to the reference, KL to pi_k and response length per iteration,
    and the held-out true reward (greedy, and sampled when logged) (from ``summary.json`` beside each metrics file)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("reward", "sampled reward"), ("kl_ref", "KL(pi_k || pi_ref)"),
            ("kl_prev", "KL(pi || pi_k) after update"), ("length", "response tokens")]
    fig, axes = plt.subplots(1, len(keys) + 1, figsize=(4 * (len(keys) + 1), 3.2))
    for i, path in enumerate(metrics_files):
        summary = Path(path).with_name("summary.json")
        spi = json.loads(summary.read_text())["task_options"]["steps_per_iteration"] if summary.exists() else 1
        rows = iteration_rows(read_metrics(Path(path).parent), spi)
        label = labels[i] if labels else Path(path).parent.name
        for ax, (key, title) in zip(axes, keys):
            xs, ys = [r["iteration"] for r in rows], [r[key] for r in rows]
            line, = ax.plot(xs, ys, linewidth=0.8, alpha=0.5)
            # Per-iteration values are noisy (n x K samples): a 10-iteration running mean on top.
            width = min(10, len(ys))
            smooth = [sum(ys[max(0, i - width + 1):i + 1]) / len(ys[max(0, i - width + 1):i + 1])
                      for i in range(len(ys))]
            ax.plot(xs, smooth, color=line.get_color(), linewidth=2, label=label)
            ax.set_title(title)
            ax.set_xlabel("iteration")
        if summary.exists():
            ev = json.loads(summary.read_text()).get("eval", [])
            line, = axes[-1].plot([e["iteration"] for e in ev], [e["reward"] for e in ev], marker="o",
                                  label=f"{label} greedy")
            sampled = [e for e in ev if "sampled_reward" in e]
            if sampled:
                axes[-1].plot([e["iteration"] for e in sampled], [e["sampled_reward"] for e in sampled],
                              marker="s", linestyle="--", color=line.get_color(), label=f"{label} sampled")
    axes[-1].set_title("held-out true reward")
    axes[-1].legend(fontsize=7)
    axes[-1].set_xlabel("iteration")
    axes[0].legend()
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


__all__ = ["plot_rl_curves"]
