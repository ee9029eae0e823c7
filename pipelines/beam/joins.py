"""Joins that stay within bounded memory when one key is hot.

Beam's ``CoGroupByKey`` hands a DoFn one Python list per input for every key. When a key
is hot (50,000 copies of one cookie wall share a content hash; a million pages of one
shop template share an LSH bucket), that list holds the whole family on one worker.

Most joins in the data pipelines have a *lookup* side with at most one value per key
(a document's signature, a content hash's representative, a node's component) and a
*stream* side with any number of values. :class:`LookupJoin` groups both sides with one
``GroupByKey`` of tagged values and walks the group twice: the first pass finds the
lookup value, the second streams the other values past it, one at a time. The grouped
values are never copied into a list, so on runners whose grouped iterables are lazy
(Dataflow, Flink, and Beam's portable runners page large groups through the state API)
memory per key is one value, whatever the key's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import apache_beam as beam

LOOKUP, STREAM = 0, 1

JoinFn = Callable[[Any, Any, Any], Iterable[Any]]


class _TwoPassJoin(beam.DoFn):
    """``(key, tagged values)`` -> ``fn(key, lookup value or None, stream value)`` for
    every stream value (see the module docstring)."""

    def __init__(self, fn: JoinFn, need_lookup: bool) -> None:
        self.fn = fn
        self.need_lookup = need_lookup

    def process(self, element: tuple[Any, Iterable[tuple[int, Any]]]) -> Iterator[Any]:
        key, values = element
        found = None
        for tag, value in values:  # pass 1: the (at most one) lookup value
            if tag == LOOKUP:
                found = value
                break
        if found is None and self.need_lookup:
            return
        for tag, value in values:  # pass 2: stream the rest past it
            if tag == STREAM:
                yield from self.fn(key, found, value)


def _tag(tag: int) -> Callable[[tuple[Any, Any]], tuple[Any, tuple[int, Any]]]:
    return lambda kv: (kv[0], (tag, kv[1]))


class LookupJoin(beam.PTransform):
    """``{"lookup": (k, v), "stream": (k, w)}`` -> ``fn(k, v, w)`` for every ``w``.

    ``lookup`` must hold at most one value per key (a second one is ignored: callers
    build it with a combiner or from unique keys). With ``need_lookup`` (the default) a
    stream value whose key has no lookup value produces nothing; otherwise ``fn`` gets
    None for it.
    """

    def __init__(self, fn: JoinFn, need_lookup: bool = True, label: str | None = None):
        super().__init__(label)
        self.fn = fn
        self.need_lookup = need_lookup

    def expand(self, pcolls: dict[str, beam.PCollection]) -> beam.PCollection:
        tagged = (
            pcolls["lookup"] | "TagLookup" >> beam.Map(_tag(LOOKUP)),
            pcolls["stream"] | "TagStream" >> beam.Map(_tag(STREAM)),
        )
        return (
            tagged
            | "Union" >> beam.Flatten()
            | "Group" >> beam.GroupByKey()
            | "Join" >> beam.ParDo(_TwoPassJoin(self.fn, self.need_lookup))
        )
