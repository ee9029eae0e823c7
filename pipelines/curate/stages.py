"""The one registry of curation stages, the one order they run in per source, and the one
way a stage is built, whichever command runs it.

:data:`STAGES` says, for every stage name, which module implements it and what shape it
has: a per-page step (extraction: crawl record -> document), a per-document filter
(``name`` + ``__call__(doc) -> Decision``, logic in ``afm.filters``) or a global Beam
transform (dedup, decontamination: ``afm.pipelines``). Implementations are named by import
path and resolved at run time (:mod:`afm.imports`), so this module imports neither the
filters nor Beam. It lives in ``pipelines`` because its global stages are Beam transforms:
the filters layer below knows nothing of them.

:data:`SOURCE_STAGES` is the one list of which stages run, in which order, per source:
``afm curate`` runs it, ``afm inspect`` shows the per-document filters of a source in the
same order (:func:`document_filters`), and ``afm sft prepare`` follows the ``chat`` entry
(its steps are the chat-data versions of the same stages). Both build a stage the same way,
:func:`resolve_stage` then :func:`build_stage_object`, with the source's parameter defaults.

The web order follows the AFM report (§3.1.1): publishers' opt-outs first (a ``record``
stage: it sees crawl pages, with their headers, and documents alike, right after
reading; ``afm.filters.optout``), extraction, language ID (cheap, and the
safety word lists use its label), safety/profanity, PII redaction (so no later stage or
record sees the personal data), de-duplication, quality (heuristics before the
classifier: a document dropped by either is dropped, so the order changes only which one
is named), decontamination. Dedup keeps the copy with the highest ``quality_score`` when
the input already carries one (re-curating scored shards); on fresh crawl output no score
exists yet, so the smallest id wins a cluster.

To add a filter: write it in ``filters/`` (the contract is ``filters/base.py``), add a
:class:`StageSpec` here and put its name in the sources that should run it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from afm.config import ConfigError, load_config, to_dict
from afm.errors import UserError
from afm.imports import probe, resolve
from afm.pipelines.beam.worker_paths import Access, WorkerPath

StageKind = Literal["record", "page", "document", "global"]


@dataclass(frozen=True)
class StageSpec:
    """Where a stage's implementation lives and what shape it has."""

    name: str
    kind: StageKind
    module: str
    factory: str  # the filter / transform class
    config_class: str  # its typed config dataclass
    description: str
    # A document filter whose ``decide_batch(docs)`` decides many documents in one call
    # (a model scoring a batch); the stage feeds it batches of its config's ``batch_size``.
    batched: bool = False


STAGES: dict[str, StageSpec] = {
    s.name: s
    for s in (
        StageSpec("optout", "record", "afm.filters.optout", "OptoutFilter", "OptoutConfig",
                  "publishers' training opt-outs: domain list, noai / TDMRep, robots.txt "
                  "snapshots (training token)"),
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
                  "quality model: fastText or Hugging Face classifier, batched (threshold or "
                  "global top fraction)", batched=True),
        StageSpec("decontaminate", "global", "afm.pipelines.decontaminate", "Decontaminate",
                  "DecontamConfig", "benchmark n-gram collisions (common-usage threshold)"),
    )
}

SOURCE_STAGES: dict[str, tuple[str, ...]] = {
    "web": ("optout", "extract", "language", "safety", "pii", "dedup", "quality", "quality_model",
            "decontaminate"),
    # Math pages (report 3.1.4): the math filters decide what is a math page first (cheap
    # tag/symbol checks), then the same safety/PII/dedup/decontamination as the web.
    "math": ("optout", "extract", "language", "math", "safety", "pii", "dedup", "decontaminate"),
    # Code files (report 3.1.3): licence + quality + secrets, PII, dedup, decontamination.
    "code": ("code", "pii", "dedup", "decontaminate"),
    # Chat data for SFT (`afm sft prepare`, report §4.1): the conversation format check
    # (``afm.synth.formats``) stands for extraction, the chat template's tokenization
    # comes before decontamination (whose n-grams are counted over the rendered set).
    "chat": ("format", "pii", "dedup", "tokenize", "decontaminate"),
}
CURATE_SOURCES = ("web", "math", "code")  # what `afm curate --source` runs on Beam

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


