"""The one registry of curation stages: each stage one object, whichever command runs it.

A :class:`Stage` says everything the rest of afm needs to know about a stage: its shape (a
``record`` stage that sees crawl pages and documents right after reading, a ``page`` stage
that turns a crawl page into a document, a per-``document`` filter, or a ``global`` Beam
transform over the whole corpus), the class that implements it and its typed config class
(named by import path, resolved when needed, so this module imports neither the filters nor
Beam), the sources that run it, the files its workers open, the advice a run gives when it
rejects much, its parameter defaults per source, the stages it needs before it, and the
hooks a stage may have (adjust its config from the run's inputs or from the other stages,
check what a run needs, warn, report what it removed). ``CurateConfig`` (its stage
sections, typed when loaded), the run summary and ``report.html``, ``afm inspect``,
``afm sft prepare`` and the advice are all built from the registry; no code outside a
stage's own module branches on its name.

:data:`REGISTRY` is the registry ``afm curate`` uses; its order is the run order (each
source runs the stages that name it, in that order). It lives in ``pipelines`` because its
global stages are Beam transforms: the filters layer below knows nothing of them.

The web order follows the AFM report (§3.1.1): publishers' opt-outs first (a ``record``
stage: it sees crawl pages, with their headers, and documents alike, right after reading;
``afm.filters.optout``), extraction, language ID (cheap, and the safety word lists use its
label), safety/profanity, PII redaction (so no later stage or record sees the personal
data), de-duplication, quality (heuristics before the classifier: a document dropped by
either is dropped, so the order changes only which one is named), decontamination. Dedup
keeps the copy with the highest ``quality_score`` when the input already carries one
(re-curating scored shards); on fresh crawl output no score exists yet, so the smallest id
wins a cluster.

To add a filter: write it in ``filters/`` (the contract is ``filters/base.py``) and add one
:class:`Stage` to :data:`REGISTRY` (``filters/README.md`` walks through it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from afm.config import ConfigError, from_dict, to_dict
from afm.errors import UserError
from afm.imports import probe, resolve, split_target
from afm.pipelines.beam.worker_paths import Access, WorkerPath

StageKind = Literal["record", "page", "document", "global"]
KINDS: tuple[str, ...] = ("record", "page", "document", "global")
CURATE_SOURCES = ("web", "math", "code")  # what `afm curate --source` runs on Beam


@dataclass(frozen=True)
class PathField:
    """A field of a stage's config that names a file or directory its workers open (a list
    value names several). ``write_when``: a boolean attribute of the config that makes the
    workers write there rather than read."""

    field: str
    role: str  # what it is, for the pre-flight check's message
    write_when: str = ""


@dataclass(frozen=True)
class Stage:
    """One curation stage, as the whole of afm sees it (see the module docstring).

    Hooks are ``package.module:function`` names, resolved on the launcher when used:

    * ``prepare(config, inputs, in_job=())``: adjust the config from the run's inputs and
      check what the workers will read, before any work (a missing snapshot source is one
      line here); ``in_job``: inputs the job itself writes before reading them (``afm curate
      --urls``'s fetch directory), not there yet;
    * ``link(config, stages)``: follow another stage of the run (``stages``: name ->
      :class:`ResolvedStage`, this stage's own module names the other);
    * ``check(config)``: what a run needs beyond a well-formed config (raise a user error);
    * ``warnings(config, counts)``: lines for the manifest and the terminal after a run;
    * ``report(rejects, documents, pipeline)``: a Beam transform over the stage's rejects
      and the documents of the run that returns one ``(name, report)``; ``summary(report)``
      and ``report_html(report)`` show it in the run summary and ``report.html``.
    """

    name: str
    kind: StageKind
    implementation: str  # "package.module:Class": built with the typed config
    config: str  # "package.module:ConfigClass"
    description: str
    sources: tuple[str, ...]  # the sources that run it (``chat``: ``afm sft prepare``)
    advice: str  # what to change to keep more, for the stage's rejects
    reason_advice: tuple[tuple[str, str], ...] = ()  # (reason prefix, a more precise setting)
    paths: tuple[PathField, ...] = ()
    source_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    needs: tuple[str, ...] = ()  # stages that must run before it whenever both run
    batched: bool = False  # a document filter deciding batches (``decide_batch``, ``batch_size``)
    # Off unless the run asks for it (``<stage>.enabled=true``, its params set, or its name
    # in ``stages``): a stage that has not earned a place in every run.
    enabled_by_default: bool = True
    # Switched off while in the run, the manifest's ``off_flag`` says "off" and the run
    # prints ``off_warning`` (a safeguard that must never look applied when it was not).
    off_flag: str = ""
    off_warning: str = ""
    prepare: str = ""
    link: str = ""
    check: str = ""
    warnings: str = ""
    report: str = ""
    summary: str = ""
    report_html: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"stage {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        for target in (self.implementation, self.config, *self.hooks().values()):
            split_target(target, what=f"stage {self.name}")
        if self.batched and self.kind != "document":
            raise ValueError(f"stage {self.name}: only a document stage decides batches")

    def hooks(self) -> dict[str, str]:
        """The hooks this stage has: name -> ``package.module:function``."""
        names = ("prepare", "link", "check", "warnings", "report", "summary", "report_html")
        return {n: getattr(self, n) for n in names if getattr(self, n)}

    def hook(self, name: str) -> Any:
        """The hook function ``name``, or None when the stage has none."""
        target = getattr(self, name)
        return resolve(target, what=f"stage {self.name} hook {name}") if target else None

    def config_class(self) -> type:
        return resolve(self.config, what=f"stage {self.name} config")


class StageRegistry:
    """Stages by name, in run order. ``copy()`` is a scratch registry (a test, or a program
    that adds its own stage), made the one in use with :func:`using`."""

    def __init__(self, stages: Iterable[Stage] = ()) -> None:
        self._stages: dict[str, Stage] = {}
        for stage in stages:
            self.register(stage)

    def register(self, stage: Stage, *, before: str | None = None) -> Stage:
        """Add ``stage`` (at the end of the run order, or before stage ``before``)."""
        if stage.name in self._stages or stage.name in RESERVED:
            raise ValueError(f"stage {stage.name!r} is already registered or reserved")
        unknown = [n for n in stage.needs if n not in self._stages]
        if unknown:
            raise ValueError(f"stage {stage.name} needs {unknown}, which are not registered before it")
        items = list(self._stages.items())
        at = len(items) if before is None else [n for n, _ in items].index(before)
        items.insert(at, (stage.name, stage))
        self._stages = dict(items)
        return stage

    def copy(self) -> StageRegistry:
        return StageRegistry(self._stages.values())

    def __getitem__(self, name: str) -> Stage:
        try:
            return self._stages[name]
        except KeyError:
            raise ConfigError(f"unknown stage {name!r}; known: {list(self._stages)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._stages

    def __iter__(self) -> Iterator[Stage]:
        return iter(self._stages.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._stages)

    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for stage in self for s in stage.sources))

    def order(self, source: str) -> tuple[str, ...]:
        """The stages ``source`` runs, in run order."""
        names = tuple(s.name for s in self if source in s.sources)
        if not names:
            raise ConfigError(f"unknown source {source!r}; known: {list(self.sources())}")
        return names

    def check_order(self, names: Iterable[str]) -> None:
        """Raise when a stage of ``names`` comes before a stage it needs."""
        names = list(names)
        for i, name in enumerate(names):
            late = [n for n in self[name].needs if n in names[i + 1:]]
            if late:
                raise ConfigError(f"stages: {name} needs {late} before it, in {names}")


# Steps every run has that are not stages (they keep their names in funnels and rejects).
RESERVED = ("read", "ids", "write")

REGISTRY = StageRegistry([
    Stage("optout", "record", "afm.filters.optout:OptoutFilter", "afm.filters.optout:OptoutConfig",
          "publishers' training opt-outs: domain list, noai / TDMRep, robots.txt snapshots "
          "(training token)", sources=("web", "math"),
          advice="the publishers opted out of training; --set optout.enabled=false turns the "
                 "check off (only for data you may use regardless)",
          paths=(PathField("snapshots", "robots snapshots"), PathField("domains_file", "opt-out domain list")),
          prepare="afm.filters.optout:prepare_run", warnings="afm.filters.optout:run_warnings",
          report="afm.pipelines.curate.optout_cost:optout_cost",
          summary="afm.pipelines.curate.optout_cost:summary_line",
          report_html="afm.pipelines.curate.optout_cost:report_html"),
    Stage("extract", "page", "afm.filters.extract:Extractor", "afm.filters.extract:ExtractConfig",
          "main text from HTML (method: selector cascade, blocks, trafilatura or rules)",
          sources=("web", "math"),
          advice="--set extract.params.method=trafilatura (trafilatura alone), "
                 "--set extract.params.min_words=1",
          needs=("optout",), link="afm.filters.extract:follow_language_stage"),
    Stage("language", "document", "afm.filters.language:LanguageFilter", "afm.filters.language:LanguageConfig",
          "fastText language id, keep-list + threshold", sources=("web", "math"),
          advice="--set 'language.params.keep=[en,fr,de]' (languages kept) or "
                 "--set language.params.min_score=0.4 (identification confidence)",
          reason_advice=(("language_low_score", "--set language.params.min_score=0.4"),
                         ("language_not_kept", "--set 'language.params.keep=[en,fr,de]' (the languages to keep)")),
          paths=(PathField("model_path", "language model"),), needs=("extract",)),
    Stage("math", "document", "afm.filters.math:MathFilter", "afm.filters.math:MathConfig",
          "math tags / symbols / classifier / domains", sources=("math",),
          advice="--set math.params.require_math=false, or lower math.params.min_symbol_hits",
          paths=(PathField("quality_model_path", "math quality model"),),
          # On the math source the math filter must find math evidence to keep a page.
          source_defaults={"math": {"require_math": True}}, needs=("language",)),
    Stage("code", "document", "afm.filters.code:CodeFilter", "afm.filters.code:CodeConfig",
          "licence allow-list, language, code quality, secrets", sources=("code",),
          advice="--set code.params.require_license=false (licence allow-list), or raise "
                 "code.params.max_line_length"),
    Stage("safety", "document", "afm.filters.safety:SafetyFilter", "afm.filters.safety:SafetyConfig",
          "profanity / adult / spam heuristics + classifier", sources=("web", "math"),
          advice="--set safety.params.use_model=false (word lists only) or raise "
                 "safety.params.<kind>_max_ratio",
          paths=(PathField("model_path", "safety model"), PathField("wordlist_dir", "safety word lists")),
          needs=("language",)),
    Stage("pii", "document", "afm.filters.pii:PiiFilter", "afm.filters.pii:PiiConfig",
          "PII replaced by typed placeholders; mostly-PII pages dropped",
          sources=("web", "math", "code", "chat"),
          advice="--set pii.params.drop_mostly_pii=false (redact, never drop)",
          reason_advice=(("mostly_pii", "--set pii.params.drop_mostly_pii=false"),)),
    Stage("dedup", "global", "afm.pipelines.dedup.pipeline:FuzzyDedup", "afm.pipelines.dedup.pipeline:DedupConfig",
          "exact + MinHash LSH fuzzy de-duplication across the corpus",
          sources=("web", "math", "code", "chat"),
          advice="--set dedup.params.threshold=0.9 (only closer copies count as duplicates)",
          paths=(PathField("index_dir", "dedup index", write_when="write_index"),), needs=("pii",)),
    Stage("quality", "document", "afm.filters.quality.rules:QualityHeuristicsFilter", "afm.filters.quality.rules:QualityConfig",
          "Gopher / C4 / FineWeb heuristic rules", sources=("web",),
          advice="--set quality.params.<rule>=false: gopher_quality, gopher_repetition, c4, fineweb",
          reason_advice=(("gopher_word_count", "--set quality.params.min_doc_words=20"),
                         ("gopher_dup", "--set quality.params.gopher_repetition=false"),
                         ("gopher_top", "--set quality.params.gopher_repetition=false"),
                         ("gopher_", "--set quality.params.gopher_quality=false"),
                         ("c4_min_sentences", "--set quality.params.c4_min_sentences=2"),
                         ("c4_", "--set quality.params.c4=false"),
                         ("fineweb_", "--set quality.params.fineweb=false"),
                         ("afm_word_perplexity", "--set quality.params.max_word_perplexity=null"),
                         ("afm_chrome_model_share", "--set quality.params.max_chrome_model_share=0.6"),
                         ("afm_context_gain", "--set quality.params.min_context_gain=null")),
          paths=(PathField("word_lm", "word n-gram model"), PathField("chrome_model", "chrome line model"),
                 PathField("context_gain_model", "context-gain word model"))),
    Stage("quality_model", "document", "afm.filters.quality.model:QualityClassifierFilter",
          "afm.filters.quality.model:QualityModelConfig",
          "quality model: fastText or Hugging Face classifier, batched (threshold or global top fraction)",
          sources=("web",), batched=True,
          advice="--set quality_model.params.threshold=0.1 (classifier score to keep), "
                 "or --set quality_model.enabled=false",
          reason_advice=(("quality_model_score", "--set quality_model.params.threshold=0.1"),),
          paths=(PathField("model_path", "quality model"),), needs=("quality",),
          # Off by default: on held-out human-written text the shipped model costs more good
          # text (and more of some topics) than it may (docs/quality.md); on with
          # --set quality_model.enabled=true or any quality_model.params setting.
          enabled_by_default=False),
    Stage("decontaminate", "global", "afm.pipelines.decontaminate:Decontaminate",
          "afm.pipelines.decontaminate:DecontamConfig",
          "benchmark n-gram collisions (common-usage threshold)",
          sources=("web", "math", "code", "chat"),
          advice="benchmark text: keep these out. Only an n-gram in at least "
                 "decontaminate.params.threshold documents counts as common usage",
          paths=(PathField("worker_index", "decontamination index", write_when="builds_index"),),
          needs=("dedup",), check="afm.pipelines.decontaminate:check_runnable",
          off_flag="decontamination",
          off_warning="decontamination: off (the config turned the stage off); this corpus is NOT "
                      "checked against benchmarks"),
])

_ACTIVE: list[StageRegistry] = [REGISTRY]


def registry() -> StageRegistry:
    """The registry in use (:data:`REGISTRY` unless :func:`using` says otherwise)."""
    return _ACTIVE[-1]


@contextlib.contextmanager
def using(stages: StageRegistry) -> Iterator[StageRegistry]:
    """Run ``afm curate``, ``afm inspect`` and the rest with ``stages`` as the registry."""
    _ACTIVE.append(stages)
    try:
        yield stages
    finally:
        _ACTIVE.remove(stages)


@dataclass
class ResolvedStage:
    """A stage as it will run: its typed config, or why it cannot run. What the workers get
    of a stage (picklable: the implementation is named, not held)."""

    name: str
    kind: StageKind
    implementation: str
    enabled: bool
    available: bool
    status: str  # "ready" | "disabled" | "unavailable: <why>"
    config: Any = None  # the stage's own config dataclass (None when unavailable)
    batched: bool = False

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

    def build(self) -> Any:
        """The filter / extractor / transform instance of an active stage."""
        return resolve(self.implementation, what=f"stage {self.name}")(self.config)


def unavailable(stage: Stage) -> str | None:
    """Why ``stage`` cannot run in this installation (its module or an extra is missing)."""
    impl_module, impl_attr = split_target(stage.implementation)
    cfg_module, cfg_attr = split_target(stage.config)
    return probe(impl_module, impl_attr) or probe(cfg_module, cfg_attr)


def typed_params(stage: Stage, source: str, params: Mapping[str, Any] | Any) -> Any:
    """``params`` (a mapping from YAML or ``--set``, or a config object already) as the
    stage's typed config, the source's defaults under the user's values; a wrong or unknown
    field is a :class:`ConfigError` naming ``<stage>.params.<field>``."""
    cls = stage.config_class()
    if isinstance(params, cls):
        return params
    if not isinstance(params, Mapping):
        raise ConfigError(f"{stage.name}.params must be a mapping, got {type(params).__name__}")
    merged = {**stage.source_defaults.get(source, {}), **dict(params)}
    return from_dict(cls, merged, path=f"{stage.name}.params")


def resolve_stage(stage: Stage, enabled: bool, params: Any, source: str = "web") -> ResolvedStage:
    """A stage with its typed config. A missing module makes it *unavailable* (reported,
    documents pass through); unknown or ill-typed ``params`` raise :class:`ConfigError` (a
    typo must not silently disable a filter)."""
    base = dict(name=stage.name, kind=stage.kind, implementation=stage.implementation, batched=stage.batched)
    if not enabled:
        return ResolvedStage(**base, enabled=False, available=True, status="disabled")
    why = unavailable(stage)
    if why is not None:
        return ResolvedStage(**base, enabled=True, available=False, status=f"unavailable: {why}")
    return ResolvedStage(**base, enabled=True, available=True, status="ready",
                         config=typed_params(stage, source, params))


def link_stages(stages: list[ResolvedStage], stage_registry: StageRegistry | None = None) -> None:
    """Let each active stage with a ``link`` hook follow the other stages of the run."""
    reg = stage_registry or registry()
    by_name = {s.name: s for s in stages}
    for s in stages:
        hook = reg[s.name].hook("link") if s.active else None
        if hook is not None:
            hook(s.config, by_name)


def run_hooks(stages: list[ResolvedStage], name: str, *args: Any) -> list[Any]:
    """Call hook ``name`` of every active stage that has it, in run order: the results."""
    reg = registry()
    out = []
    for s in stages:
        hook = reg[s.name].hook(name) if s.active else None
        if hook is not None:
            out.append(hook(s.config, *args))
    return out


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
        if not hasattr(resolve(stage.implementation, what=f"stage {stage.name}"), "preflight"):
            continue
        try:
            stage.build().preflight()
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - one line naming the stage
            raise FilterSetupError(f"{stage.name}: {exc}") from exc


def filter_names(source: str = "web") -> tuple[str, ...]:
    """The stages ``afm inspect`` runs on one page of ``source``: its page and document
    stages, in run order (record and global stages need crawl metadata or the corpus)."""
    reg = registry()
    return tuple(n for n in reg.order(source) if reg[n].kind in ("page", "document"))


def page_filters(
    config: Mapping[str, Any] | None = None, *, source: str = "web", strict: bool = True,
    skipped: dict[str, str] | None = None,
) -> list[tuple[ResolvedStage, Any]]:
    """The page and document stages of ``source`` in run order, each with its built object,
    made as ``afm curate`` makes them (typed config, the source's defaults, links).

    ``config`` maps a stage name to a dict of its config fields, to ``True`` (its
    defaults; a stage off by default is left out unless named so), or to ``False`` to
    leave it out. Unknown names or fields raise :class:`FilterSetupError`. A stage that cannot
    run in this installation is left out and named in ``skipped`` with the reason; with
    ``strict=False`` (``afm inspect``) so is one that is *not* configured and fails to build
    with its defaults (its model file is absent, say)."""
    reg = registry()
    names = filter_names(source)
    config = dict(config or {})
    unknown = set(config) - set(names)
    if unknown:
        raise FilterSetupError(f"unknown filters {sorted(unknown)}; known: {list(names)}")
    skipped = {} if skipped is None else skipped
    resolved: list[ResolvedStage] = []
    for name in names:
        if name not in config and not reg[name].enabled_by_default:
            skipped[name] = f"off by default (on with --set {name}.enabled=true)"
            continue
        section = config.get(name, {})
        if section is False:
            continue
        if section is None or section is True:
            section = {}
        if not isinstance(section, Mapping):
            raise FilterSetupError(f"config for {name!r} must be a mapping or false")
        try:
            stage = resolve_stage(reg[name], True, section, source)
        except ConfigError as exc:
            raise FilterSetupError(f"cannot build filter {name!r}: {exc}") from exc
        if not stage.available:
            skipped[name] = stage.status
            continue
        resolved.append(stage)
    link_stages(resolved)
    out = []
    for stage in resolved:
        try:
            out.append((stage, stage.build()))
        except Exception as exc:  # noqa: BLE001 - reported with the filter's name
            if strict or stage.name in config:
                raise FilterSetupError(f"cannot build filter {stage.name!r}: {exc}") from exc
            skipped[stage.name] = f"{type(exc).__name__}: {exc}"
    return out


def document_filters(config: Mapping[str, Any] | None = None, *, source: str = "web",
                     strict: bool = True, skipped: dict[str, str] | None = None) -> list[Any]:
    """The per-document filters of ``source`` in run order (see :func:`page_filters`)."""
    return [obj for stage, obj in page_filters(config, source=source, strict=strict, skipped=skipped)
            if stage.kind == "document"]


def stage_paths(stages: list[ResolvedStage]) -> list[WorkerPath]:
    """The paths the active stages' workers open (from their typed configs)."""
    reg = registry()
    out: list[WorkerPath] = []
    for stage in stages:
        if not stage.active:
            continue
        for path_field in reg[stage.name].paths:
            value = getattr(stage.config, path_field.field, None)
            access: Access = "write" if (path_field.write_when
                                         and getattr(stage.config, path_field.write_when, False)) else "read"
            for path in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(path, str) and path:
                    out.append(WorkerPath(path_field.role, path, access))
    return out


__all__ = ["CURATE_SOURCES", "KINDS", "REGISTRY", "RESERVED", "FilterSetupError", "PathField",
           "ResolvedStage", "Stage", "StageKind", "StageRegistry", "check_setup", "document_filters",
           "filter_names", "link_stages", "page_filters", "registry", "resolve_stage",
           "run_hooks", "stage_paths", "typed_params", "unavailable", "using"]
