"""The steps of :class:`afm.pipelines.dedup.pipeline.FuzzyDedup`, each bounded for hot keys.

Every function and DoFn here handles one element or walks one group as a stream; none
collects a group into a list. The steps, in order:

1. :class:`SketchBatch`: documents -> keyed documents + small sketches.
2. :class:`Representative`: a combiner per content hash keeping the smallest node's
   sketch and the number of copies (lifted by the runner, so 50,000 copies of one page
   shuffle as one partial result per bundle, not 50,000 sketches).
3. :class:`BucketStars`: an LSH bucket -> a star of bounded fan-out (a huge bucket is
   split into sub-buckets by a stable hash; each sub-bucket is a star around its
   minimum, and the sub-bucket minimums a star around the bucket's minimum).
4. :func:`send_signature` / :func:`verify_edge`: candidate edges checked by signature
   agreement, through two lookup joins (:mod:`afm.pipelines.beam.joins`).
5. Connected components (:mod:`afm.pipelines.beam.components`).
6. :func:`exact_decision`, :func:`near_decision`, :class:`Finalize`: decisions, joined
   back to the documents by document key.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from afm.filters.minhash import MinHasher, band_keys
from afm.pipelines.beam.cputime import StageClock
from afm.pipelines.beam.packing import pack, unpack
from afm.pipelines.beam.spill import SpillReader, SpillWriter
from afm.pipelines.dedup.keys import doc_key, is_accepted, node_key, node_to_id, node_to_key
from afm.schema import invalid_reject, make_reject

STAGE = "dedup"
NAMESPACE = "afm.dedup"
EXACT, NEAR = "exact_duplicate", "near_duplicate"

Sketch = tuple[str, bytes, bytes]  # (node, band keys, signature)

_verified = Metrics.counter(NAMESPACE, "verified_edges")
_unverified = Metrics.counter(NAMESPACE, "unverified_edges")


# ------------------------------------------------------------------------ 1. sketches


def _invalid(doc: Any) -> str:
    """Why a record cannot be de-duplicated ("" when it can)."""
    if not isinstance(doc, dict):
        return f"not a document record: {type(doc).__name__}"
    if not isinstance(doc.get("id"), str) or not doc["id"]:
        return f"id is {type(doc.get('id')).__name__}, not a non-empty str"
    if not isinstance(doc.get("text"), str):
        return f"text is {type(doc.get('text')).__name__}, not str"
    return ""


class SketchBatch(beam.DoFn):
    """Batch of documents -> keyed documents (main) + sketches (tagged ``sketch``) +
    rejects of records that are not documents (tagged ``invalid``)."""

    def __init__(self, num_perm: int, seed: int, ngram: int, bands: int, rows: int,
                 keep_index_rows: bool, spill_dir: str | None = None):
        self.num_perm, self.seed, self.ngram = num_perm, seed, ngram
        self.bands, self.rows = bands, rows
        self.keep_index_rows = keep_index_rows
        self.spill_dir = spill_dir  # documents wait for the final join with texts stowed
        self.writer: Any = None
        self.invalid = Metrics.counter(NAMESPACE, "invalid_documents")
        self.empty = Metrics.counter(NAMESPACE, "documents_without_words")
        self.docs = Metrics.counter(NAMESPACE, "documents_in")

    def setup(self) -> None:
        self.hasher = MinHasher(self.num_perm, self.seed, self.ngram)
        self.clock = StageClock("dedup")  # the sketches: dedup's own CPU (cputime.py)

    def start_bundle(self) -> None:
        self.writer = SpillWriter(self.spill_dir) if self.spill_dir else None

    def finish_bundle(self) -> None:
        self.clock.flush()
        if self.writer is not None:
            self.writer.close()

    def _waiting(self, doc: dict[str, Any], row: dict[str, Any] | None) -> bytes:
        """A document as it waits for the final join: packed, its text stowed."""
        return pack((self.writer.stow(doc) if self.writer is not None else doc, row))

    def process(self, batch: list[dict[str, Any]]) -> Iterator[Any]:
        valid: list[dict[str, Any]] = []
        for doc in batch:
            # Pipelines coerce documents when reading (afm.pipelines.beam.coerce); callers of the
            # transform who pass something else get a reject, never a failed run.
            problem = _invalid(doc)
            if problem:
                self.invalid.inc()
                yield beam.pvalue.TaggedOutput("invalid", invalid_reject(doc, STAGE, problem))
                continue
            valid.append(doc)
        if not valid:
            return
        self.docs.inc(len(valid))
        sk = self.clock.call(self.hasher.sketch, [d["text"] for d in valid])
        # Explicit little-endian bytes: the index format must not depend on the host.
        keys = self.clock.call(band_keys, sk.signatures, self.bands, self.rows).astype("<i8", copy=False)
        signatures = sk.signatures.astype("<u4", copy=False)
        for i, doc in enumerate(valid):
            content = sk.content_hashes[i].tobytes()
            key = doc_key(doc["id"], content)
            if sk.num_words[i] == 0:
                self.empty.inc()
                yield key, self._waiting(doc, None)
                continue
            sig = signatures[i].tobytes()
            bands = keys[i].tobytes()
            row = None
            if self.keep_index_rows:
                row = {"id": doc["id"], "key": key, "content_hash": content, "band_keys": bands,
                       "signature": sig}
            yield key, self._waiting(doc, row)  # documents wait for the final join packed
            node = node_key(key, doc.get("quality_score"))
            yield beam.pvalue.TaggedOutput("sketch", (content, (node, bands, sig)))


def accepted_sketches(rows: Iterable[tuple[str, bytes, bytes, bytes]]
                      ) -> Iterator[tuple[bytes, Sketch]]:
    """Index rows of the accepted corpus as sketches of rank-0 nodes."""
    for key, content, bands, sig in rows:
        yield content, (node_key(key, None, accepted=True), bands, sig)


# ------------------------------------------------------------------------- 2. exact


class Representative(beam.CombineFn):
    """Per content hash: ``(sketch of the smallest node, number of copies)``.

    The smallest node is the copy to keep (see :mod:`afm.pipelines.dedup.keys`). As a
    combiner it is computed in pieces before the shuffle, so a hot content hash costs one
    partial result per bundle instead of one sketch per copy."""

    def create_accumulator(self) -> tuple[Sketch | None, int]:
        return None, 0

    def add_input(self, acc: tuple[Sketch | None, int], sketch: Sketch
                  ) -> tuple[Sketch | None, int]:
        best, n = acc
        return (sketch if best is None or sketch[0] < best[0] else best), n + 1

    def merge_accumulators(self, accs: Iterable[tuple[Sketch | None, int]]
                           ) -> tuple[Sketch | None, int]:
        best: Sketch | None = None
        total = 0
        for sketch, n in accs:
            total += n
            if sketch is not None and (best is None or sketch[0] < best[0]):
                best = sketch
        return best, total

    def extract_output(self, acc: tuple[Sketch | None, int]) -> tuple[Sketch | None, int]:
        return acc


_exact_groups = Metrics.counter(NAMESPACE, "exact_groups_with_duplicates")


def duplicated_content(element: tuple[bytes, tuple[Sketch, int]]) -> Iterator[tuple[str, bytes]]:
    """``(representative node, content hash)`` of every content with more than one copy."""
    content, (sketch, copies) = element
    if copies > 1:
        _exact_groups.inc()
        yield sketch[0], content


def exact_decision(content: bytes, rep_and_centre: tuple[str, str], node: str
                   ) -> Iterator[tuple[str, tuple[str, str, str | None]]]:
    """A copy of a duplicated content -> its decision: an exact duplicate of the
    representative, or a near duplicate of the representative's cluster centre (with
    ``rep`` named, so the reject says which document has the same text)."""
    rep, centre = rep_and_centre
    # A node with the representative's own key is the same record again (same id and
    # text, e.g. a re-crawl with another score): Finalize keeps one of those entries, so
    # a decision against the key would reject the winner too.
    if is_accepted(node) or node_to_key(node) == node_to_key(rep):
        return
    yield node_to_key(node), (EXACT if centre == rep else NEAR, centre, rep)


def representative_centre(rep: str, centre: str | None, content: bytes
                          ) -> Iterator[tuple[bytes, tuple[str, str]]]:
    """Join of a duplicated content's representative with its component centre (the
    representative itself when it is one, or no near duplicate was found)."""
    yield content, (rep, centre or rep)


# ---------------------------------------------------------------------- 3. candidates


def band_elements(sketch: Sketch) -> Iterator[tuple[int, str]]:
    node, bands, _sig = sketch
    for key in np.frombuffer(bands, dtype="<i8").tolist():
        yield key, node


def _sub_bucket(node: str, parts: int) -> int:
    return zlib.crc32(node.encode("utf-8", "surrogatepass")) % parts


class BucketStars(beam.DoFn):
    """One LSH bucket -> edges ``(hub, member)``, linear in the bucket's size, with no
    node given more than about ``fanout`` edges by one bucket.

    A bucket of up to ``fanout`` members is a star around its smallest node. A larger one
    (a million pages of one template) is split by a stable hash of the node into
    ``ceil(size / fanout)`` sub-buckets: each is a star around its own minimum, and the
    sub-bucket minimums form a star around the bucket's minimum. The bucket is walked
    three times as a stream (size and bounds, sub-bucket minimums, edges); only the
    sub-bucket minimums are held. Buckets of accepted-corpus documents only are skipped.
    """

    def __init__(self, fanout: int):
        self.fanout = fanout
        self.sizes = Metrics.distribution(NAMESPACE, "bucket_size")
        self.edges = Metrics.counter(NAMESPACE, "candidate_edges")
        self.split = Metrics.counter(NAMESPACE, "buckets_split")

    def process(self, element: tuple[int, Iterable[str]]) -> Iterator[tuple[str, str]]:
        _key, members = element
        size, lowest, highest = 0, None, None
        for node in members:
            size += 1
            if lowest is None or node < lowest:
                lowest = node
            if highest is None or node > highest:
                highest = node
        if size < 2 or lowest == highest or is_accepted(highest):  # singleton / accepted only
            return
        self.sizes.update(size)
        if size <= self.fanout:
            for node in members:
                if node != lowest:
                    yield from self._edge(lowest, node)
            return
        self.split.inc()
        parts = math.ceil(size / self.fanout)
        hubs: dict[int, str] = {}
        for node in members:
            part = _sub_bucket(node, parts)
            if part not in hubs or node < hubs[part]:
                hubs[part] = node
        for node in members:
            hub = hubs[_sub_bucket(node, parts)]
            if node != hub:
                yield from self._edge(hub, node)
        for hub in sorted(hubs.values()):
            if hub != lowest:
                yield from self._edge(lowest, hub)

    def _edge(self, hub: str, node: str) -> Iterator[tuple[str, str]]:
        if is_accepted(hub) and is_accepted(node):
            return
        self.edges.inc()
        yield hub, node


# --------------------------------------------------------------------------- 4. verify


def send_signature(source: str, signature: bytes, target: str
                   ) -> Iterator[tuple[str, tuple[str, bytes]]]:
    """Edge ``(source, target)`` joined with the source's signature, sent to the target."""
    yield target, (source, signature)


