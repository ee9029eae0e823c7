"""Typed configs: YAML (or a dict) -> nested dataclasses, checked, printed at run start.

Every component defines its config as a ``@dataclass`` with defaults. ``load_config``
fills one from a YAML file, a dict and ``key.sub=value`` overrides, rejecting unknown
keys and wrong types with the offending dotted path in the message, so a typo in a
100-line config fails before any work starts. A dataclass's own ``__post_init__`` checks
(ranges) become the same one-line error, with the path.

Every YAML the project reads goes through :func:`load_yaml` / :func:`read_yaml`: safe
loading, a syntax error named with its line, and a key given twice in one mapping an
error naming the key and both lines (plain PyYAML lets the last one win silently).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from afm.console import console
from afm.errors import UserError

T = TypeVar("T")


class ConfigError(UserError):
    """A config value is unknown, missing or of the wrong type."""


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice in one mapping (merge keys ``<<`` may
    still be overridden, as YAML means them to be)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first.get(key)
            except TypeError:  # an unhashable key: PyYAML reports it below
                continue
            line = key_node.start_mark.line + 1
            if seen is not None:
                raise ConfigError(f"{self.name}: line {line}: duplicate key {key!r} (first given at line {seen}); "
                                  "YAML would silently keep only the last one")
            first[key] = line
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _StrictLoader.construct_mapping)


def load_yaml(text: str | bytes, name: str = "<yaml>") -> Any:
    """Parse YAML text safely; a syntax error or a duplicate key is a :class:`ConfigError`
    naming ``name`` and the line."""
    loader = _StrictLoader(text)
    loader.name = name
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f": line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{name}{where}: not valid YAML ({problem})") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> Any:
    """:func:`load_yaml` of a local file (a missing or unreadable file is a ConfigError)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    return load_yaml(text, str(path))


def _convert(value: Any, tp: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, path)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(f"{path}: {value!r} matches none of {tp}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{path}: {value!r} is not one of {list(args)}")
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping for {tp.__name__}, got {value!r}")
        return from_dict(tp, value, path)
    if origin in (list, tuple, set, frozenset):
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise ConfigError(f"{path}: expected {len(args)} items, got {len(value)}")
            return tuple(_convert(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(args, value)))
        item_tp = args[0] if args else Any
        items = [_convert(v, item_tp, f"{path}[{i}]") for i, v in enumerate(value)]
        return origin(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        ktp, vtp = args if args else (Any, Any)
        return {_convert(k, ktp, path): _convert(v, vtp, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, str) and tp in (int, float):
        # YAML reads "1e-4" (no dot) and quoted numbers as strings: accept exact numbers.
        try:
            value = tp(value) if tp is float else int(value)
        except ValueError:
            pass
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        if not math.isfinite(value):  # nan / inf: never a setting, always a typo or a bug
            raise ConfigError(f"{path}: expected a finite number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return int(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true/false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        try:
            return tp(value)
        except Exception as exc:  # noqa: BLE001 - reported with the path
            raise ConfigError(f"{path}: cannot make {tp.__name__} from {value!r}") from exc
    return value


def check_number(path: str, value: Any, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, integer: bool = False) -> None:
    """A config number in its range (finite; whole when ``integer``), else a ConfigError
    naming ``path`` (``optimizer.learning_rate``) and the range. For ``__post_init__``."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (not integer or isinstance(value, numbers.Integral))
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        parts = [f"{'>' if low_open else '>='} {low:g}" if low is not None else "",
                 f"{'<' if high_open else '<='} {high:g}" if high is not None else ""]
        kind = "a whole number" if integer else "a finite number"
        bounds = " and ".join(p for p in parts if p)
        raise ConfigError(f"{path} must be {kind}{' ' + bounds if bounds else ''}, got {value!r}")


def check_choice(path: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{path} must be one of {', '.join(choices)}, got {value!r}")


def coerce(value: Any, tp: Any, path: str) -> Any:
    """``value`` as type ``tp`` by the rules configs use (exact numbers from strings,
    finite floats, whole ints), else a ConfigError naming ``path``."""
    return _convert(value, tp, path)


def from_dict(cls: type[T], data: dict[str, Any], path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``; unknown keys and bad types raise ConfigError."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = set(data) - set(fields)
    if unknown:
        where = path or cls.__name__
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(fields)}")
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _convert(value, hints[name], f"{path}.{name}" if path else name)
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:  # a __post_init__ range check, say
        raise ConfigError(f"{path or cls.__name__}: {exc}") from None


def to_dict(cfg: Any) -> Any:
    """A dataclass config as plain dicts/lists (for YAML, JSON manifests and printing). A
    config whose YAML is shaped differently from its fields says how with ``as_config_dict``."""
    if hasattr(cfg, "as_config_dict") and not isinstance(cfg, type):
        return cfg.as_config_dict()
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, (list, tuple)):
        return [to_dict(v) for v in cfg]
    if isinstance(cfg, dict):
        return {k: to_dict(v) for k, v in cfg.items()}
    return cfg


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {dotted}: {key} is not a mapping")
    node[keys[-1]] = value


def parse_overrides(overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["a.b=3", "c=true"]`` -> nested dict, values parsed as YAML scalars."""
    out: dict[str, Any] = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE")
        key, raw = item.split("=", 1)
        _set_dotted(out, key.strip(), load_yaml(raw, f"override {item!r}"))
    return out


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(
    cls: type[T],
    source: str | Path | dict[str, Any] | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    base: T | None = None,
) -> T:
    """Config ``cls`` from defaults (or ``base``), then a YAML file / dict, then overrides."""
    data: dict[str, Any] = to_dict(base) if base is not None else {}
    if isinstance(source, (str, Path)):
        path = Path(source)
        loaded = read_yaml(path) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
        data = _merge(data, loaded)
    elif isinstance(source, dict):
        data = _merge(data, source)
    data = _merge(data, parse_overrides(overrides))
    return from_dict(cls, data)


def dump_yaml(cfg: Any) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, default_flow_style=False)


def print_config(cfg: Any, title: str = "config") -> None:
    """Print a config at the start of a run, so logs always say what ran."""

    console.rule(f"[bold]{title}")
    console.print(dump_yaml(cfg).rstrip(), markup=False, highlight=False)
    console.rule()