def stage_params(name: str, source: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stage's parameters on ``source``: the source's defaults (:data:`SOURCE_PARAM_DEFAULTS`),
    then the user's ``params`` on top."""
    return {**SOURCE_PARAM_DEFAULTS.get(source, {}).get(name, {}), **dict(params or {})}


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


class FilterSetupError(UserError):
    """A configured per-document filter could not be built (bad config, missing model file...)."""


def check_setup(stages: list[ResolvedStage]) -> None:
    """Build, on the launcher, every active document stage whose filter has a
    ``preflight()`` and run it, so a model that does not fit its config (a missing file,
    a positive label the model lacks) is one error line before any work, not a crash in
    a worker."""
    for stage in stages:
        if not stage.active or stage.kind != "document":
            continue
        spec = STAGES[stage.name]
        if not hasattr(load_attr(spec.module, spec.factory), "preflight"):
            continue
        try:
            build_stage_object(stage).preflight()
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - one line naming the stage
            raise FilterSetupError(f"{stage.name}: {exc}") from exc


def filter_names(source: str = "web") -> tuple[str, ...]:
    """The per-document filters of ``source``, in the order they run."""
    if source not in SOURCE_STAGES:
        raise FilterSetupError(f"unknown source {source!r}; known: {sorted(SOURCE_STAGES)}")
    return tuple(n for n in SOURCE_STAGES[source] if n in STAGES and STAGES[n].kind == "document")


def document_filters(
    config: dict[str, Any] | None = None, *, source: str = "web", strict: bool = True,
    skipped: dict[str, str] | None = None,
) -> list[Any]:
    """The per-document filters of ``source`` in pipeline order, built as ``afm curate``
    builds them (:func:`resolve_stage`, :func:`build_stage_object`, the source's defaults).

    ``config`` maps a filter name to a dict of its config fields, or to ``False`` to leave
    that filter out. Unknown names or fields raise :class:`FilterSetupError`. A filter that
    cannot run in this installation is left out and named in ``skipped`` with the reason;
    with ``strict=False`` (``afm inspect``) so is a filter that is *not* configured and fails
    to build with its defaults (its model file is absent, say).
    """
    names = filter_names(source)
    config = dict(config or {})
    unknown = set(config) - set(names)
    if unknown:
        raise FilterSetupError(f"unknown filters {sorted(unknown)}; known: {list(names)}")
    skipped = {} if skipped is None else skipped
    out: list[Any] = []
    for name in names:
        section = config.get(name, {})
        if section is False:
            continue
        if section is None or section is True:
            section = {}
        if not isinstance(section, dict):
            raise FilterSetupError(f"config for {name!r} must be a mapping or false")
        try:
            stage = resolve_stage(name, True, stage_params(name, source, section))
        except ConfigError as exc:
            raise FilterSetupError(f"cannot build filter {name!r}: {exc}") from exc
        if not stage.available:
            skipped[name] = stage.status
            continue
        try:
            out.append(build_stage_object(stage))
        except Exception as exc:  # noqa: BLE001 - reported with the filter's name
            if strict or name in config:
                raise FilterSetupError(f"cannot build filter {name!r}: {exc}") from exc
            skipped[name] = f"{type(exc).__name__}: {exc}"
    return out


# Stage config fields that name a file or directory a worker opens.
STAGE_PATH_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "language": (("model_path", "language model"),),
    "safety": (("model_path", "safety model"), ("wordlist_dir", "safety word lists")),
    "math": (("quality_model_path", "math quality model"),),
    "quality_model": (("model_path", "quality model"),),
    "dedup": (("index_dir", "dedup index"),),
}


def stage_paths(stages: list[ResolvedStage]) -> list[WorkerPath]:
    """The paths the active stages' workers open (from their typed configs)."""
    out: list[WorkerPath] = []
    for stage in stages:
        if not stage.active:
            continue
        cfg = stage.config
        if stage.name == "decontaminate":
            from afm.pipelines.decontaminate import index_location

            # An index named is read; one built from `benchmarks` is made by the launcher.
            out.append(WorkerPath("decontamination index", index_location(cfg),
                                  "read" if cfg.index else "write"))
            continue
        if stage.name == "optout":
            out += [WorkerPath("robots snapshots", p) for p in cfg.snapshots]
            if cfg.domains_file:
                out.append(WorkerPath("opt-out domain list", cfg.domains_file))
            continue
        for field_name, role in STAGE_PATH_FIELDS.get(stage.name, ()):
            value = getattr(cfg, field_name, None)
            if isinstance(value, str) and value:
                access: Access = "write" if (stage.name == "dedup"
                                             and getattr(cfg, "write_index", False)) else "read"
                out.append(WorkerPath(role, value, access))
    return out


__all__ = ["CURATE_SOURCES", "SOURCE_PARAM_DEFAULTS", "SOURCE_STAGES", "STAGES", "FilterSetupError",
           "ResolvedStage", "StageKind", "StageSpec", "build_stage_object", "check_setup", "document_filters", "filter_names",
           "load_attr", "resolve_stage", "stage_params", "stage_paths"]
