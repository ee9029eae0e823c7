"""Live progress of a data pipeline on the local runner: documents read, kept, rejected,
the rate, the time elapsed and, where the input's size is known, an estimate of what is
left.

Beam's local runner reports its metrics only when the pipeline has finished, and its
workers are other processes. So the steps that count (the reader, and a pass-through
:class:`Tick` before each writer) keep their own counts and publish them, at most twice a
second, as a small JSON file per step instance in a progress directory on this machine
(:class:`ProgressFile`, written atomically); :class:`ProgressDisplay`, a thread of the
launching process, adds the files up and draws one line (a live bar on a terminal, a plain
line every ``plain_every_s`` seconds otherwise). Cluster runners get no ticks: their
workers share no directory with the launcher, and their own UIs show progress (the
launcher prints where, :func:`afm.pipelines.beam.runners.watch_hint`).

The reader's estimate is by bytes: finished files count their size, the file being read
its offset (WARC members and JSONL lines have one; a whole-file gzip or a Parquet file
counts when it finishes). Everything fused with reading (the per-document stages) runs
with it; what follows the first shuffle (dedup, decontamination, writing) comes after,
and the line names it: each global stage's input is ticked too (:func:`stage_label`), so
the line says which stage the run is in (``stage dedup``), keeps the reading rate once
reading ends (it does not fall while a later stage works), and, when no count has moved
for ``QUIET_AFTER_S``, says that the stage works unseen rather than stalling silently.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from afm.console import console

PUBLISH_EVERY_S = 0.5


class ProgressFile:
    """One step instance's counts, published as ``<directory>/<name>.json``."""

    def __init__(self, directory: str, kind: str):
        self.directory = directory
        self.path = os.path.join(directory, f"{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json")
        self.counts: dict[str, int] = {}
        self.bytes_done = 0  # finished files
        self.bytes_current = 0  # offset in the file being read
        self._last = 0.0

    def add(self, label: str, n: int = 1) -> None:
        self.counts[label] = self.counts.get(label, 0) + n
        now = time.monotonic()
        if now - self._last >= PUBLISH_EVERY_S:
            self.publish(now)

    def publish(self, now: float | None = None) -> None:
        self._last = time.monotonic() if now is None else now
        payload = {"counts": self.counts, "bytes": self.bytes_done + self.bytes_current}
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w") as fh:
                json.dump(payload, fh)
            os.replace(tmp, self.path)
        except OSError:  # progress is informational: a full disk must not fail the run
            pass


def make_tick(directory: str, label: str) -> Any:
    """A pass-through Beam step counting what passes under ``label``."""
    import apache_beam as beam

    class Tick(beam.DoFn):
        def __init__(self, directory: str, label: str):
            self.directory, self.label = directory, label

        def setup(self) -> None:
            self.file = ProgressFile(self.directory, self.label)

        def process(self, element: Any) -> Iterator[Any]:
            self.file.add(self.label)
            yield element

        def finish_bundle(self) -> None:
            self.file.publish()

    return beam.ParDo(Tick(directory, label))


@dataclass
class Snapshot:
    """The sum of every published file."""

    counts: dict[str, int]
    bytes: int


def read_progress(directory: str) -> Snapshot:
    counts: dict[str, int] = {}
    done = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return Snapshot({}, 0)
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name)) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue  # replaced while read: the next poll sees it
        for label, n in data.get("counts", {}).items():
            counts[label] = counts.get(label, 0) + int(n)
        done += int(data.get("bytes", 0))
    return Snapshot(counts, done)


STAGE_PREFIX = "stage:"  # a tick at a global stage's input: "stage:<order>:<name>"


def stage_label(order: int, name: str) -> str:
    """The tick label of the ``order``-th global stage (dedup, decontaminate, ...)."""
    return f"{STAGE_PREFIX}{order:02d}:{name}"


def phase(snap: Snapshot, total_bytes: int | None, read_label: str = "read") -> str:
    """Where the run is: reading (and the per-document stages fused with it), a global
    stage (the last one whose input tick has counted: it runs once its input is complete),
    or writing (documents, or rejects once nothing else is under way, reaching the writers)."""
    c = snap.counts
    reading_done = bool(total_bytes) and snap.bytes >= total_bytes
    # Kept documents reach the writer only after every global stage; rejects can reach it
    # while the input is read or a global stage works (a per-document stage's rejects are
    # fused with reading), so they mean writing only when nothing else is under way.
    if c.get("kept", 0):
        return "writing"
    stages = sorted(k for k in c if k.startswith(STAGE_PREFIX) and c[k])
    if stages and (reading_done or len(stages) > 1 or not c.get(read_label, 0)):
        return "stage " + stages[-1].split(":", 2)[2]
    if c.get("rejected", 0) and reading_done:
        return "writing"
    return "reading + per-document stages"


