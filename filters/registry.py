"""The ordered per-document filters of the web pipeline (after extraction).

Order, following the AFM report's web pipeline (§3.1.1): language ID first (cheap, and
the safety word lists use its label), then safety/profanity, then PII redaction (so no
later stage or record sees the personal data), then quality heuristics, the quality
classifier and the math signals. Global stages (fuzzy dedup, decontamination) are not
per-document and live in ``pipelines/``.

Filters built by other modules (quality, quality_model, math) are included when their
module is installed; only a *missing module* is tolerated silently.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from afm.filters.base import DocumentFilter

from afm.config import from_dict
from afm.imports import probe, resolve


@dataclass(frozen=True)
class FilterSpec:
    name: str  # the filter's ``name`` and its key in the config mapping
    module: str
    cls: str
    optional: bool  # built by another module that may be absent


WEB_FILTERS: tuple[FilterSpec, ...] = (
    FilterSpec("language", "afm.filters.language", "LanguageFilter", False),
    FilterSpec("safety", "afm.filters.safety", "SafetyFilter", False),
    FilterSpec("pii", "afm.filters.pii", "PiiFilter", False),
    FilterSpec("quality", "afm.filters.quality", "QualityHeuristicsFilter", True),
    FilterSpec("quality_model", "afm.filters.quality_model", "QualityClassifierFilter", True),
    FilterSpec("math", "afm.filters.math", "MathFilter", True),
)
FILTER_NAMES = tuple(s.name for s in WEB_FILTERS)


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


def _import(spec: FilterSpec) -> type | None:
    if spec.optional and probe(spec.module) == f"module {spec.module} is not installed":
        return None  # that filter is not part of this installation
    return resolve(f"{spec.module}:{spec.cls}", what="filter")


def web_filters(
    config: dict[str, Any] | None = None, *, strict: bool = True
) -> list[DocumentFilter]:
    """Build the web filters in pipeline order.

    ``config`` maps a filter name (``language``, ``safety``, ``pii``, ``quality``,
    ``quality_model``, ``math``) to a dict of its config fields, or to ``False`` to
    leave that filter out. Unknown names or fields raise :class:`FilterSetupError`.

    With ``strict=False`` (used by ``afm inspect``), an optional filter that is *not*
    configured and fails to build with its defaults (e.g. its model file is absent) is
    skipped instead of raising; :func:`skipped_filters` then says which and why.
    """
    config = dict(config or {})
    unknown = set(config) - set(FILTER_NAMES)
    if unknown:
        raise FilterSetupError(f"unknown filters {sorted(unknown)}; known: {list(FILTER_NAMES)}")
    out: list[DocumentFilter] = []
    _SKIPPED.clear()
    for spec in WEB_FILTERS:
        section = config.get(spec.name, {})
        if section is False:
            continue
        if section is None or section is True:
            section = {}
        if not isinstance(section, dict):
            raise FilterSetupError(f"config for {spec.name!r} must be a mapping or false")
        cls = _import(spec)
        if cls is None:
            _SKIPPED[spec.name] = "module not installed"
            continue
        try:
            cfg = from_dict(config_class(cls), section, spec.name)
            out.append(cls(cfg))
        except Exception as exc:
            if strict or not spec.optional or spec.name in config:
                raise FilterSetupError(f"cannot build filter {spec.name!r}: {exc}") from exc
            _SKIPPED[spec.name] = f"{type(exc).__name__}: {exc}"
    return out


_SKIPPED: dict[str, str] = {}


def skipped_filters() -> dict[str, str]:
    """Filters the last :func:`web_filters` call left out, with the reason."""
    return dict(_SKIPPED)
