"""Request pacing: at least ``interval`` seconds between the starts of two requests, at
most ``concurrency`` in flight, for one host or one server.

A request holds every pacer that applies to it (its host's and its server's) at once
(:func:`paced`): it starts only when each allows it, and its start is recorded in each, so
a wait imposed by one never lets another fall below its own spacing.

A server too large for one worker is split into ``slices`` fetched by different workers
(maybe at the same time). Slice ``slot`` of ``slices`` then starts requests only in its own
slots of a clock grid shared by all of them (wall clock, so workers on one machine, or on
machines whose clocks agree, share it): slots ``width`` long, slot ``k`` belonging to
slice ``k mod slices``, a start allowed in the first ``window`` of a slot (a timer that
woke later waits for the slice's next slot). With ``width = grid_interval + window``, where
``grid_interval`` is the longest interval of the server and of every host of the slice,
two starts of different slices are at least ``grid_interval`` apart: the slices together
keep every host's and the server's spacing. Only the server's pacer has the grid (one
grid per request: two grids of other phases could never agree on a time).

A request's spacing counts from the later of its release by the pacers and the moment its
headers were written to the socket (:func:`request_sent`, called by the HTTP client): a
busy event loop or machine between the two must not shorten the gap the server sees. A
pacer of one request at a time (a host with a Crawl-delay, or ``per_host_concurrency: 1``)
counts it from when the previous response ended, as Nutch and Heritrix honour a delay:
the server then sees at least the interval between two requests whatever either side's
scheduling lag (it logs a request before it answers it).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar

GRID_MARGIN = 0.25  # window = this share of the grid interval ...
MIN_WINDOW_S = 0.05  # ... and never less (a busy machine wakes timers late)
_HELD: ContextVar[tuple[Pacer, ...]] = ContextVar("afm_paced", default=())


class Pacer:
    """The spacing and concurrency of one host or server (see the module docstring)."""

    def __init__(self, interval: float, concurrency: int, *, slot: int = 0, slices: int = 1,
                 grid_interval: float = 0.0, last_start: float = 0.0,
                 clock: Callable[[], float] = time.time) -> None:
        if slices < 1 or not 0 <= slot < slices:
            raise ValueError(f"slot {slot} of {slices} slices")
        self.interval = max(0.0, interval)
        self.slots, self.slot = slices, slot
        spacing = max(self.interval, grid_interval)
        self.window = max(GRID_MARGIN * spacing, MIN_WINDOW_S)
        self.width = spacing + self.window
        self.concurrency = max(1, concurrency)
        self.from_end = self.concurrency == 1  # spacing from the previous response's end
        self.semaphore = asyncio.Semaphore(self.concurrency)
        self.last_start = last_start
        self.clock = clock
        self.starts = 0

    def earliest(self, now: float) -> float:
        """The earliest time at or after ``now`` a request may start."""
        ready = max(now, self.last_start + self.interval) if self.starts or self.last_start else now
        if self.slots == 1:
            return ready
        period = self.width * self.slots
        offset = self.slot * self.width
        k = math.floor((ready - offset) / period)
        start = offset + k * period
        if ready <= start + self.window:
            return max(ready, start)
        return offset + (k + 1) * period

    def record(self, when: float) -> None:
        self.last_start = when
        self.starts += 1


@asynccontextmanager
async def paced(pacers: list[Pacer]) -> AsyncIterator[float]:
    """Hold a place in every pacer of ``pacers`` for one request; yields its start time."""
    acquired: list[Pacer] = []
    try:
        for p in pacers:
            await p.semaphore.acquire()
            acquired.append(p)
        clock = pacers[0].clock if pacers else time.time
        while True:
            now = clock()
            start = max((p.earliest(now) for p in pacers), default=now)
            if start <= now:
                break
            await asyncio.sleep(start - now)
        for p in pacers:
            p.record(now)
        held = _HELD.set(tuple(pacers))
        try:
            yield now
        finally:
            _HELD.reset(held)
            ended = clock()
            for p in pacers:
                if p.from_end:
                    p.last_start = max(p.last_start, ended)
    finally:
        for p in acquired:
            p.semaphore.release()


def request_sent(when: float | None = None) -> None:
    """The request of the current :func:`paced` block (this task's) has left: each of its
    pacers counts its spacing from now, if that is later than the release."""
    for p in _HELD.get():
        p.last_start = max(p.last_start, p.clock() if when is None else when)


__all__ = ["GRID_MARGIN", "MIN_WINDOW_S", "Pacer", "paced", "request_sent"]
