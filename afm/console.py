"""Shared terminal output: one stderr console, progress bars, end-of-run summaries.

Results a user may pipe (extracted text, JSON, `allowed URL` lines) go to stdout with
plain ``print``/``click.echo``; everything for the human (progress, configs, summaries)
goes to stderr through :data:`console`, so the two never mix.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

console = Console(stderr=True)
T = TypeVar("T")


def setup_logging(level: str | int = "INFO") -> None:
    """Route the standard ``logging`` tree through rich on stderr (idempotent)."""
    root = logging.getLogger()
    if not any(isinstance(h, RichHandler) for h in root.handlers):
        root.addHandler(RichHandler(console=console, show_path=False, rich_tracebacks=False))
    root.setLevel(level)


def make_progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    )


def track(
    items: Iterable[T], description: str, total: int | None = None, unit: str = "it"
) -> Iterator[T]:
    """Iterate with a progress bar (drawn only on a terminal) showing items/s."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    start = time.perf_counter()
    with make_progress() as progress:
        task = progress.add_task(description, total=total, rate="")
        for n, item in enumerate(items, 1):
            yield item
            elapsed = max(time.perf_counter() - start, 1e-9)
            progress.update(task, advance=1, rate=f"{n / elapsed:,.1f} {unit}/s")


def print_summary(title: str, rows: dict[str, Any] | list[tuple[str, Any]]) -> None:
    """The end-of-run summary: a two-column table of what happened."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    items = rows.items() if isinstance(rows, dict) else rows
    for key, value in items:
        if isinstance(value, float):
            value = f"{value:,.4g}"
        elif isinstance(value, int):
            value = f"{value:,}"
        table.add_row(str(key), str(value))
    console.print(table)


def print_table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    """A plain table (benchmarks, cluster statistics...)."""
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*[f"{v:,.4g}" if isinstance(v, float) else str(v) for v in row])
    console.print(table)