def verify_edge(threshold: float, target: str, signature: bytes,
                incoming: tuple[str, bytes]) -> Iterator[tuple[str, str]]:
    """Keep an edge when the two signatures agree on >= threshold of their positions."""
    source, other = incoming
    agree = np.count_nonzero(np.frombuffer(signature, "<u4") == np.frombuffer(other, "<u4"))
    if agree >= threshold * (len(signature) // 4):
        _verified.inc()
        yield (source, target) if source < target else (target, source)
    else:
        _unverified.inc()


# ------------------------------------------------------------------------- 6. decide


def near_decision(assignment: tuple[str, str]) -> Iterator[tuple[str, tuple]]:
    node, centre = assignment
    if not is_accepted(node):
        yield node_to_key(node), (NEAR, centre, None)


def count_reject(decision: tuple[str, tuple]) -> Iterator[tuple[str, int]]:
    """One count for the kept document a reject points at."""
    _key, (_reason, centre, _rep) = decision
    if not is_accepted(centre):
        yield node_to_key(centre), 1


class Finalize(beam.DoFn):
    """Attach decisions to documents: kept (``dup_cluster`` set) or a dedup reject."""

    def __init__(self, write_index: bool):
        self.write_index = write_index
        self.kept = Metrics.counter(NAMESPACE, "kept")
        self.exact = Metrics.counter(NAMESPACE, "rejected_exact")
        self.near = Metrics.counter(NAMESPACE, "rejected_near")
        self.largest = Metrics.distribution(NAMESPACE, "cluster_size")

    def start_bundle(self) -> None:
        self.reader = SpillReader()

    def finish_bundle(self) -> None:
        self.reader.close()

    def process(self, element: tuple[str, dict[str, list]]) -> Iterator[Any]:
        _key, joined = element
        entries = [(self.reader.restore(doc), row) for doc, row in (unpack(p) for p in joined["doc"])]
        if not entries:  # decisions about accepted-corpus documents: not ours to emit
            return
        rejects = [d for d in joined["decision"] if d[0] != "count"]
        count = sum(d[1] for d in joined["decision"] if d[0] == "count")
        # Copies with the same key (same id and text) are exact duplicates of the best one:
        # highest quality first, then a stable order of the whole record.
        if len(entries) > 1:
            entries = sorted(entries, key=lambda e: (
                -(e[0].get("quality_score") if e[0].get("quality_score") is not None
                  else float("-inf")),
                json.dumps(e[0], sort_keys=True, default=str),
            ))
        first, row = entries[0]
        if rejects:
            reason, centre, rep = rejects[0]  # a document gets one decision
            winner = node_to_id(centre)
            details = {"duplicate_of": winner, "cluster": winner}
            if rep is not None and node_to_id(rep) != winner:
                details["same_text_as"] = node_to_id(rep)
            (self.exact if reason == EXACT else self.near).inc()
            rejected = dict(first, dup_cluster=winner)
            yield beam.pvalue.TaggedOutput("rejected",
                                           make_reject(rejected, STAGE, reason, **details))
        else:
            winner = first["id"]
            size = 1 + count + len(entries) - 1
            signals = dict(first.get("signals") or {})
            signals["dedup.cluster_size"] = float(size)
            self.kept.inc()
            if size > 1:
                self.largest.update(size)
            yield dict(first, dup_cluster=winner, signals=signals)
            if self.write_index and row is not None:
                yield beam.pvalue.TaggedOutput("index", row)
        for extra, _row in entries[1:]:
            self.exact.inc()
            rejected = dict(extra, dup_cluster=winner)
            yield beam.pvalue.TaggedOutput(
                "rejected", make_reject(rejected, STAGE, EXACT, duplicate_of=winner,
                                        cluster=winner))
