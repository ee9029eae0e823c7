"""The batch fetcher's pacing (:mod:`afm.crawler.batch.pacing`): starts at least the interval
apart counted from when a request really left, concurrency bounded, and slices of a split
server on disjoint slots of one clock grid."""

from __future__ import annotations

import asyncio

from afm.crawler.batch.pacing import Pacer, paced, request_sent


class Clock:
    """A clock that only moves when told (asyncio.sleep is patched to move it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run_paced(pacer: Pacer, clock: Clock, late: list[float], *, report: bool = True) -> list[float]:
    """A request through ``pacer`` for each of ``late``: it leaves that long after its
    release (a busy loop), told to the pacers when ``report``. Returns when they left."""
    left: list[float] = []

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    async def main() -> None:
        for delay in late:
            async with paced([pacer]):
                clock.now += delay
                if report:
                    request_sent()
                left.append(clock.now)

    real_sleep = asyncio.sleep
    asyncio.sleep = sleep  # type: ignore[assignment]
    try:
        asyncio.run(main())
    finally:
        asyncio.sleep = real_sleep  # type: ignore[assignment]
    return left


def test_spacing_counts_from_when_a_request_left() -> None:
    late = [0.3, 0.0, 0.4, 0.0, 0.1, 0.0]
    clock = Clock()
    left = run_paced(Pacer(1.0, 2, clock=clock), clock, late)
    assert min(b - a for a, b in zip(left, left[1:])) >= 1.0 - 1e-9
    clock = Clock()  # counted from the release only, a late request shortens the next gap
    left = run_paced(Pacer(1.0, 2, clock=clock), clock, late, report=False)
    assert min(b - a for a, b in zip(left, left[1:])) < 0.7


def test_a_request_sent_outside_a_paced_block_touches_no_pacer() -> None:
    request_sent()  # no pacer held: nothing to do, no error


def test_slices_of_one_server_never_start_within_the_grid_interval() -> None:
    """Two slices of a server (interval 1 s): every start any slice may take, over a minute
    of the shared grid, is at least the interval away from any start of the other."""
    a, b = (Pacer(1.0, 1, slot=s, slices=2, grid_interval=1.0) for s in (0, 1))
    starts = {0: set(), 1: set()}
    for p, slot in ((a, 0), (b, 1)):
        t = 0.0
        while t < 60:
            s = p.earliest(t)
            starts[slot].add(round(s, 6))
            t = s + p.window / 3
    near = [(x, y) for x in starts[0] for y in starts[1] if abs(x - y) < 1.0 - 1e-9]
    assert not near, near[:5]


def test_one_at_a_time_counts_from_the_end_of_the_previous_response() -> None:
    """A pacer of one request at a time (a Crawl-delay host): a response taking 0.7 s does
    not eat into the delay, so the server sees the delay whatever its own lag."""
    clock = Clock()
    left = run_paced(Pacer(1.0, 1, clock=clock), clock, [0.7, 0.0, 0.7])
    assert [round(b - a, 6) for a, b in zip(left, left[1:])] == [1.0, 1.7]
