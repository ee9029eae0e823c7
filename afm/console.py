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


PLAIN_EVERY_S = 30.0  # off a terminal: one progress line this often (and one at the end)


def make_progress(plain_every_s: float = PLAIN_EVERY_S) -> Progress | PlainProgress:
    """A live bar on a terminal; elsewhere (piped, a log file, a scheduler) a plain line
    every ``plain_every_s`` seconds and, after those, a last one at the end, so a long run
    is never silent in its log (a short one prints nothing: its summary says it all).
    Off a terminal rich's bar draws nothing, which is why piped ``afm train`` was silent."""
    if not console.is_terminal:
        return PlainProgress(plain_every_s)
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


class PlainProgress:
    """The part of rich's ``Progress`` the commands use (``add_task``, ``update``,
    ``advance``, a context manager), printing timestamped plain lines instead of a bar:
    ``12:00:31 train tiny-core 120/500 (24%) loss 3.2104 lr 1.00e-03 9,812 tok/s, 0:00:30
    elapsed, ~0:01:35 left``."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.tasks: dict[int, dict[str, Any]] = {}

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for task_id, task in self.tasks.items():  # the last state of a task that ran long enough to report
            if task["printed"] is not None and task["printed"] != task["completed"]:
                self._print(task_id)

    def add_task(self, description: str, total: float | None = None, **fields: Any) -> int:
        task_id = len(self.tasks)
        now = time.monotonic()
        self.tasks[task_id] = {"description": description, "total": total, "completed": 0.0,
                               "fields": dict(fields), "started": now, "next": now + self.every_s,
                               "printed": None}
        return task_id

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def update(self, task_id: int, *, advance: float | None = None, completed: float | None = None,
               total: float | None = None, description: str | None = None, **fields: Any) -> None:
        task = self.tasks[task_id]
        if completed is not None:
            task["completed"] = completed
        if advance:
            task["completed"] += advance
        if total is not None:
            task["total"] = total
        if description is not None:
            task["description"] = description
        task["fields"].update(fields)
        if time.monotonic() >= task["next"]:
            self._print(task_id)

    def _print(self, task_id: int) -> None:
        task = self.tasks[task_id]
        now = time.monotonic()
        task["next"] = now + self.every_s
        task["printed"] = task["completed"]
        done, total, elapsed = task["completed"], task["total"], now - task["started"]
        count = f"{done:,.0f}/{total:,.0f} ({done / total:.0%})" if total else f"{done:,.0f}"
        left = (f", ~{_clock(elapsed * (total - done) / done)} left" if total and 0 < done < total else "")
        rate = str(task["fields"].get("rate", "")).strip()
        console.print(f"{time.strftime('%H:%M:%S')} {task['description']} {count}" + (f" {rate}" if rate else "")
                      + f", {_clock(elapsed)} elapsed{left}", highlight=False, markup=False, soft_wrap=True)


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


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
