"""The one registry of curation stages, and the one order they run in for each source.

:data:`STAGES` says, for every stage name, which module implements it and what shape it
has: a per-page step (extraction: crawl record -> document), a per-document filter
(``name`` + ``__call__(doc) -> Decision``, logic in ``afm.filters``) or a global Beam
transform (dedup, decontamination: ``afm.pipelines``). Implementations are named by
import path and resolved at run time (:mod:`afm.imports`), so this module imports neither
the filters nor Beam.

:data:`SOURCE_STAGES` is the one list of which stages run, in which order, per source:
``afm curate`` runs it (``pipelines/curate``), ``afm inspect`` shows the per-document
filters of a source in the same order (:func:`document_filters`), and ``afm sft prepare``
follows the ``chat`` entry (its steps are the chat-data versions of the same stages).

The web order follows the AFM report (§3.1.1): publishers' opt-outs first (a ``record``
stage: it sees crawl pages, with their headers, and documents alike, right after
reading; ``afm.filters.optout``), extraction, language ID (cheap, and the
safety word lists use its label), safety/profanity, PII redaction (so no later stage or
record sees the personal data), de-duplication, quality (heuristics before the
classifier: a document dropped by either is dropped, so the order changes only which one
is named), decontamination. Dedup keeps the copy with the highest ``quality_score`` when
the input already carries one (re-curating scored shards); on fresh crawl output no score
exists yet, so the smallest id wins a cluster.

To add a filter: write it in ``afm/filters/`` (the contract is ``filters/base.py``), add a
:class:`StageSpec` here and put its name in the sources that should run it.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Literal

from afm.filters.base import DocumentFilter

from afm.config import from_dict
from afm.imports import probe, resolve

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
                  "fastText quality classifier (threshold or global top fraction)"),
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


class FilterSetupError(RuntimeError):
    """A configured filter could not be built (bad config, missing model file...)."""


def config_class(filter_cls: type) -> type:
    """The config dataclass a filter's ``__init__(cfg)`` takes (from its type hints)."""
    hints = typing.get_type_hints(filter_cls.__init__)
    tp = hints.get("cfg")
    for arg in typing.get_args(tp) or (tp,):
        if dataclasses.is_dataclass(arg):
            return arg  # type: ignore[return-value]
    raise FilterSetupError(f"{filter_cls.__name__}.__init__ has no dataclass-typed 'cfg' argument")


def filter_names(source: str = "web") -> tuple[str, ...]:
    """The per-document filters of ``source``, in the order they run."""
    if source not in SOURCE_STAGES:
        raise FilterSetupError(f"unknown source {source!r}; known: {sorted(SOURCE_STAGES)}")
    return tuple(n for n in SOURCE_STAGES[source] if n in STAGES and STAGES[n].kind == "document")


def document_filters(
    config: dict[str, Any] | None = None, *, source: str = "web", strict: bool = True
) -> list[DocumentFilter]:
    """Build the per-document filters of ``source`` in pipeline order.

    ``config`` maps a filter name (for the web: ``language``, ``safety``, ``pii``,
    ``quality``, ``quality_model``) to a dict of its config fields, or to ``False`` to
    leave that filter out. Unknown names or fields raise :class:`FilterSetupError`.

    A filter whose module is not part of this installation is skipped. With
    ``strict=False`` (used by ``afm inspect``), a filter that is *not* configured and
    fails to build with its defaults (e.g. its model file is absent) is skipped too
    instead of raising; :func:`skipped_filters` then says which and why.
    """
    names = filter_names(source)
    config = dict(config or {})
    unknown = set(config) - set(names)
    if unknown:
        raise FilterSetupError(f"unknown filters {sorted(unknown)}; known: {list(names)}")
    out: list[DocumentFilter] = []
    _SKIPPED.clear()
    for name in names:
        spec = STAGES[name]
        section = config.get(name, {})
        if section is False:
            continue
        if section is None or section is True:
            section = {}
        if not isinstance(section, dict):
            raise FilterSetupError(f"config for {name!r} must be a mapping or false")
        if probe(spec.module) == f"module {spec.module} is not installed":
            _SKIPPED[name] = "module not installed"
            continue
        cls = resolve(f"{spec.module}:{spec.factory}", what="filter")
        try:
            cfg = from_dict(config_class(cls), section, name)
            out.append(cls(cfg))
        except Exception as exc:
            if strict or name in config:
                raise FilterSetupError(f"cannot build filter {name!r}: {exc}") from exc
            _SKIPPED[name] = f"{type(exc).__name__}: {exc}"
    return out


_SKIPPED: dict[str, str] = {}


def skipped_filters() -> dict[str, str]:
    """Filters the last :func:`document_filters` call left out, with the reason."""
    return dict(_SKIPPED)


__all__ = ["CURATE_SOURCES", "SOURCE_PARAM_DEFAULTS", "SOURCE_STAGES", "STAGES", "FilterSetupError", "StageSpec",
           "config_class", "document_filters", "filter_names", "skipped_filters"]
