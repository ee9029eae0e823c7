"""How the data commands report user errors: one clean line, no traceback.

Every ``afm`` data command runs its work inside :func:`user_errors`. Bad configs, missing
or refused inputs, unusable output directories and invalid options become a
``click.ClickException`` (exit 1, ``Error: ...``); a violated accounting rule exits 2.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click


@contextmanager
def user_errors() -> Iterator[None]:
    from afm.config import ConfigError
    from afm.console import console
    from afm.outputs import OutputError
    from afm.pipelines.beam.accounting import AccountingError

    try:
        yield
    except AccountingError as exc:
        console.print(f"[bold red]{exc}")
        raise SystemExit(2) from exc
    except (ConfigError, OutputError, FileNotFoundError, PermissionError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
