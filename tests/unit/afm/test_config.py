"""Typed configs reject typos and wrong types with the dotted path of the problem."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from afm.config import ConfigError, dump_yaml, load_config, to_dict


@dataclass
class Inner:
    threshold: float = 0.8
    keep: list[str] = field(default_factory=lambda: ["en"])


@dataclass
class Outer:
    name: str = "run"
    steps: int = 10
    enabled: bool = True
    inner: Inner = field(default_factory=Inner)
    path: str | None = None


def test_defaults_yaml_and_overrides(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("steps: 20\ninner:\n  keep: [en, fr]\n")
    cfg = load_config(Outer, cfg_file, overrides=["inner.threshold=0.5", "path=/x"])
    assert cfg.steps == 20 and cfg.inner.keep == ["en", "fr"]
    assert cfg.inner.threshold == 0.5 and cfg.path == "/x"
    assert load_config(Outer, to_dict(cfg)) == cfg
    assert "threshold: 0.5" in dump_yaml(cfg)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"stpes": 3}, "unknown keys"),
        ({"steps": "many"}, "steps: expected an integer"),
        ({"inner": {"threshold": "high"}}, "inner.threshold: expected a number"),
        ({"enabled": "yes"}, "enabled: expected true/false"),
        ({"inner": {"keep": "en"}}, "inner.keep: expected a list"),
    ],
)
def test_bad_configs_name_the_field(data, message):
    with pytest.raises(ConfigError, match=message):
        load_config(Outer, data)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(Outer, tmp_path / "nope.yaml")


@dataclass
class Numbers:
    weight_decay: float = 0.1
    per_n: dict[int, float] = field(default_factory=dict)


def test_numbers_yaml_reads_as_strings_are_accepted():
    cfg = load_config(Numbers, None, overrides=["weight_decay=1e-4", "per_n.2=0.2"])
    assert cfg.weight_decay == 1e-4 and cfg.per_n == {2: 0.2}
    with pytest.raises(ConfigError, match="weight_decay"):
        load_config(Numbers, None, overrides=["weight_decay=tiny"])