def describe(snap: Snapshot, elapsed: float, total_bytes: int | None, read_label: str = "read",
             read_rate: float | None = None, quiet_s: float = 0.0) -> str:
    """The progress line: the phase, counts, the reading rate, elapsed, an estimate while
    reading, and, when no count has moved for a while, that the stage works unseen
    (``quiet_s``: seconds since a count last changed). ``read_rate``: docs/s while the
    input was being read (kept once reading ends, so it does not fall while a later
    stage works)."""
    c = snap.counts
    read = c.get(read_label, 0)
    rate = read_rate if read_rate is not None else (read / elapsed if elapsed > 0 else 0.0)
    where = phase(snap, total_bytes, read_label)
    parts = [where, f"read {read:,}", f"kept {c.get('kept', 0):,}", f"rejected {c.get('rejected', 0):,}",
             f"{rate:,.1f} docs/s read", f"{_clock(elapsed)} elapsed"]
    if total_bytes:
        share = min(1.0, snap.bytes / total_bytes)
        if share >= 1.0 and where.startswith("reading"):
            parts.append("input read; the global stages and writing follow")
        elif 0 < share < 1.0:
            left = elapsed * (1 - share) / share
            parts.append(f"{100 * share:.0f}% of the input, ~{_clock(left)} left to read")
    if quiet_s >= QUIET_AFTER_S:
        parts.append(f"{where} working: no count moved for {_clock(quiet_s)} (its workers report when it ends)")
    return " · ".join(parts)


QUIET_AFTER_S = 20.0  # a line whose counts have not moved this long says the stage works unseen


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class ProgressDisplay:
    """A thread that polls the progress directory and shows the line (see the module
    docstring). Use as a context manager; on exit it prints the last line once."""

    def __init__(self, directory: str, title: str, *, total_bytes: int | None = None,
                 plain_every_s: float = 30.0, poll_s: float = 0.5, enabled: bool = True,
                 line_of: Any = None):
        self.directory, self.title, self.total_bytes = directory, title, total_bytes
        # the line: (snapshot, seconds elapsed, total bytes) -> text; documents' by default
        self.line_of = line_of or describe
        self.plain_every_s, self.poll_s, self.enabled = plain_every_s, poll_s, enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = time.monotonic()
        self.last = Snapshot({}, 0)
        self._seen: dict[str, int] = {}  # the counts at the last change
        self._changed = self.started
        self._read_rate: float | None = None
        self._read_last = (self.started, 0)

    def __enter__(self) -> ProgressDisplay:
        os.makedirs(self.directory, exist_ok=True)
        self.started = time.monotonic()
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="afm-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.last = read_progress(self.directory)

    def line(self) -> str:
        snap, now = read_progress(self.directory), time.monotonic()
        if self.line_of is not describe:  # a pipeline's own line (afm fetch: URLs and pages)
            return self.line_of(snap, now - self.started, self.total_bytes)
        if snap.counts != self._seen:
            self._seen, self._changed = dict(snap.counts), now
        read = snap.counts.get("read", 0)
        if read != self._read_last[1]:  # the rate of reading, frozen once reading stops
            self._read_last = (now, read)
            self._read_rate = read / max(now - self.started, 1e-9)
        return describe(snap, now - self.started, self.total_bytes, read_rate=self._read_rate,
                        quiet_s=now - self._changed)

    def _run(self) -> None:
        if console.is_terminal:
            with console.status(self.title, spinner="dots") as status:
                while not self._stop.wait(self.poll_s):
                    status.update(f"[bold]{self.title}[/] {self.line()}")
            return
        next_at = self.started + self.plain_every_s
        while not self._stop.wait(self.poll_s):
            if time.monotonic() >= next_at:
                console.print(f"{self.title}: {self.line()}", highlight=False, soft_wrap=True)
                next_at += self.plain_every_s


__all__ = ["ProgressDisplay", "ProgressFile", "Snapshot", "describe", "make_tick", "phase", "read_progress",
           "stage_label"]
