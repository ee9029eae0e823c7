"""The one registry of named training stages: YAML stage tables with ``base:`` inheritance.

Every named stage of every task (pre-training, on-device pruning and distillation, LoRA
recovery, SFT, reward model, DPO/IPO, online RL) is an entry of a YAML table in
``afm/training/configs/`` (one file per family of stages; the files say where each figure
comes from). An entry is a :class:`~afm.training.core.config.TrainConfig` as a mapping,
plus two keys of the table:

* ``base: NAME`` -- start from another stage (in any table) and change only what is
  listed: mappings merge key by key, scalars and lists replace, and ``null`` removes an
  inherited key (the default applies again). Bases chain; a cycle is an error.
* ``description`` -- one line for ``afm train --list-configs``.

A name starting with ``_`` is a base only (not listed, not selectable). ``name`` defaults
to the stage's key. A YAML file given to ``afm train --config FILE`` uses the same rules
(``base:`` may name any stage), so MaxText-style layering works for users' own files.

To add a stage: add an entry to the table of its family (or a new ``*.yaml`` file here);
it is found by every command (``afm train``, ``afm sft``, ``afm rm train``, ``afm dpo``,
``afm prune learn``, ``afm adapter train``, ``afm rl train``) and listed by
``afm train --list-configs``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afm.config import ConfigError, read_yaml

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
TABLE_KEYS = ("base",)
# Tables in recipe order (for listing); any other table follows, by file name.
RECIPE_ORDER = ("pretrain", "on_device", "sft", "preference", "rl", "adapters")


@dataclass(frozen=True)
class Stage:
    """A named stage: its settings with every base applied, and where it is defined."""

    name: str
    settings: dict[str, Any]
    source: str

    @property
    def description(self) -> str:
        return str(self.settings.get("description", ""))

    @property
    def task(self) -> str:
        return str(self.settings.get("task", "pretrain"))

    @property
    def model(self) -> str:
        return str(self.settings.get("model", "tiny"))


def merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``child`` over ``base``: mappings merge key by key, other values replace, ``None``
    removes the inherited key."""
    out = dict(base)
    for key, value in child.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_table(path: Path) -> dict[str, dict[str, Any]]:
    data = read_yaml(path) or {}
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError(f"{path}: a stage table maps stage names to mappings")
    return {str(k): dict(v) for k, v in data.items()}


@functools.cache
def stage_table(directory: str = str(CONFIG_DIR)) -> dict[str, Stage]:
    """Every stage of every ``*.yaml`` table in ``directory``, bases resolved."""
    raw: dict[str, tuple[dict[str, Any], str]] = {}
    paths = sorted(Path(directory).glob("*.yaml"),
                   key=lambda p: (RECIPE_ORDER.index(p.stem) if p.stem in RECIPE_ORDER else len(RECIPE_ORDER), p.name))
    for path in paths:
        for name, entry in _read_table(path).items():
            if name in raw:
                raise ConfigError(f"stage {name!r} is defined in {raw[name][1]} and in {path.name}")
            raw[name] = (entry, path.name)
    resolved: dict[str, Stage] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> dict[str, Any]:
        if name in chain:
            raise ConfigError(f"stage bases form a cycle: {' -> '.join((*chain, name))}")
        if name not in raw:
            raise ConfigError(f"stage {chain[-1]!r}: base {name!r} is not a stage")
        entry, source = raw[name]
        base = entry.get("base")
        settings = {k: v for k, v in entry.items() if k not in TABLE_KEYS}
        if base:
            settings = merge(resolve(str(base), (*chain, name)), settings)
        return settings

    for name, (_, source) in raw.items():
        settings = resolve(name, ())
        settings["name"] = raw[name][0].get("name", name)
        resolved[name] = Stage(name, settings, source)
    return resolved


def stages() -> dict[str, Stage]:
    """The selectable stages (names not starting with ``_``), in table order."""
    return {k: v for k, v in stage_table().items() if not k.startswith("_")}


def stage_settings(name: str) -> dict[str, Any]:
    """The settings of a named stage (a copy), or a ConfigError naming the known ones."""
    table = stage_table()
    if name not in table:
        raise ConfigError(f"unknown stage {name!r}; stages: {', '.join(stages())} "
                          "(afm train --list-configs says what each is)")
    return merge({}, table[name].settings)


def file_settings(path: Path) -> dict[str, Any]:
    """A user's YAML config: its ``base:`` stage with the file's keys over it."""

    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    base = data.pop("base", None)
    return merge(stage_settings(str(base)), data) if base else data
