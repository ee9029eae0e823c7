"""The one way a config or a command line names code: ``package.module:attr``.

Tasks (``task: module:Class``), evaluation hooks (``eval.hooks``), task rewards
(``--reward task:module:function``), quality scorers (``afm quality label --scorer``),
synthetic-data generators (``--generator module:factory``), curate stages and the web
filters are all found by :func:`resolve`: a short registered name, or an import path,
turned into the object with one clear error when it cannot be. :func:`probe` says why a
module cannot be used (not installed, needs a missing dependency, broken), for components
that are optional in an installation (a curate stage whose extra is absent).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from afm.errors import UserError


class ImportTargetError(UserError):
    """A ``module:attr`` target that is malformed, unknown or cannot be imported."""


def split_target(target: str, what: str = "target") -> tuple[str, str]:
    """``"pkg.mod:attr"`` -> ``("pkg.mod", "attr")``; anything else is an error."""
    module, sep, attr = str(target).partition(":")
    if not sep or not module or not attr or ":" in attr:
        raise ImportTargetError(f"{what} {target!r}: expected 'package.module:attr'")
    return module, attr


def resolve(target: str, *, what: str = "target", registry: Mapping[str, str] | None = None) -> Any:
    """The object ``target`` names: a key of ``registry`` (mapped to ``module:attr``) or a
    ``module:attr`` path. Raises :class:`ImportTargetError` naming ``what`` was asked for,
    the registered names and the import failure."""
    known = dict(registry or {})
    path = known.get(target, target)
    if ":" not in str(path):
        names = f"registered: {', '.join(sorted(known))} (or give module:attr)" if known else "give module:attr"
        raise ImportTargetError(f"unknown {what} {target!r}; {names}")
    module, attr = split_target(path, what)
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ImportTargetError(f"{what} {target!r}: cannot import {path} ({exc})") from exc


def probe(module: str, *attrs: str) -> str | None:
    """None when ``module`` imports and has ``attrs``; else a one-line reason why not."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            return f"module {module} is not installed"
        return f"module {module} needs {exc.name!r}, which is not installed"
    except Exception as exc:  # noqa: BLE001 - a broken optional module is reported, not fatal
        return f"module {module} fails to import: {type(exc).__name__}: {exc}"
    missing = [a for a in attrs if not hasattr(mod, a)]
    if missing:
        return f"module {module} has no {', '.join(missing)}"
    return None


__all__ = ["ImportTargetError", "probe", "resolve", "split_target"]
