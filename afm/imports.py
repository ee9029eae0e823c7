"""The one way a config or a command line names code: ``package.module:attr``.

Tasks (``task: module:Class``), evaluation hooks (``eval.hooks``), task rewards
(``--reward task:module:function``), quality scorers (``afm quality label --scorer``),
synthetic-data generators (``--generator module:factory``), curate stages and the web
filters are all found by :func:`resolve`: a short registered name, or an import path,
turned into the object with one clear error when it cannot be. :func:`probe` says why a
component cannot be used when a third-party library it needs is not installed (a curate
stage whose extra is absent), and raises :class:`BrokenComponent` for code of this
project that is broken.
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


class BrokenComponent(UserError):
    """Code of this project that cannot be used: a module of ``afm`` that does not import, or
    lacks a name a registry says it has. Never an optional component: a bug to fix."""


def probe(module: str, *attrs: str) -> str | None:
    """None when ``module`` imports and has ``attrs``; else a one-line reason why not, when
    the reason is a third-party library this installation lacks (an extra not installed).

    Anything else is :class:`BrokenComponent`: a module of this project is never "not
    installed" (the editable install and the wheel hold every one), so a missing ``afm``
    module, a renamed attribute or an import that raises is an error, not an absent option
    (a renamed filter config must fail the run, not let its documents pass unfiltered)."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and missing.split(".")[0] != "afm":
            return f"module {module} needs {missing!r}, which is not installed"
        raise BrokenComponent(f"module {module} cannot be imported: {exc}") from exc
    except Exception as exc:
        raise BrokenComponent(f"module {module} fails to import: {type(exc).__name__}: {exc}") from exc
    missing_attrs = [a for a in attrs if not hasattr(mod, a)]
    if missing_attrs:
        raise BrokenComponent(f"module {module} has no {', '.join(missing_attrs)}")
    return None


__all__ = ["BrokenComponent", "ImportTargetError", "probe", "resolve", "split_target"]
