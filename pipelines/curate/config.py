"""``CurateConfig``: one typed config for the whole curate run, loadable from YAML.

Each stage has a :class:`StageSettings` (``enabled`` + ``params``); ``params`` is the
stage's own typed config (e.g. ``LanguageConfig``'s fields), validated against that
dataclass when the run starts, so a typo fails before any work. Example YAML::

    source: web
    language: {params: {languages: [en], min_score: 0.65}}
    dedup: {params: {threshold: 0.8}}
    quality_model: {enabled: false}
    output: {shard_target_mb: 256}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from afm import fs
from afm.config import ConfigError, load_config, load_yaml
from afm.pipelines.curate.stages import (
    CURATE_SOURCES,
    SOURCE_STAGES,
    STAGES,
    ResolvedStage,
    resolve_stage,
    stage_params,
)
from afm.pipelines.decontaminate import DECONTAM_NEEDS_INDEX


def link_early_language(stages: list[ResolvedStage]) -> None:
    """Extraction's early language check (``ExtractConfig.early_language``) follows the
    language stage: on when that stage runs after extraction with a ``keep`` list (its
    languages, its model, at least its confidence), off otherwise. A value the user set
    (a list, or [] for off) is left alone."""
    by_name = {s.name: s for s in stages}
    extract, language = by_name.get("extract"), by_name.get("language")
    if extract is None or not extract.active or extract.config.early_language is not None:
        return
    names = [s.name for s in stages]
    if (language is None or not language.active or not language.config.keep
            or names.index("language") < names.index("extract")):
        extract.config.early_language = []
        return
    extract.config.early_language = list(language.config.keep)
    extract.config.early_language_model = language.config.model_path
    extract.config.early_language_score = max(extract.config.early_language_score,
                                              language.config.min_score)


@dataclass
class StageSettings:
    """Switch + parameters of one stage (``params`` = the stage's own config fields)."""

    enabled: bool = True
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class ReadConfig:
    """How input is read and spread over workers."""

    # Spread the records read over workers (see afm.pipelines.beam.io.should_reshuffle):
    # auto = when there are fewer than `reshuffle_below_files` input files, so that one
    # large WARC is extracted by every worker; always; never.
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
    source: Literal["web", "code", "math"] = "web"
    optout: StageSettings = field(default_factory=StageSettings)
    extract: StageSettings = field(default_factory=StageSettings)
    language: StageSettings = field(default_factory=StageSettings)
    math: StageSettings = field(default_factory=StageSettings)
    code: StageSettings = field(default_factory=StageSettings)
    safety: StageSettings = field(default_factory=StageSettings)
    pii: StageSettings = field(default_factory=StageSettings)
    dedup: StageSettings = field(default_factory=StageSettings)
    quality: StageSettings = field(default_factory=StageSettings)
    quality_model: StageSettings = field(default_factory=StageSettings)
    decontaminate: StageSettings = field(default_factory=StageSettings)
    read: ReadConfig = field(default_factory=ReadConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    debug: FaultInjection = field(default_factory=FaultInjection)
    # Run only these stages, in this order (default: the source's whole list). The
    # reading, duplicate-id and writing steps always run: `afm dedup` is ["dedup"].
    stages: list[str] = field(default_factory=list)

    def stage_names(self) -> tuple[str, ...]:
        """The stages of this config's source (or ``stages``), in run order."""
        return tuple(self.stages) if self.stages else SOURCE_STAGES[self.source]

    @property
    def decontamination_off(self) -> bool:
        """The decontamination stage is in the stage list but switched off."""
        return "decontaminate" in self.stage_names() and not self.decontaminate.enabled

    def resolve(self) -> list[ResolvedStage]:
        """Every stage of the source, with its typed config or why it cannot run."""
        stages = [
            resolve_stage(name, getattr(self, name).enabled, stage_params(name, self.source, getattr(self, name).params))
            for name in self.stage_names()
        ]
        link_early_language(stages)
        return stages

    def check_runnable(self) -> None:
        """What a run needs beyond a well-formed config: a decontamination index when the
        stage is on (there is no default: an unchecked corpus must not look checked)."""
        params = self.decontaminate.params
        if ("decontaminate" in self.stage_names() and self.decontaminate.enabled
                and not params.get("index") and not params.get("benchmarks")):
            raise ConfigError(DECONTAM_NEEDS_INDEX)

    def validate(self) -> None:
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
        unknown = [s for s in self.stages if s not in STAGES]
        if unknown:
            raise ConfigError(f"stages: unknown {unknown}; known {sorted(STAGES)}")
        if len(set(self.stages)) != len(self.stages):
            raise ConfigError(f"stages: a stage is named twice in {self.stages}")
        points = set(self.stage_names()) | {"read", "write"}
        bad = [p for p in self.debug.fail_once_at if p not in points]
        if bad:
            raise ConfigError(f"debug.fail_once_at: unknown points {bad}; known {sorted(points)}")
        if self.debug.fail_once_at and not self.debug.marker_dir:
            raise ConfigError("debug.fail_once_at needs debug.marker_dir")


def load_curate_config(
    config: CurateConfig | str | Path | dict[str, Any] | None = None,
    *,
    source: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> CurateConfig:
    """A :class:`CurateConfig` from a config object, YAML path, dict or nothing (defaults);
    ``source`` (the CLI's ``--source``) wins over the file's."""
    if isinstance(config, str) and fs.is_remote(config):  # gs://... (e.g. a flex-template run)
        config = _read_remote_yaml(config)
    if isinstance(config, CurateConfig):
        cfg = load_config(CurateConfig, None, overrides, base=config)
    else:
        cfg = load_config(CurateConfig, config, overrides)
    if source is not None:
        if source not in CURATE_SOURCES:
            raise ConfigError(f"source {source!r}: expected one of {sorted(CURATE_SOURCES)}")
        cfg.source = source  # type: ignore[assignment]
    cfg.validate()
    return cfg


def _read_remote_yaml(path: str) -> dict[str, Any]:
    from apache_beam.io.filesystems import FileSystems


    try:
        with FileSystems.open(path) as fh:
            raw = fh.read()
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


__all__ = ["CurateConfig", "FaultInjection", "OutputConfig", "ReadConfig", "StageSettings",
           "STAGES",
           "load_curate_config"]
