"""``CurateConfig``: one typed config for the whole curate run, loadable from YAML.

Each stage of the registry (``stages.py``) has a section ``<stage>: {enabled, params}``;
``params`` becomes the stage's own typed config (e.g. ``LanguageConfig``) when the config
is loaded, with the source's defaults under the user's values, so a threshold is a number
from the YAML or ``--set`` onward and a typo fails before any work. Example YAML::

    source: web
    language: {params: {languages: [en], min_score: 0.65}}
    dedup: {params: {threshold: 0.8}}
    quality_model: {enabled: false}
    output: {shard_target_mb: 256}
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from afm import fs
from afm.config import ConfigError, coerce, from_dict, load_yaml, parse_overrides, to_dict
from afm.pipelines.curate.stages import (
    CURATE_SOURCES,
    RESERVED,
    ResolvedStage,
    Stage,
    StageRegistry,
    link_stages,
    registry,
    resolve_stage,
    typed_params,
    unavailable,
)


@dataclass
class StageSettings:
    """Switch + parameters of one stage: ``params`` is the stage's typed config once loaded
    (a plain mapping only while the stage's module is not installed here)."""

    enabled: bool = True
    params: Any = field(default_factory=dict)


@dataclass
class ReadConfig:
    """How input is read and spread over workers."""

    # Spread the records read over workers (see afm.pipelines.beam.io.should_reshuffle):
    # auto = when there are fewer than `reshuffle_below_files` input files, so that one
    # large WARC is extracted by every worker (never with one local worker); always; never.
    reshuffle: str = "auto"
    reshuffle_below_files: int = 1000


@dataclass
class OutputConfig:
    """How shards are written."""

    # Target uncompressed size of one shard (text + metadata). zstd Parquet files come
    # out about 3x smaller on web text. The shard count is total size / target, rounded up.
    shard_target_mb: float = 128.0
    rejects_shard_target_mb: float = 128.0
    compression: str = "zstd"
    write_rejects: bool = True
    # Characters of text each reject keeps (0 = all of it). At web scale rejects are most
    # of the input (9 in 10 crawled pages); their first 1,000 characters are enough to
    # audit a decision (the details name the rule, n-gram or duplicate), and keep the
    # rejects at a fraction of the corpus's size. Trimmed before any shuffle.
    reject_text_chars: int = 1000
    samples_per_reason: int = 3  # sample rejects per (stage, reason) in report.html
    # Texts cross the run's shuffles on disk (afm.pipelines.beam.spill): auto = on the
    # local runners, which hold every shuffle in memory (without it a run's memory grows
    # with the corpus); always (any runner: spill files under the staging directory);
    # never.
    spill_texts: str = "auto"


@dataclass
class FaultInjection:
    """Testing aid: fail the first attempt of every bundle at the named points.

    ``fail_once_at`` holds stage names (fail after that stage) and/or ``"write"`` (fail
    after a shard's temp file is written, before it is renamed into place). A marker file
    per bundle under ``marker_dir`` makes the retry succeed. Empty = off (the default).
    Needs a runner that retries failed bundles (BundleBasedDirectRunner, Dataflow, Flink,
    Spark); Beam's FnApiRunner (our DirectRunner) fails the run on the first error.
    """

    fail_once_at: list[str] = field(default_factory=list)
    marker_dir: str | None = None


@dataclass
class CurateConfig:
    """The run's settings; one :class:`StageSettings` per registered stage in ``settings``
    (``cfg.stage("dedup")``, or ``cfg.dedup``), written as top-level sections in YAML.
    Made by :func:`load_curate_config` (which types every stage's params); a config built
    in code is typed by passing it through it."""

    source: Literal["web", "code", "math"] = "web"
    read: ReadConfig = field(default_factory=ReadConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    debug: FaultInjection = field(default_factory=FaultInjection)
    # Run only these stages, in this order (default: the source's whole list). The
    # reading, duplicate-id and writing steps always run: `afm dedup` is ["dedup"].
    stages: list[str] = field(default_factory=list)
    settings: dict[str, StageSettings] = field(default_factory=dict)

    def __getattr__(self, name: str) -> StageSettings:
        settings = self.__dict__.get("settings") or {}
        if name in settings:
            return settings[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or stage {name!r}")

    def stage(self, name: str) -> StageSettings:
        """The settings of stage ``name`` (a :class:`ConfigError` for an unknown one)."""
        if name not in self.settings:
            raise ConfigError(f"unknown stage {name!r}; known: {list(self.settings)}")
        return self.settings[name]

    def stage_names(self) -> tuple[str, ...]:
        """The stages of this config's source (or ``stages``), in run order."""
        return tuple(self.stages) if self.stages else registry().order(self.source)

    def resolve(self) -> list[ResolvedStage]:
        """Every stage of the run, with its typed config (a copy: a stage that follows
        another adjusts its own) or why it cannot run."""
        reg = registry()
        stages = [resolve_stage(reg[name], self.stage(name).enabled,
                                copy.deepcopy(self.stage(name).params), self.source)
                  for name in self.stage_names()]
        link_stages(stages, reg)
        return stages

    def switched_off(self) -> dict[str, str]:
        """For each stage that is a safeguard (an ``off_flag``): "on", "off" or "not part of
        this command" (the manifest records it; a run switched off says so loudly)."""
        reg, names = registry(), self.stage_names()
        return {s.off_flag: ("not part of this command" if s.name not in names
                             else "on" if self.stage(s.name).enabled else "off")
                for s in reg if s.off_flag}

    def as_config_dict(self) -> dict[str, Any]:
        """The config as its YAML is written: stage sections at the top level, each with the
        parameters that differ from the stage's defaults (on this source)."""
        out = {f.name: to_dict(getattr(self, f.name)) for f in dataclasses.fields(self)
               if f.name != "settings"}
        reg, names = registry(), set(self.stage_names())
        for name, settings in self.settings.items():
            params = _changed(reg[name], self.source, settings.params)
            if name in names or params or not settings.enabled:
                out[name] = {"enabled": settings.enabled, "params": params}
        return out

    def validate(self, reg: StageRegistry) -> None:
        if self.read.reshuffle not in ("auto", "always", "never"):
            raise ConfigError(f"read.reshuffle: expected auto, always or never, got "
                              f"{self.read.reshuffle!r}")
        if self.output.spill_texts not in ("auto", "always", "never"):
            raise ConfigError(f"output.spill_texts: expected auto, always or never, got "
                              f"{self.output.spill_texts!r}")
        if self.output.reject_text_chars < 0:
            raise ConfigError("output.reject_text_chars must be >= 0 (0 = the whole text)")
        if self.output.shard_target_mb <= 0 or self.output.rejects_shard_target_mb <= 0:
            raise ConfigError("output.shard_target_mb must be > 0")
        if self.output.compression not in ("zstd", "snappy", "gzip", "brotli", "lz4", "none"):
            raise ConfigError(f"output.compression: unknown codec {self.output.compression!r}")
        unknown = [s for s in self.stages if s not in reg]
        if unknown:
            raise ConfigError(f"stages: unknown {unknown}; known {list(reg.names())}")
        if len(set(self.stages)) != len(self.stages):
            raise ConfigError(f"stages: a stage is named twice in {self.stages}")
        reg.check_order(self.stage_names())
        points = set(self.stage_names()) | {"read", "write"}
        bad = [p for p in self.debug.fail_once_at if p not in points]
        if bad:
            raise ConfigError(f"debug.fail_once_at: unknown points {bad}; known {sorted(points)}")
        if self.debug.fail_once_at and not self.debug.marker_dir:
            raise ConfigError("debug.fail_once_at needs debug.marker_dir")


def _changed(stage: Stage, source: str, params: Any) -> dict[str, Any]:
    """The fields of ``params`` that differ from the stage's defaults on ``source``."""
    if isinstance(params, Mapping):
        return dict(params)
    defaults = to_dict(typed_params(stage, source, {}))
    return {k: v for k, v in to_dict(params).items() if defaults.get(k) != v}


def _stage_settings(stage: Stage, source: str, raw: Any, typed: bool, named: bool = False) -> StageSettings:
    """One stage's section checked: ``enabled`` a boolean, ``params`` typed (when ``typed``
    and the stage's module is installed here). ``enabled`` unset: the stage's default, and
    a stage off by default is on when the section sets params or the run's ``stages``
    names it (``named``): a run that configures a stage means to run it."""
    if isinstance(raw, StageSettings):
        raw = {"enabled": raw.enabled, "params": raw.params}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{stage.name}: expected a mapping with enabled / params, got {raw!r}")
    unknown = set(raw) - {"enabled", "params"}
    if unknown:
        raise ConfigError(f"{stage.name}: unknown keys {sorted(unknown)}; known: ['enabled', 'params']")
    params = raw.get("params") or {}
    default = stage.enabled_by_default or named or bool(params)
    enabled = coerce(raw.get("enabled", default), bool, f"{stage.name}.enabled")
    if typed and unavailable(stage) is None:
        params = typed_params(stage, source, params)
    elif not isinstance(params, Mapping):
        params = to_dict(params)
    return StageSettings(enabled, params)


def load_curate_config(
    config: CurateConfig | str | Path | dict[str, Any] | None = None,
    *,
    source: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> CurateConfig:
    """A :class:`CurateConfig` from a config object, YAML path, dict or nothing (defaults),
    then ``key.sub=value`` overrides; ``source`` (the CLI's ``--source``) wins over the
    file's. Every stage of the run, and every stage the config sets, is typed here."""
    reg = registry()
    if isinstance(config, CurateConfig):
        data = config.as_config_dict()
    elif isinstance(config, (str, Path)):
        data = _read_yaml(str(config))
    else:
        data = copy.deepcopy(dict(config or {}))
    data = _merge(data, parse_overrides(overrides))
    sections = {name: data.pop(name) for name in list(data) if name in reg}
    data.pop("settings", None)
    known = [f.name for f in dataclasses.fields(CurateConfig) if f.name != "settings"]
    unknown = set(data) - set(known)
    if unknown:
        raise ConfigError(f"CurateConfig: unknown keys {sorted(unknown)}; known: "
                          f"{sorted(known)} and the stages {list(reg.names())}")
    if source is not None:
        if source not in CURATE_SOURCES:
            raise ConfigError(f"source {source!r}: expected one of {sorted(CURATE_SOURCES)}")
        data["source"] = source
    cfg = from_dict(CurateConfig, data)
    run = set(cfg.stage_names()) if all(s in reg for s in cfg.stages) else set()
    cfg.settings = {s.name: _stage_settings(s, cfg.source, sections.get(s.name, {}),
                                            typed=s.name in run or s.name in sections,
                                            named=s.name in cfg.stages)
                    for s in reg}
    cfg.validate(reg)
    return cfg


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_yaml(path: str) -> dict[str, Any]:
    """A config file, local or remote (``gs://...``, e.g. a flex-template run)."""
    try:
        raw = fs.read_bytes(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc})") from None
    data = load_yaml(text, path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


__all__ = ["CurateConfig", "FaultInjection", "OutputConfig", "ReadConfig", "RESERVED", "StageSettings",
           "load_curate_config"]
