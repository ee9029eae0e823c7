"""Numeric command-line options, checked before any work starts.

Every number a user types goes through :class:`Number`: it must parse, be finite (``nan``,
``inf`` and ``-inf`` parse as floats in Python and click's own range types let ``nan``
through, since every comparison with it is false) and lie in the option's range; the
error is click's one line naming the option. Checks that need the model (a LoRA rank
against the width, a group size against the dimensions, calibration tokens against the
vocabulary) live with the command, before its work, and raise :class:`OptionError`.
"""

from __future__ import annotations

import math
from typing import Any

import click

from afm.errors import UserError


class OptionError(UserError):
    """An option value that does not fit the model or the data it is used with."""


class Number(click.ParamType):
    """A finite number in ``[min, max]`` (either end open or absent); ``integer``: a whole one."""

    name = "number"

    def __init__(self, min: float | None = None, max: float | None = None, *, min_open: bool = False,
                 max_open: bool = False, integer: bool = False):
        self.min, self.max, self.min_open, self.max_open, self.integer = min, max, min_open, max_open, integer
        self.name = "integer" if integer else "number"

    def describe(self) -> str:
        def show(v: float) -> str:
            return str(int(v)) if self.integer else f"{v:g}"

        low = "" if self.min is None else f"{'>' if self.min_open else '>='} {show(self.min)}"
        high = "" if self.max is None else f"{'<' if self.max_open else '<='} {show(self.max)}"
        return " and ".join(p for p in (low, high) if p) or "finite"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a number", param, ctx)
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.integer and not number.is_integer():
            self.fail(f"{value!r} is not a whole number", param, ctx)
        too_low = self.min is not None and (number <= self.min if self.min_open else number < self.min)
        too_high = self.max is not None and (number >= self.max if self.max_open else number > self.max)
        if too_low or too_high:
            self.fail(f"{value} is not {self.describe()}", param, ctx)
        return int(number) if self.integer else number

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "INTEGER" if self.integer else "NUMBER"


POSITIVE = Number(0, min_open=True)
NON_NEGATIVE = Number(0)
FRACTION = Number(0, 1)  # a share: 0..1
PROBABILITY_OPEN = Number(0, 1, min_open=True)  # top-p, a fraction that must keep something
POSITIVE_INT = Number(1, integer=True)
NON_NEGATIVE_INT = Number(0, integer=True)
MAX_SEED = 2**32 - 1
SEED = Number(0, MAX_SEED, integer=True)  # what every random generator here (JAX, NumPy) takes


def check_finite(name: str, value: float) -> float:
    """``value`` when finite, else :class:`OptionError` naming ``name`` (library callers)."""
    if not math.isfinite(float(value)):
        raise OptionError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_seed(name: str, value: int) -> int:
    """``value`` when it is a seed the generators take (0 .. 2**32-1), else OptionError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise OptionError(f"{name} must be a whole number from 0 to {MAX_SEED}, got {value!r}")
    return value


__all__ = ["FRACTION", "MAX_SEED", "NON_NEGATIVE", "NON_NEGATIVE_INT", "POSITIVE", "POSITIVE_INT",
           "PROBABILITY_OPEN", "SEED", "Number", "OptionError", "check_finite", "check_seed"]
