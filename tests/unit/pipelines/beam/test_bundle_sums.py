"""Counts summed within each bundle (afm.pipelines.beam.bundle_sums): the totals after the
keyed sum are the same as counting every element, and what leaves the bundles is one pair
per key, not one per element (what a local run's launcher then carries)."""

from __future__ import annotations

from collections import Counter

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from afm.pipelines.beam.bundle_sums import SumKeysInBundle

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def _keys(n: int, labels: tuple[str, ...]) -> list[tuple[str, int]]:
    return [(f"{label}|{n % 3}", 1) for label in labels] + [("weight", n)]


def test_totals_match_counting_every_element_and_fewer_pairs_cross() -> None:
    numbers = list(range(1, 2001))
    expected: Counter = Counter()
    for n in numbers:
        for key, k in _keys(n, ("a", "b")):
            expected[key] += k

    def few_pairs(pairs: list[tuple[str, int]]) -> None:
        assert len(pairs) < len(numbers) // 10, len(pairs)

    with beam.Pipeline(options=PipelineOptions(LOCAL)) as pipeline:
        partial = (pipeline | beam.Create(numbers)
                   | beam.ParDo(SumKeysInBundle(_keys, ("a", "b"))))
        assert_that(partial, few_pairs, label="one pair per key and bundle")
        assert_that(partial | beam.CombinePerKey(sum), equal_to(sorted(expected.items())), label="totals")


def test_an_empty_input_gives_no_pairs() -> None:
    with beam.Pipeline(options=PipelineOptions(LOCAL)) as pipeline:
        out = pipeline | beam.Create([]) | beam.ParDo(SumKeysInBundle(_keys, ("a",)))
        assert_that(out, equal_to([]))
