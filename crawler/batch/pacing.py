"""Request pacing: at least ``interval`` seconds between the starts of two requests, at
most ``concurrency`` in flight, for one host or one server.

A request holds every pacer that applies to it (its host's and its server's) at once
(:func:`paced`): it starts only when each allows it, and its start is recorded in each, so
a wait imposed by one never lets another fall below its own spacing.

A server too large for one worker is split into ``slices`` fetched by different workers
(maybe at the same time). Slice ``slot`` of ``slices`` then starts requests only at the
points of a clock grid shared by all of them (wall clock, so workers on one machine, or on
machines whose clocks agree, share it): period ``slices x width``, offset ``slot x width``,
``width = interval x (1 + GRID_MARGIN)``. A start may fall in the first
``GRID_MARGIN x interval`` of its slot (a timer woke late); later, it waits for its next
slot. Two starts of different slices are therefore at least ``interval`` apart, and the
slices together never exceed one request per ``interval``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

GRID_MARGIN = 0.25


class Pacer:
    """The spacing and concurrency of one host or server (see the module docstring)."""

    def __init__(self, interval: float, concurrency: int, *, slot: int = 0, slices: int = 1,
                 last_start: float = 0.0, clock: Callable[[], float] = time.time) -> None:
        if slices < 1 or not 0 <= slot < slices:
            raise ValueError(f"slot {slot} of {slices} slices")
        self.interval = max(0.0, interval)
        self.slots, self.slot = slices, slot
        self.width = self.interval * (1 + GRID_MARGIN) if slices > 1 else self.interval
        self.concurrency = max(1, concurrency)
        self.semaphore = asyncio.Semaphore(self.concurrency)
        self.last_start = last_start
        self.clock = clock
        self.starts = 0

    def earliest(self, now: float) -> float:
        """The earliest time at or after ``now`` a request may start."""
        ready = max(now, self.last_start + self.interval) if self.starts or self.last_start else now
        if self.slots == 1 or self.interval <= 0:
            return ready
        period = self.width * self.slots
        offset = self.slot * self.width
        k = math.floor((ready - offset) / period)
        start = offset + k * period
        if ready <= start + GRID_MARGIN * self.interval:
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
        yield now
    finally:
        for p in acquired:
            p.semaphore.release()


__all__ = ["GRID_MARGIN", "Pacer", "paced"]
