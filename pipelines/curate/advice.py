"""Which stages rejected most, and the setting that relaxes each.

A user who sees 26 of 250 documents kept needs two facts: where the others went and what
to change. :func:`rejection_advice` reads a run's funnel (the manifest's ``funnel``) and
names the stages that rejected most, each with its most frequent reason and the
``--set`` override that relaxes it (for the quality heuristics, the rule behind the
reason). The settings are written here, once, next to the stage registry, so the
terminal summary and ``report.html`` say the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Stage -> what to change to keep more (a `--set` override, and what it trades away).
STAGE_SETTINGS: dict[str, str] = {
    "read": "nothing to relax: the records could not be read; rejects-*.parquet names the "
            "file, place and error of each",
    "ids": "give every record a unique id (two records shared one; the first was kept)",
    "optout": "the publishers opted out of training; --set optout.enabled=false turns the "
              "check off (only for data you may use regardless)",
    "extract": "--set extract.params.favor_precision=false (recall over precision), "
               "--set extract.params.min_words=1",
    "language": "--set 'language.params.keep=[en,fr,de]' (languages kept) or "
                "--set language.params.min_score=0.4 (identification confidence)",
    "safety": "--set safety.params.use_model=false (word lists only) or raise "
              "safety.params.<kind>_max_ratio",
    "pii": "--set pii.params.drop_mostly_pii=false (redact, never drop)",
    "dedup": "--set dedup.params.threshold=0.9 (only closer copies count as duplicates)",
    "quality": "--set quality.params.<rule>=false: gopher_quality, gopher_repetition, c4, "
               "fineweb",
    "quality_model": "--set quality_model.params.threshold=0.3 (classifier score to keep), "
                     "or --set quality_model.enabled=false",
    "decontaminate": "benchmark text: keep these out. Only an n-gram in at least "
                     "decontaminate.params.threshold documents counts as common usage",
    "math": "--set math.params.require_math=false, or lower math.params.min_symbol_hits",
    "code": "--set code.params.require_license=false (licence allow-list), or raise "
            "code.params.max_line_length",
}

# Reasons whose own setting is more precise than the stage's (first matching prefix wins).
REASON_SETTINGS: tuple[tuple[str, str], ...] = (
    ("language_low_score", "--set language.params.min_score=0.4"),
    ("language_not_kept", "--set 'language.params.keep=[en,fr,de]' (the languages to keep)"),
    ("gopher_word_count", "--set quality.params.min_doc_words=20"),
    ("gopher_dup", "--set quality.params.gopher_repetition=false"),
    ("gopher_top", "--set quality.params.gopher_repetition=false"),
    ("gopher_", "--set quality.params.gopher_quality=false"),
    ("c4_min_sentences", "--set quality.params.c4_min_sentences=2"),
    ("c4_", "--set quality.params.c4=false"),
    ("fineweb_", "--set quality.params.fineweb=false"),
    ("quality_model_score", "--set quality_model.params.threshold=0.3"),
    ("mostly_pii", "--set pii.params.drop_mostly_pii=false"),
)


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
    """The override that relaxes ``stage`` for ``reason`` (the stage's when no reason's)."""
    bare = reason.split(":", 1)[-1]
    for prefix, setting in REASON_SETTINGS:
        if bare.startswith(prefix):
            return setting
    return STAGE_SETTINGS.get(stage, f"see the {stage} stage's parameters (afm curate --help)")


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


__all__ = ["REASON_SETTINGS", "STAGE_SETTINGS", "StageAdvice", "rejection_advice", "setting_for"]
