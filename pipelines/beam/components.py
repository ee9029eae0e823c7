"""Connected components of a graph given as an edge PCollection, in Beam.

Alternating large-star and small-star rounds (Kiveris et al., "Connected Components in
MapReduce and Beyond", 2014). A Beam graph is static, so the rounds are unrolled up to
``max_rounds``, but rounds after convergence move no data:

* each large-star step counts the nodes of its input that are not yet settled (a node
  with a smaller neighbour must have exactly one neighbour in a star forest); the count
  is summed over the whole graph;
* the step's output is routed on that sum (a side input): once the input of a round was
  a star forest, every edge leaves the loop as a final ``(leaf, centre)`` assignment and
  the later rounds get empty inputs, so their shuffles are empty.

Memory per node is bounded: every step walks a node's neighbours as a stream (two passes:
the minimum first, then the edges out) and never collects them, so the centre of a star
with a million leaves costs one neighbour at a time on runners with lazy grouped
iterables. Repeated edges are tolerated (they cannot change a component); the final
assignment is a ``min`` combiner per node, which also removes repeats.

The counters ``cc_round_NN_unsettled`` and ``cc_round_NN_edges`` show where the graph
converged and that later rounds were empty; ``cc_unsettled_after_max_rounds`` non-zero
means ``max_rounds`` was too small (some clusters stay split: duplicates kept, never a
document lost).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

NAMESPACE = "afm.dedup"  # the dedup metrics' namespace: components are part of dedup
UNSETTLED = "unsettled"
DONE = "done"


def both_directions(edge: tuple[str, str]) -> Iterator[tuple[str, str]]:
    u, v = edge
    yield u, v
    yield v, u


def _min_and_spread(u: str, neighbours: Iterable[str]) -> tuple[str | None, bool, int]:
    """One pass: the smallest neighbour, whether there is more than one distinct
    neighbour, and how many entries were seen (without holding them)."""
    smallest = first = None
    several = False
    count = 0
    for v in neighbours:
        count += 1
        if first is None:
            first = smallest = v
        else:
            several = several or v != first
            if v < smallest:
                smallest = v
    return smallest, several, count


class _LargeStar(beam.DoFn):
    """Node u with neighbours N: connect every neighbour larger than u to min(N + u).
    Emits edges larger endpoint first; tags a 1 to ``unsettled`` unless u is settled."""

    def __init__(self, round_no: int):
        self.unsettled = Metrics.counter(NAMESPACE, f"cc_round_{round_no:02d}_unsettled")
        self.edges_in = Metrics.counter(NAMESPACE, f"cc_round_{round_no:02d}_edges")

    def process(self, element: tuple[str, Iterable[str]]) -> Iterator[object]:
        u, neighbours = element
        smallest, several, count = _min_and_spread(u, neighbours)
        if smallest is None:
            return
        self.edges_in.inc(count)
        if smallest < u and several:
            self.unsettled.inc()
            yield beam.pvalue.TaggedOutput(UNSETTLED, 1)
        m = min(smallest, u)
        for v in neighbours:
            if v > u:
                yield v, m


class _Route(beam.DoFn):
    """Large-star output -> the next round, or out of the loop once converged."""

    def process(self, edge: tuple[str, str], unsettled: int) -> Iterator[object]:
        if unsettled:
            yield edge
        else:
            yield beam.pvalue.TaggedOutput(DONE, edge)


def _small_star(element: tuple[str, Iterable[str]]) -> Iterator[tuple[str, str]]:
    """Node u with its smaller neighbours S: connect u and all of S to min(S). Emits each
    edge in both directions, ready for the next large-star grouping."""
    u, smaller = element
    m, _several, _count = _min_and_spread(u, smaller)
    if m is None:
        return
    yield m, u
    yield u, m
    for v in smaller:
        if v != m:
            yield m, v
            yield v, m


class _Unconverged(beam.DoFn):
    """After the last round, if the graph had not converged: each node -> its smallest
    neighbour when that is smaller (counted as unsettled when it has others too)."""

    def __init__(self) -> None:
        self.unsettled = Metrics.counter(NAMESPACE, "cc_unsettled_after_max_rounds")

    def process(self, element: tuple[str, Iterable[str]]) -> Iterator[tuple[str, str]]:
        u, neighbours = element
        m, several, _count = _min_and_spread(u, neighbours)
        if m is not None and m < u:
            if several:
                self.unsettled.inc()
            yield u, m


class ConnectedComponents(beam.PTransform):
    """Edges ``(u, v)`` -> ``(node, component minimum)`` for every non-minimum node."""

    def __init__(self, max_rounds: int):
        super().__init__()
        self.max_rounds = max_rounds

    def expand(self, edges: beam.PCollection) -> beam.PCollection:
        edges = edges | "BothDirections" >> beam.FlatMap(both_directions)
        finished = []
        for r in range(self.max_rounds):
            large = (
                edges
                | f"LargeStarGroup{r}" >> beam.GroupByKey()
                | f"LargeStar{r}" >> beam.ParDo(_LargeStar(r)).with_outputs(UNSETTLED,
                                                                           main="edges")
            )
            unsettled = large[UNSETTLED] | f"Unsettled{r}" >> beam.CombineGlobally(sum)
            routed = large.edges | f"Route{r}" >> beam.ParDo(
                _Route(), beam.pvalue.AsSingleton(unsettled)).with_outputs(DONE, main="next")
            finished.append(routed[DONE])
            edges = (
                routed.next
                | f"SmallStarGroup{r}" >> beam.GroupByKey()
                | f"SmallStar{r}" >> beam.FlatMap(_small_star)
            )
        leftover = (edges | "LeftoverGroup" >> beam.GroupByKey()
                    | "Leftover" >> beam.ParDo(_Unconverged()))
        return (
            (*finished, leftover)
            | "AllAssignments" >> beam.Flatten()
            | "SmallestCentre" >> beam.CombinePerKey(min)
        )
