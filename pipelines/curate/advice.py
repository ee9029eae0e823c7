"""Which stages rejected most, and the setting that relaxes each.

A user who sees 26 of 250 documents kept needs two facts: where the others went and what
to change. :func:`rejection_advice` reads a run's funnel (the manifest's ``funnel``) and
names the stages that rejected most, each with its most frequent reason and the
``--set`` override that relaxes it (for the quality heuristics, the rule behind the
reason). Each stage's advice is written once, in its registry entry, so the terminal
summary and ``report.html`` say the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from afm.pipelines.curate.stages import registry

# What relaxes the steps every run has that are not stages (the stages' own advice is in
# their registry entries, afm.pipelines.curate.stages).
STEP_SETTINGS: dict[str, str] = {
    "read": "nothing to relax: the records could not be read; rejects-*.parquet names the "
            "file, place and error of each",
    "ids": "give every record a unique id (two records shared one; the first was kept)",
}


@dataclass(frozen=True)
class StageAdvice:
    """One stage that rejected documents: how many, its main reason, what relaxes it."""

    stage: str
    rejected: int
    share: float  # of every document the run read
    top_reason: str
    top_reason_count: int
    setting: str

    def line(self) -> str:
        return (f"{self.stage}: {self.rejected:,} rejected ({100 * self.share:.0f}% of the input; "
                f"most: {self.top_reason} {self.top_reason_count:,}). To keep more: {self.setting}")


def setting_for(stage: str, reason: str) -> str:
    """The override that relaxes ``stage`` for ``reason``: the stage's setting for the
    reason's first matching prefix, else the stage's own advice."""
    bare = reason.split(":", 1)[-1]
    reg = registry()
    if stage not in reg:
        return STEP_SETTINGS.get(stage, f"see the {stage} stage's parameters (afm curate --help)")
    for prefix, setting in reg[stage].reason_advice:
        if bare.startswith(prefix):
            return setting
    return reg[stage].advice


def rejection_advice(funnel: list[dict[str, Any]], top: int = 3) -> list[StageAdvice]:
    """The ``top`` stages by documents rejected (none that rejected nothing), largest first."""
    total = funnel[0]["in"] if funnel else 0
    out = []
    for f in funnel:
        if not f.get("dropped"):
            continue
        reasons = f.get("reasons") or {}
        reason, count = max(reasons.items(), key=lambda kv: (kv[1], kv[0])) if reasons else ("-", 0)
        out.append(StageAdvice(f["stage"], int(f["dropped"]), f["dropped"] / total if total else 0.0,
                               reason, int(count), setting_for(f["stage"], reason)))
    out.sort(key=lambda a: (-a.rejected, a.stage))
    return out[:top]


__all__ = ["STEP_SETTINGS", "StageAdvice", "rejection_advice", "setting_for"]
