"""Stop requests (SIGTERM: TPU preemption, a scheduler's kill) agreed by every host.

A signal reaches each host at a different moment, or only some hosts. If each host acted
on its own flag, one would enter the checkpoint save (a collective) while another ran the
next train step (another collective) and both would wait forever. So every host reads
its local flag at the same step boundaries and the hosts agree with a tiny all-gather
(``multihost_utils.process_allgather``): if any host was asked to stop, all of them save
the same step and exit. Single-host runs skip the collective.
"""

from __future__ import annotations

import signal
from typing import Any

import numpy as np


class StopSignal:
    """``with StopSignal() as stop: ... if stop.agreed(step): save and break``."""

    def __init__(self, check_every: int = 1, signals: tuple[int, ...] = (signal.SIGTERM,)):
        self.check_every = max(1, check_every)
        self.signals = signals
        self.local = False  # this host got a signal
        self.stopping = False  # the hosts agreed to stop
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignal:
        for sig in self.signals:
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: no handler, the run still works
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.local = True

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    def agreed(self, step: int) -> bool:
        """True on every host once any host was signalled (checked every ``check_every``
        steps; call it on every host at every step)."""
        if self.stopping:
            return True
        if step % self.check_every:
            return False
        import jax

        if jax.process_count() == 1:
            self.stopping = self.local
        else:
            from jax.experimental import multihost_utils

            flags = multihost_utils.process_allgather(np.asarray([int(self.local)], np.int32))
            self.stopping = bool(np.asarray(flags).max())
        return self.stopping
