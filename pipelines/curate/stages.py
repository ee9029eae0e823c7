"""How the curate pipeline resolves its stages: typed configs, availability, instances.

Which stages exist, which module implements each and the order they run in per source
is the one registry of ``afm.filters.registry`` (also what ``afm inspect`` and ``afm sft
prepare`` follow). Here each stage is looked up by import path at run time, so a stage
whose module is not installed is reported as unavailable (and passes documents through,
counted) instead of breaking the whole pipeline; a stage whose *config* is wrong fails
before any work starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from afm.filters.registry import SOURCE_PARAM_DEFAULTS, SOURCE_STAGES, STAGES, StageKind, StageSpec

from afm.config import ConfigError, load_config, to_dict
from afm.imports import probe, resolve

__all__ = ["SOURCE_PARAM_DEFAULTS", "SOURCE_STAGES", "STAGES", "ResolvedStage", "StageKind", "StageSpec",
           "build_stage_object", "load_attr", "resolve_stage"]

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
