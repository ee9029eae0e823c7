"""The two flags of the one output-directory policy (:mod:`afm.outputs`), worded once for
every command that writes a dataset through it (curate, dedup, decontam run, tokenize,
quality filter): ``--overwrite`` and ``--allow-empty``. The policy is the same whichever
command runs it, so the flags and their help are too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def output_policy_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--overwrite`` and ``--allow-empty`` (in that order in ``--help``) to a command."""
    fn = click.option("--allow-empty", is_flag=True,
                      help="Write the output even when the inputs yield no document (default: an "
                           "error, nothing written).")(fn)
    return click.option("--overwrite", is_flag=True,
                        help="Replace what OUTPUT holds (a finished or an interrupted run); the old "
                             "output stays until the new run has succeeded.")(fn)
