"""The one base class of errors in what the user gave: options, files, data, checkpoints.

A :class:`UserError` is reported by the ``afm`` command as one ``Error:`` line, never a
traceback, whichever command raised it (``app/cli.py``); its message says what is wrong
and, where there is one, the way out. Errors that mean a bug in afm stay ordinary
exceptions, so their traceback is shown.
"""

from __future__ import annotations


class UserError(ValueError):
    """Something the user gave (an option, a file, a dataset, a checkpoint) cannot be used."""


__all__ = ["UserError"]
