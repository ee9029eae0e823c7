"""Hot keys of the dedup graph: each test builds one and checks both the result and that
the step handling it holds a bounded amount, whatever the number of copies.

The memory figures at scale (10,000 vs 50,000 copies) come from ``afm bench
dedup_hotkey``; here the same corpus runs small and the bounds are checked structurally.
"""

from __future__ import annotations

import math
from collections import Counter

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from afm.app.bench.pipelines.hotkey import check_result, corpus
from afm.pipelines.dedup.pipeline import DedupConfig, dedup_records
from afm.pipelines.dedup.steps import BucketStars, Representative
from tests.integration.pipelines.dedup.test_connected_components import union_find_assignments


def _sketch(i: int) -> tuple[str, bytes, bytes]:
    return (f"n{i:08d}", b"bands", b"sig")


def test_exact_duplicates_combine_to_the_smallest_node_and_a_count() -> None:
    """50,000 copies of one content hash: partial results merge to one (sketch, count);
    an accumulator is one sketch and an int however many copies it has seen."""
    fn = Representative()
    parts = []
    for start in range(0, 50_000, 5_000):  # ten bundles, each pre-combined
        acc = fn.create_accumulator()
        for i in reversed(range(start, start + 5_000)):
            acc = fn.add_input(acc, _sketch(i))
        assert acc == (_sketch(start), 5_000)
        parts.append(acc)
    assert fn.extract_output(fn.merge_accumulators(parts)) == (_sketch(0), 50_000)
    with beam.Pipeline(runner="DirectRunner") as p:
        out = (p | beam.Create([(b"hot", _sketch(i)) for i in range(20_000)]
                               + [(b"cold", _sketch(7))])
               | beam.CombinePerKey(Representative()))
        assert_that(out, equal_to([(b"hot", (_sketch(0), 20_000)), (b"cold", (_sketch(7), 1))]))


def _connected_to(edges: list[tuple[str, str]], root: str) -> set[str]:
    """Every node in ``root``'s component (the union-find reference of the components test)."""
    assignments = dict(union_find_assignments(edges))
    rep = assignments.get(root, root)
    return {rep} | {n for n, r in assignments.items() if r == rep}


def test_a_huge_lsh_bucket_becomes_a_star_of_bounded_fan_out() -> None:
    """20,000 near-copies of one template in one bucket: a spanning tree (size - 1 edges,
    never size^2 / 2), every node connected to the bucket's minimum, and no node with
    much more than ``fanout`` edges."""
    fanout, size = 100, 20_000
    nodes = [f"n{(i * 7919) % 1_000_003:08d}" for i in range(size)]
    edges = list(BucketStars(fanout).process((42, nodes)))
    assert len(edges) == size - 1
    assert _connected_to(edges, min(nodes)) == set(nodes)
    degree = Counter(n for e in edges for n in e)
    parts = math.ceil(size / fanout)
    assert max(degree.values()) <= 2 * fanout + parts, max(degree.values())
    # A bucket within the fan-out is a plain star around its minimum.
    small = nodes[:fanout]
    star = list(BucketStars(fanout).process((1, small)))
    assert {hub for hub, _ in star} == {min(small)} and len(star) == fanout - 1


def test_hot_families_deduplicate_with_bounded_steps(shared_eval) -> None:
    """The benchmark's corpus, small: 1,500 identical boilerplate pages, 600 near-copies
    of one template and 300 unique pages. One copy per family is kept, every unique page
    is kept, the template's buckets were split, and the component rounds after
    convergence moved nothing."""
    docs = corpus(1_500, unique=300)
    cfg = DedupConfig(max_bucket_fanout=50)
    kept, rejected, metrics = dedup_records(docs, cfg)
    assert check_result(docs, [d["id"] for d in kept]) == []
    assert len(kept) + len(rejected) == len(docs)
    assert metrics["buckets_split"] > 0
    assert metrics["exact_groups_with_duplicates"] >= 2  # boilerplate, repeated templates
    assert metrics.get("cc_unsettled_after_max_rounds", 0) == 0
    busy = [r for r in range(cfg.max_rounds) if metrics.get(f"cc_round_{r:02d}_edges", 0)]
    assert busy and busy == list(range(len(busy))) and len(busy) < cfg.max_rounds, busy
    converged = max(r for r in busy if metrics.get(f"cc_round_{r:02d}_unsettled", 0) == 0)
    assert converged == busy[-1]  # the last busy round saw a star forest: later ones empty
