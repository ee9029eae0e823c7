"""Running one function in several threads at once (tests of per-thread state)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def in_threads(fn: Callable[[int], Any], n: int) -> list[Any]:
    """``fn(0) ... fn(n - 1)``, each in a thread of its own, all started before any is
    joined; their results in order."""
    results: list[Any] = [None] * n

    def run(k: int) -> None:
        results[k] = fn(k)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
