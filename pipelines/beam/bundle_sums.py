"""Keyed counts summed within each bundle before they cross a boundary.

A curate run counts every PCollection it passes between stages, and the kinds of document
each stage keeps and rejects, as ``(key, n)`` pairs gathered by one ``Flatten`` and summed by
one ``CombinePerKey`` (curate's ``Counts`` and ``KindCounts``). Beam lifts the combiner's
partial sums to *after* the flatten, so on the local runner every document's pairs (a few
dozen a document by the end of a web run) crossed that boundary one by one, in one stage
input that grows with the corpus: 8.9 and 11.6 MB on 20,000 documents, measured in the
launcher of ``afm bench curate_memory``. Summed in each bundle first, what crosses is one
pair per key and bundle.

The sums stay exact on every runner: a retried bundle's output, these partial sums
included, is discarded with the bundle, and the combine after the flatten adds the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.utils.windowed_value import WindowedValue


class SumKeysInBundle(beam.DoFn):
    """Element -> nothing; at the end of the bundle one ``(key, total)`` per key and window
    of the pairs ``keys(element, *args)`` gave."""

    def __init__(self, keys: Callable[..., Iterable[tuple[Any, int]]], *args: Any):
        self.keys, self.args = keys, args

    def start_bundle(self) -> None:
        self.sums: dict[Any, Counter] = {}

    def process(self, element: Any, window: Any = beam.DoFn.WindowParam) -> Iterator[Any]:
        sums = self.sums.setdefault(window, Counter())
        for key, n in self.keys(element, *self.args):
            sums[key] += n
        return iter(())

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for window, sums in self.sums.items():
            for key, n in sums.items():
                yield WindowedValue((key, n), window.max_timestamp(), [window])
        self.sums = {}


__all__ = ["SumKeysInBundle"]
