"""Large-star / small-star connected components in Beam agree with union-find."""

from __future__ import annotations

import random

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from afm.pipelines.dedup.pipeline import NAMESPACE, ConnectedComponents


def union_find_assignments(edges: list[tuple[str, str]]) -> list[tuple[str, str]]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    for u, v in edges:
        a, b = find(u), find(v)
        if a != b:
            parent[max(a, b)] = min(a, b)
    nodes = {n for e in edges for n in e}
    members: dict[str, list[str]] = {}
    for n in nodes:
        members.setdefault(find(n), []).append(n)
    return sorted((n, min(group)) for group in members.values() for n in group if n != min(group))


def test_components_match_union_find_on_paths_stars_and_random_graph() -> None:
    rng = random.Random(0)
    labels = [f"n{rng.getrandbits(40):012x}" for _ in range(600)]
    edges = []
    path = labels[:120]  # a long path with shuffled labels: the slow case for label spreading
    edges += list(zip(path, path[1:]))
    star = labels[120:220]  # one big star around a non-minimal centre
    edges += [(star[0], s) for s in star[1:]]
    rest = labels[220:]  # sparse random graph: many small components and singletons
    edges += [tuple(rng.sample(rest, 2)) for _ in range(200)]
    edges = [(min(u, v), max(u, v)) for u, v in edges]
    expected = union_find_assignments(edges)

    pipeline = beam.Pipeline(runner="DirectRunner")
    out = pipeline | beam.Create(edges) | ConnectedComponents(max_rounds=8)
    assert_that(out, equal_to(expected))
    result = pipeline.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    }
    assert counters.get("cc_unsettled_after_max_rounds", 0) == 0
    assert counters.get("cc_round_00_unsettled", 0) > 0  # the input was not yet star-shaped
