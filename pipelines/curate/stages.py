"""The curate pipeline's stages: which module implements each, in which order they run.

A stage is either a per-page step (extraction: crawl record -> document), a per-document
filter (``name`` + ``__call__(doc) -> Decision``, logic in ``afm.filters``), or a global
Beam transform (dedup, decontamination) returning ``{"kept": ..., "rejected": ...}``.
Every stage is looked up by import path at run time, so a stage whose module is not
installed is reported as unavailable (and passes documents through, counted) instead of
breaking the whole pipeline; a stage whose *config* is wrong fails before any work starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from afm.config import ConfigError, load_config, to_dict
from afm.imports import probe, resolve

StageKind = Literal["page", "document", "global"]


@dataclass(frozen=True)
class StageSpec:
    """Where a stage's implementation lives and what shape it has."""

    name: str
    kind: StageKind
    module: str
    factory: str  # the filter / transform class
    config_class: str  # its typed config dataclass
    description: str


STAGES: dict[str, StageSpec] = {
    s.name: s
    for s in (
        StageSpec("extract", "page", "afm.filters.extract", "Extractor", "ExtractConfig",
                  "main text from HTML (trafilatura + fallback)"),
        StageSpec("language", "document", "afm.filters.language", "LanguageFilter",
                  "LanguageConfig", "fastText language id, keep-list + threshold"),
        StageSpec("math", "document", "afm.filters.math", "MathFilter", "MathConfig",
                  "math tags / symbols / classifier / domains"),
        StageSpec("code", "document", "afm.filters.code", "CodeFilter", "CodeConfig",
                  "licence allow-list, language, code quality, secrets"),
        StageSpec("safety", "document", "afm.filters.safety", "SafetyFilter", "SafetyConfig",
                  "profanity / adult / spam heuristics + classifier"),
        StageSpec("pii", "document", "afm.filters.pii", "PiiFilter", "PiiConfig",
                  "PII replaced by typed placeholders; mostly-PII pages dropped"),
        StageSpec("dedup", "global", "afm.pipelines.dedup.pipeline", "FuzzyDedup", "DedupConfig",
                  "exact + MinHash LSH fuzzy de-duplication across the corpus"),
        StageSpec("quality", "document", "afm.filters.quality", "QualityHeuristicsFilter",
                  "QualityConfig", "Gopher / C4 / FineWeb heuristic rules"),
        StageSpec("quality_model", "document", "afm.filters.quality_model",
                  "QualityClassifierFilter", "QualityModelConfig",
                  "fastText quality classifier (threshold or global top fraction)"),
        StageSpec("decontaminate", "global", "afm.pipelines.decontaminate", "Decontaminate",
                  "DecontamConfig", "benchmark n-gram collisions (common-usage threshold)"),
    )
}

# The report's order (extract -> language -> safety -> PII -> dedup -> quality ->
# decontamination). Within "quality" the cheap heuristics run before the classifier: a
# document dropped by either is dropped, so the order changes only which one is named.
# Quality stays after dedup, as in the report. Dedup keeps the copy with the highest
# ``quality_score`` when the input already carries one (e.g. re-curating scored shards);
# on fresh crawl output no score exists yet, so the smallest id wins a cluster.
SOURCE_STAGES: dict[str, tuple[str, ...]] = {
    "web": ("extract", "language", "safety", "pii", "dedup", "quality", "quality_model",
            "decontaminate"),
    # Math pages (report 3.1.4): the math filters decide what is a math page first (cheap
    # tag/symbol checks), then the same safety/PII/dedup/decontamination as the web.
    "math": ("extract", "language", "math", "safety", "pii", "dedup", "decontaminate"),
    # Code files (report 3.1.3): licence + quality + secrets, PII, dedup, decontamination.
    "code": ("code", "pii", "dedup", "decontaminate"),
}


# Stage parameters a source changes from the stage's own defaults (user params still win):
# on the math source the math filter must find math evidence to keep a page.
SOURCE_PARAM_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "math": {"math": {"require_math": True}},
}


@dataclass
class ResolvedStage:
    """A stage as it will run: its typed config, or why it cannot run."""

    name: str
    kind: StageKind
    enabled: bool
    available: bool
    status: str  # "ready" | "disabled" | "unavailable: <why>"
    config: Any = None  # the stage's own config dataclass (None when unavailable)

    @property
    def active(self) -> bool:
        return self.enabled and self.available

    def describe(self) -> dict[str, Any]:
        return {
            "stage": self.name,
            "kind": self.kind,
            "enabled": self.enabled,
            "status": self.status,
            "config": to_dict(self.config) if self.config is not None else None,
        }


def load_attr(module: str, attr: str) -> Any:
    """``module.attr`` (through the one resolver, :func:`afm.imports.resolve`)."""
    return resolve(f"{module}:{attr}", what="stage component")


def resolve_stage(name: str, enabled: bool, params: dict[str, Any]) -> ResolvedStage:
    """Import a stage's module and build its typed config from ``params``.

    A missing module makes the stage *unavailable* (reported, documents pass through);
    unknown or ill-typed ``params`` raise :class:`ConfigError` (a typo must not silently
    disable a filter).
    """
    spec = STAGES[name]
    if not enabled:
        return ResolvedStage(name, spec.kind, False, True, "disabled")
    why = probe(spec.module, spec.factory, spec.config_class)
    if why is not None:
        return ResolvedStage(name, spec.kind, True, False, f"unavailable: {why}")
    cfg_cls = load_attr(spec.module, spec.config_class)
    try:
        cfg = load_config(cfg_cls, dict(params))
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from exc
    return ResolvedStage(name, spec.kind, True, True, "ready", cfg)


def build_stage_object(stage: ResolvedStage) -> Any:
    """The filter / extractor / transform instance for an active stage."""
    spec = STAGES[stage.name]
    return load_attr(spec.module, spec.factory)(stage.config)
