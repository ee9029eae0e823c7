"""Run an expensive probe or load once per process and argument, however many threads ask.

Why not ``functools.cache``: it keeps its table consistent across threads, but two threads
that miss at the same moment both run the function. The things memoised here start
processes (the sandbox's kernel probe), create and remove cgroups, or load a model from
disk; running one twice at once is wasted work at best and a wrong answer at worst (two
probes racing for the same cgroup). :func:`once` holds a lock while the function runs, so
callers that arrive meanwhile wait and then share the one result.

A function that raises leaves nothing behind: the next call tries again. The results are
a plain dict (:attr:`Once.results`, keyed by the argument tuple, ``()`` for a function of
no arguments), so a test pretends a host by setting an entry with ``monkeypatch.setitem``.

Standard library only: the code sandbox (``sandbox/``) uses it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Once(Generic[T]):
    """``make(*args)`` memoised per argument tuple; at most one call of ``make`` at a time."""

    def __init__(self, make: Callable[..., T]) -> None:
        self.make = make
        self.results: dict[tuple[Hashable, ...], T] = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, make)

    def __call__(self, *args: Any) -> T:
        with self._lock:
            if args not in self.results:
                self.results[args] = self.make(*args)
            return self.results[args]


def once(make: Callable[..., T]) -> Once[T]:
    """Decorator: the function runs once per process for each argument tuple (see module)."""
    return Once(make)


__all__ = ["Once", "once"]
