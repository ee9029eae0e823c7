"""Global exact + fuzzy (MinHash LSH) de-duplication as one Beam transform.

``FuzzyDedup(cfg)`` takes a PCollection of document dicts and returns
``{"kept": docs, "rejected": rejects}``; every input document comes out exactly once
(kept with ``dup_cluster`` = its cluster's kept id and ``signals["dedup.cluster_size"]``,
or rejected as ``exact_duplicate`` / ``near_duplicate`` with ``duplicate_of`` and
``cluster``, or ``invalid_document`` when its text is not a string). Documents without
any word are kept and never clustered (emptiness is the quality filters' business).
The flow, all of it in Beam (nothing is collected on one worker):

1. **Sketch** (batched DoFn): normalised-content hash, MinHash signature and LSH band keys
   of each document (:mod:`afm.filters.minhash`, vectorised). Documents themselves stay
   put; only small sketches are shuffled until the final join.
2. **Exact**: group sketches by content hash; the best of each group represents it, the
   others become ``exact_duplicate`` rejects (``near_duplicate`` with ``same_text_as``
   when their representative is itself a near duplicate of the cluster's kept document:
   ``duplicate_of`` always names a kept document).
3. **Candidates**: group representatives by band key; each bucket links every member to
   the bucket's smallest node (a star, so 10,000 copies of one page give 10,000 edges per
   band, never 50 million pairs).
4. **Verify** (optional): two joins bring both endpoints' signatures together; an edge
   survives when the estimated Jaccard reaches the threshold.
5. **Connected components**: alternating large-star / small-star rounds (Kiveris et al.,
   "Connected Components in MapReduce and Beyond", 2014), unrolled ``max_rounds`` times.
   Each round counts the nodes not yet in star form (a local check), so the metrics show
   the round where the graph converged; a final pass assigns every node to its
   component's minimum.
6. **Decide + join**: the component minimum is the kept document and the cluster id;
   the others are ``near_duplicate`` rejects with ``duplicate_of``; one join by key
   attaches decisions to the documents.

Node keys make "keep the best document" free: a node is
``<rank><16 hex of descending quality><id>\\x1f<content-hash prefix>``, so the smallest
node of a component is the accepted-corpus document if there is one (rank 0), else the
highest ``quality_score``, ties broken by id. The content-hash suffix keeps two documents
that share an id but not a text apart.

Incremental mode: with ``index_dir`` set, the sketches of an already accepted corpus
(Parquet files written by ``write_index``) join steps 2-5 as rank-0 nodes. They are never
emitted or rejected, they always win their cluster, and buckets holding only accepted
documents are skipped, so a weekly batch is de-duplicated against everything before it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import shutil
import struct
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
from afm.filters.minhash import (
    NORMALIZATION_VERSION,
    SCHEME,
    MinHasher,
    lsh_params,
)
from apache_beam.metrics import Metrics

from afm.io import atomic_path
from afm.schema import make_reject

STAGE = "dedup"
NAMESPACE = "afm.dedup"
EXACT, NEAR = "exact_duplicate", "near_duplicate"
INDEX_META = "_index.json"
INDEX_GLOB_PREFIX = "part-"
BATCH_PREFIX = "batch-"  # one committed directory of parts per successful run
STAGING_PREFIX = ".staging-"  # a run's parts until it has succeeded

_ACCEPTED, _NEW = "0", "1"
_RANK_WIDTH = 1 + 16  # rank char + 16 hex digits of quality
_SEP = "\x1f"  # between doc id and content-hash prefix in a key
_MASK64 = (1 << 64) - 1


@dataclass
class DedupConfig:
    """Parameters of global de-duplication (the curate pipeline's ``dedup`` stage)."""

    threshold: float = 0.8  # Jaccard of word n-gram sets above which docs are duplicates
    ngram: int = 5  # words per shingle
    num_perm: int = 128  # MinHash signature length
    seed: int = 1  # permutation seed (datasketch-compatible)
    bands: int | None = None  # LSH bands; None = datasketch's optimiser for the weights
    rows: int | None = None  # rows per band (with ``bands``)
    # Weights for datasketch's optimiser. Candidates are verified, so a false positive
    # costs one signature comparison while a false negative is a duplicate kept: favour
    # recall (0.1/0.9 gives 14 bands x 9 rows at 0.8 / 128).
    false_positive_weight: float = 0.1
    false_negative_weight: float = 0.9
    exact: bool = True  # exact (normalised content hash) de-duplication first
    verify: bool = True  # keep only candidate pairs whose signature Jaccard >= threshold
    # Large-star + small-star rounds for connected components. Star-linked LSH buckets
    # typically converge in 1-3 rounds; the metrics say when (and if not, raise this).
    max_rounds: int = 8
    batch_size: int = 256  # documents per vectorised signature batch
    index_dir: str | None = None  # accepted-corpus index to de-duplicate against
    write_index: bool = False  # add this run's kept documents to ``index_dir``

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"dedup threshold must be in (0, 1), got {self.threshold}")
        if self.ngram < 1 or self.num_perm < 2 or self.max_rounds < 1 or self.batch_size < 1:
            raise ValueError("dedup ngram, batch_size, max_rounds must be >= 1 and num_perm >= 2")
        if (self.bands is None) != (self.rows is None):
            raise ValueError("dedup bands and rows must be given together")
        if self.bands is not None and (self.bands < 1 or self.rows < 1 or self.bands * self.rows > self.num_perm):
            raise ValueError(f"dedup bands*rows must be in [1, num_perm]; got {self.bands}x{self.rows}")
        if abs(self.false_positive_weight + self.false_negative_weight - 1.0) > 1e-9:
            raise ValueError("dedup false_positive_weight + false_negative_weight must be 1")
        if self.write_index and not self.index_dir:
            raise ValueError("dedup write_index needs index_dir")

    def lsh(self) -> tuple[int, int]:
        """(bands, rows) actually used."""
        if self.bands is not None and self.rows is not None:
            return self.bands, self.rows
        return lsh_params(self.threshold, self.num_perm, self.false_positive_weight, self.false_negative_weight)

    def index_meta(self) -> dict[str, Any]:
        """What an index must agree on to be comparable with this config."""
        bands, rows = self.lsh()
        return {
            "num_perm": self.num_perm,
            "seed": self.seed,
            "ngram": self.ngram,
            "bands": bands,
            "rows": rows,
            "scheme": SCHEME,
            "normalization_version": NORMALIZATION_VERSION,
        }


# ---------------------------------------------------------------------------- node keys


def quality_hex(quality: float | None) -> str:
    """16 hex digits that sort ascending as quality descends (None/NaN sort last)."""
    try:
        value = float(quality)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan  # missing or unusable scores rank last
    if value != value:
        return "f" * 16
    bits = struct.unpack(">Q", struct.pack(">d", value))[0]
    ordered = (bits ^ (1 << 63)) if bits >> 63 == 0 else (~bits & _MASK64)
    return f"{_MASK64 - ordered:016x}"


def doc_key(doc_id: str, content: bytes) -> str:
    """The join key of a document: its id plus a content-hash prefix."""
    return f"{doc_id}{_SEP}{content[:8].hex()}"


def node_key(key: str, quality: float | None, accepted: bool = False) -> str:
    """Graph node: sorts accepted first, then by quality descending, then by id."""
    if accepted:
        return _ACCEPTED + "0" * 16 + key
    return _NEW + quality_hex(quality) + key


def node_to_key(node: str) -> str:
    return node[_RANK_WIDTH:]


def key_to_id(key: str) -> str:
    return key.rsplit(_SEP, 1)[0]


def node_to_id(node: str) -> str:
    return key_to_id(node_to_key(node))


def is_accepted(node: str) -> bool:
    return node[0] == _ACCEPTED


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


class _SketchBatch(beam.DoFn):
    """Batch of documents -> keyed documents (main) + sketches (tagged ``sketch``)."""

    def __init__(self, cfg: DedupConfig, keep_index_rows: bool):
        self.cfg = cfg
        self.keep_index_rows = keep_index_rows
        self.invalid = Metrics.counter(NAMESPACE, "invalid_documents")
        self.empty = Metrics.counter(NAMESPACE, "documents_without_words")
        self.docs = Metrics.counter(NAMESPACE, "documents_in")

    def setup(self) -> None:
        self.hasher = MinHasher(self.cfg.num_perm, self.cfg.seed, self.cfg.ngram)
        self.bands, self.rows = self.cfg.lsh()

    def process(self, batch: list[dict[str, Any]]) -> Iterator[Any]:
        from afm.filters.minhash import band_keys

        valid: list[dict[str, Any]] = []
        for doc in batch:
            # Pipelines coerce documents when reading (afm.coerce); callers of the
            # transform who pass something else get a reject, never a failed run.
            problem = _invalid(doc)
            if problem:
                self.invalid.inc()
                record = dict(doc) if isinstance(doc, dict) else {}
                text = record.get("text")
                record["text"] = text if isinstance(text, str) else ("" if text is None else str(text))
                if not isinstance(record.get("id"), str) or not record["id"]:
                    raw = str(doc)[:2000].encode("utf-8", "surrogatepass")
                    record["id"] = hashlib.sha1(raw).hexdigest()[:20]
                record["source"] = record.get("source") or "web"
                yield beam.pvalue.TaggedOutput("invalid", make_reject(record, STAGE, "invalid_document",
                                                                      message=problem))
                continue
            valid.append(doc)
        if not valid:
            return
        self.docs.inc(len(valid))
        sk = self.hasher.sketch([d["text"] for d in valid])
        # Explicit little-endian bytes: the index format must not depend on the host.
        keys = band_keys(sk.signatures, self.bands, self.rows).astype("<i8", copy=False)
        signatures = sk.signatures.astype("<u4", copy=False)
        for i, doc in enumerate(valid):
            content = sk.content_hashes[i].tobytes()
            key = doc_key(doc["id"], content)
            if sk.num_words[i] == 0:
                self.empty.inc()
                yield key, (doc, None)
                continue
            sig = signatures[i].tobytes()
            bands = keys[i].tobytes()
            row = None
            if self.keep_index_rows:
                row = {"id": doc["id"], "key": key, "content_hash": content, "band_keys": bands, "signature": sig}
            yield key, (doc, row)
            node = node_key(key, doc.get("quality_score"))
            yield beam.pvalue.TaggedOutput("sketch", (content, (node, bands, sig)))


# ---------------------------------------------------------------------- index (Parquet)


def _index_schema(cfg: DedupConfig):
    import pyarrow as pa

    bands, _rows = cfg.lsh()
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("key", pa.string(), nullable=False),
            pa.field("content_hash", pa.binary(16), nullable=False),
            # ``bands`` little-endian int64 bucket keys (afm.filters.minhash.band_keys)
            pa.field("band_keys", pa.binary(8 * bands), nullable=False),
            # ``num_perm`` little-endian uint32 MinHash values (datasketch hashvalues)
            pa.field("signature", pa.binary(4 * cfg.num_perm), nullable=False),
        ],
        metadata={"afm.record": "dedup_index"},
    )


def index_files(index_dir: str) -> list[str]:
    """The index's committed Parquet parts, sorted: ``part-*.parquet`` at the top (older
    layout) and in every committed ``batch-*`` directory. Staging directories of runs in
    progress, failed or killed (``.staging-*``) are never read."""
    if not os.path.isdir(index_dir):
        return []
    out = []
    for entry in sorted(os.listdir(index_dir)):
        full = os.path.join(index_dir, entry)
        if entry.startswith(INDEX_GLOB_PREFIX) and entry.endswith(".parquet"):
            out.append(full)
        elif entry.startswith(BATCH_PREFIX) and os.path.isdir(full):
            out += [os.path.join(full, f) for f in sorted(os.listdir(full))
                    if f.startswith(INDEX_GLOB_PREFIX) and f.endswith(".parquet")]
    return out


def stale_staging(index_dir: str) -> list[str]:
    """Staging directories left by runs that never committed (killed or failed)."""
    if not os.path.isdir(index_dir):
        return []
    return sorted(e for e in os.listdir(index_dir) if e.startswith(STAGING_PREFIX))


def check_index(cfg: DedupConfig, create: bool) -> None:
    """Validate (or create) ``index_dir/_index.json`` against ``cfg``: an index built with
    other MinHash parameters cannot be compared and must fail loudly."""
    assert cfg.index_dir
    path = Path(cfg.index_dir) / INDEX_META
    want = cfg.index_meta()
    if path.exists():
        have = json.loads(path.read_text())
        diff = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
        if diff:
            raise ValueError(f"dedup index {cfg.index_dir} was built with other parameters: {diff}")
    elif index_files(cfg.index_dir):
        raise ValueError(f"dedup index {cfg.index_dir} has parts but no {INDEX_META}")
    elif create:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = atomic_path(path)
        tmp.write_text(json.dumps(want, indent=2, sort_keys=True))
        os.replace(tmp, path)


def _read_index_file(path: str) -> Iterator[tuple[bytes, tuple[str, bytes, bytes]]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["key", "content_hash", "band_keys", "signature"])
    for key, content, bands, sig in zip(*(table.column(i).to_pylist() for i in range(4))):
        yield content, (node_key(key, None, accepted=True), bands, sig)


class _WriteIndexRows(beam.DoFn):
    """Buffer index rows; write one Parquet part per bundle (temp name + rename) into the
    run's staging directory, which :meth:`FuzzyDedup.commit` promotes after success."""

    def __init__(self, cfg: DedupConfig, staging: str):
        self.cfg, self.staging = cfg, staging

    def start_bundle(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def process(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def finish_bundle(self) -> None:
        if not self.rows:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        # Content-named: a retried bundle rewrites the same file instead of adding one.
        self.rows.sort(key=lambda r: r["key"])
        digest = hashlib.sha1("\0".join(r["key"] for r in self.rows).encode("utf-8", "surrogatepass"))
        name = f"{INDEX_GLOB_PREFIX}{digest.hexdigest()[:16]}.parquet"
        os.makedirs(self.staging, exist_ok=True)
        path = os.path.join(self.staging, name)
        tmp = os.path.join(self.staging, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
        pq.write_table(pa.Table.from_pylist(self.rows, schema=_index_schema(self.cfg)), tmp, compression="zstd")
        os.replace(tmp, path)
        self.rows = []


# ------------------------------------------------------------------------- 2. exact


class _ExactGroups(beam.DoFn):
    """Sketches sharing a content hash -> the smallest node (main) + exact dups (tagged)."""

    def __init__(self) -> None:
        self.groups = Metrics.counter(NAMESPACE, "exact_groups_with_duplicates")

    def process(self, element: tuple[bytes, Iterable[tuple[str, bytes, bytes]]]) -> Iterator[Any]:
        _content, sketches = element
        by_node = {s[0]: s for s in sketches}
        nodes = sorted(by_node)
        winner = nodes[0]
        yield by_node[winner]
        # A node with the winner's own key is the same record again (same id and text,
        # e.g. a re-crawl with another score): _Finalize keeps one of those entries, so a
        # decision against the key would reject the winner too.
        winner_key = node_to_key(winner)
        dups = [n for n in nodes[1:] if not is_accepted(n) and node_to_key(n) != winner_key]
        if dups:
            self.groups.inc()
        for node in dups:
            yield beam.pvalue.TaggedOutput("dups", (winner, node_to_key(node)))


# ---------------------------------------------------------------------- 3. candidates


def _band_elements(sketch: tuple[str, bytes, bytes]) -> Iterator[tuple[int, str]]:
    node, bands, _sig = sketch
    for key in np.frombuffer(bands, dtype="<i8").tolist():
        yield key, node


class _BucketStars(beam.DoFn):
    """One LSH bucket -> edges (bucket minimum, member): linear in the bucket size."""

    def __init__(self) -> None:
        self.sizes = Metrics.distribution(NAMESPACE, "bucket_size")
        self.edges = Metrics.counter(NAMESPACE, "candidate_edges")

    def process(self, element: tuple[int, Iterable[str]]) -> Iterator[tuple[str, str]]:
        _key, members = element
        nodes = sorted(set(members))
        if len(nodes) < 2 or is_accepted(nodes[-1]):  # singleton, or accepted docs only
            return
        self.sizes.update(len(nodes))
        pivot = nodes[0]
        for node in nodes[1:]:
            if is_accepted(pivot) and is_accepted(node):
                continue
            self.edges.inc()
            yield pivot, node


# --------------------------------------------------------------------------- 4. verify


def _send_signature(element: tuple[str, dict[str, list]]) -> Iterator[tuple[str, tuple[str, bytes]]]:
    node, joined = element
    if not joined["out"] or not joined["sig"]:
        return
    sig = joined["sig"][0]
    for other in set(joined["out"]):
        yield other, (node, sig)


class _VerifyEdges(beam.DoFn):
    """Keep an edge when the two signatures agree on >= threshold of their positions."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.kept = Metrics.counter(NAMESPACE, "verified_edges")
        self.dropped = Metrics.counter(NAMESPACE, "unverified_edges")

    def process(self, element: tuple[str, dict[str, list]]) -> Iterator[tuple[str, str]]:
        node, joined = element
        if not joined["in"] or not joined["sig"]:
            return
        mine = np.frombuffer(joined["sig"][0], dtype="<u4")
        incoming = dict(joined["in"])  # other node -> its signature (dedups repeated edges)
        others = sorted(incoming)
        sigs = np.frombuffer(b"".join(incoming[o] for o in others), dtype="<u4").reshape(len(others), -1)
        similar = (sigs == mine).mean(axis=1) >= self.threshold
        for other, ok in zip(others, similar.tolist()):
            if ok:
                self.kept.inc()
                yield (other, node) if other < node else (node, other)
            else:
                self.dropped.inc()


# ------------------------------------------------------------- 5. connected components


def _both_directions(edge: tuple[str, str]) -> Iterator[tuple[str, str]]:
    u, v = edge
    yield u, v
    yield v, u


class _LargeStar(beam.DoFn):
    """Node u with neighbours N: connect every neighbour larger than u to min(N + u).

    Also counts u as *unsettled* unless the input is already a star around the component
    minimum at u (a node with a smaller neighbour must have exactly one neighbour).
    Emits edges larger endpoint first, ready for the small-star grouping.
    """

    def __init__(self, round_no: int):
        self.unsettled = Metrics.counter(NAMESPACE, f"cc_round_{round_no:02d}_unsettled")

    def process(self, element: tuple[str, Iterable[str]]) -> Iterator[tuple[str, str]]:
        u, neighbours = element
        nbrs = set(neighbours)
        smallest = min(nbrs)
        if smallest < u and len(nbrs) > 1:
            self.unsettled.inc()
        m = min(smallest, u)
        for v in nbrs:
            if v > u:
                yield v, m


def _small_star(element: tuple[str, Iterable[str]]) -> Iterator[tuple[str, str]]:
    """Node u with its smaller neighbours S: connect u and all of S to min(S).

    Emits each edge in both directions, ready for the next large-star grouping."""
    u, smaller = element
    nodes = set(smaller)
    m = min(nodes)
    yield m, u
    yield u, m
    for v in nodes:
        if v != m:
            yield m, v
            yield v, m


class _Assign(beam.DoFn):
    """Final pass: each non-minimum node -> (node, its component minimum)."""

    def __init__(self) -> None:
        self.unsettled = Metrics.counter(NAMESPACE, "cc_unsettled_after_max_rounds")
        self.clusters = Metrics.counter(NAMESPACE, "clusters")
        self.sizes = Metrics.distribution(NAMESPACE, "cluster_nodes")

    def process(self, element: tuple[str, Iterable[str]]) -> Iterator[tuple[str, str]]:
        u, neighbours = element
        nbrs = set(neighbours)
        m = min(nbrs)
        if m > u:  # u is a component minimum (a star centre)
            self.clusters.inc()
            self.sizes.update(len(nbrs) + 1)
            return
        if len(nbrs) > 1:  # not converged: point at the smallest neighbour found so far
            self.unsettled.inc()
        yield u, m


class ConnectedComponents(beam.PTransform):
    """Edges (u, v) -> (node, component minimum) for every non-minimum node.

    Large-star / small-star alternate ``max_rounds`` times (a Beam graph is static, so the
    loop is unrolled); both steps are idempotent on a star forest, so rounds after
    convergence only re-shuffle the (by then star-shaped) edges. The counters
    ``cc_round_NN_unsettled`` show when it converged; ``cc_unsettled_after_max_rounds``
    non-zero means raise ``max_rounds`` (clusters would otherwise stay split, which keeps
    some duplicates but never loses a document).
    """

    def __init__(self, max_rounds: int):
        super().__init__()
        self.max_rounds = max_rounds

    def expand(self, edges):
        edges = edges | "BothDirections" >> beam.FlatMap(_both_directions)
        for r in range(self.max_rounds):
            edges = (
                edges
                | f"LargeStarGroup{r}" >> beam.GroupByKey()
                | f"LargeStar{r}" >> beam.ParDo(_LargeStar(r))
                | f"SmallStarGroup{r}" >> beam.GroupByKey()
                | f"SmallStar{r}" >> beam.FlatMap(_small_star)
            )
        return edges | "AssignGroup" >> beam.GroupByKey() | "Assign" >> beam.ParDo(_Assign())


# ------------------------------------------------------------------------- 6. decide


def _near_decision(assignment: tuple[str, str]) -> Iterator[tuple[str, tuple]]:
    node, centre = assignment
    if not is_accepted(node):
        yield node_to_key(node), (NEAR, centre, None)


def _exact_decisions(element: tuple[str, dict[str, list]]) -> Iterator[tuple[str, tuple]]:
    rep, joined = element
    centre = joined["centre"][0] if joined["centre"] else rep
    reason = EXACT if centre == rep else NEAR
    for dup_key in joined["dups"]:
        yield dup_key, (reason, centre, rep)


class _Finalize(beam.DoFn):
    """Attach decisions to documents: kept (``dup_cluster`` set) or a dedup reject."""

    def __init__(self, write_index: bool):
        self.write_index = write_index
        self.kept = Metrics.counter(NAMESPACE, "kept")
        self.exact = Metrics.counter(NAMESPACE, "rejected_exact")
        self.near = Metrics.counter(NAMESPACE, "rejected_near")
        self.largest = Metrics.distribution(NAMESPACE, "cluster_size")

    def process(self, element: tuple[str, dict[str, list]]) -> Iterator[Any]:
        key, joined = element
        entries = joined["doc"]
        if not entries:  # decisions about accepted-corpus documents: not ours to emit
            return
        rejects = [d for d in joined["decision"] if d[0] != "count"]
        count = sum(d[1] for d in joined["decision"] if d[0] == "count")
        # Copies with the same key (same id and text) are exact duplicates of the best one:
        # highest quality first, then a stable order of the whole record.
        if len(entries) > 1:
            entries = sorted(entries, key=lambda e: (
                -(e[0].get("quality_score") if e[0].get("quality_score") is not None else float("-inf")),
                json.dumps(e[0], sort_keys=True, default=str),
            ))
        first, row = entries[0]
        if rejects:
            reason, centre, rep = rejects[0]
            winner = node_to_id(centre)
            details = {"duplicate_of": winner, "cluster": winner}
            if rep is not None and node_to_id(rep) != winner:
                details["same_text_as"] = node_to_id(rep)
            (self.exact if reason == EXACT else self.near).inc()
            rejected = dict(first, dup_cluster=winner)
            yield beam.pvalue.TaggedOutput("rejected", make_reject(rejected, STAGE, reason, **details))
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
                "rejected", make_reject(rejected, STAGE, EXACT, duplicate_of=winner, cluster=winner)
            )


def _count_reject(decision: tuple[str, tuple]) -> Iterator[tuple[str, int]]:
    _key, (_reason, centre, _rep) = decision
    if not is_accepted(centre):
        yield node_to_key(centre), 1


# ----------------------------------------------------------------------- the transform


class FuzzyDedup(beam.PTransform):
    """Documents -> ``{"kept": documents, "rejected": dedup rejects}`` (see module doc)."""

    def __init__(self, cfg: DedupConfig | None = None):
        super().__init__()
        self.cfg = cfg or DedupConfig()
        self.run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]

    @property
    def staging(self) -> str | None:
        """Where this run's index parts wait until :meth:`commit` (None: no index written)."""
        if not (self.cfg.write_index and self.cfg.index_dir):
            return None
        return os.path.join(self.cfg.index_dir, STAGING_PREFIX + self.run_id)

    def commit(self) -> str | None:
        """Add this run's kept documents to the accepted-corpus index: one atomic rename
        of the staging directory to ``batch-<run id>``. Call only after the whole run (its
        output included) has succeeded, so a failed run never grows the index; returns
        the committed directory (None when nothing was staged)."""
        staging = self.staging
        if staging is None or not os.path.isdir(staging):
            return None
        final = os.path.join(os.path.dirname(staging), BATCH_PREFIX + self.run_id)
        os.rename(staging, final)
        return final

    def abort(self) -> None:
        """Drop what a failed run staged for the index."""
        if self.staging:
            shutil.rmtree(self.staging, ignore_errors=True)

    def expand(self, docs):
        cfg = self.cfg
        accepted_files: list[str] = []
        if cfg.index_dir:
            check_index(cfg, create=cfg.write_index)
            accepted_files = index_files(cfg.index_dir)
        sketched = (
            docs
            | "Batch" >> beam.BatchElements(min_batch_size=min(16, cfg.batch_size), max_batch_size=cfg.batch_size)
            | "Sketch" >> beam.ParDo(_SketchBatch(cfg, cfg.write_index)).with_outputs("sketch", "invalid", main="docs")
        )
        sketches = sketched.sketch
        if accepted_files:
            accepted = (
                docs.pipeline
                | "IndexFiles" >> beam.Create(accepted_files)
                | "ReadIndex" >> beam.FlatMap(_read_index_file)
            )
            sketches = (sketches, accepted) | "WithAccepted" >> beam.Flatten()

        # 2. exact
        if cfg.exact:
            exact = (
                sketches
                | "GroupByContent" >> beam.GroupByKey()
                | "ExactGroups" >> beam.ParDo(_ExactGroups()).with_outputs("dups", main="reps")
            )
            reps, exact_dups = exact.reps, exact.dups
        else:
            reps = sketches | "Reps" >> beam.Values()
            exact_dups = docs.pipeline | "NoExactDups" >> beam.Create([])

        # 3. candidates
        edges = (
            reps
            | "BandKeys" >> beam.FlatMap(_band_elements)
            | "GroupByBand" >> beam.GroupByKey()
            | "BucketStars" >> beam.ParDo(_BucketStars())
        )

        # 4. verify
        if cfg.verify:
            sigs = reps | "Signatures" >> beam.Map(lambda s: (s[0], s[2]))
            sent = (
                {"sig": sigs, "out": edges}
                | "JoinSource" >> beam.CoGroupByKey()
                | "SendSignature" >> beam.FlatMap(_send_signature)
            )
            edges = (
                {"sig": sigs, "in": sent}
                | "JoinTarget" >> beam.CoGroupByKey()
                | "Verify" >> beam.ParDo(_VerifyEdges(cfg.threshold))
            )

        # 5. components
        assignments = edges | "Components" >> ConnectedComponents(cfg.max_rounds)

        # 6. decisions
        near = assignments | "NearDecisions" >> beam.FlatMap(_near_decision)
        exact_decisions = (
            {"dups": exact_dups, "centre": assignments}
            | "JoinExact" >> beam.CoGroupByKey()
            | "ExactDecisions" >> beam.FlatMap(_exact_decisions)
        )
        rejects = (near, exact_decisions) | "AllRejects" >> beam.Flatten()
        counts = (
            rejects
            | "RejectWinners" >> beam.FlatMap(_count_reject)
            | "CountPerWinner" >> beam.CombinePerKey(sum)
            | "CountDecision" >> beam.Map(lambda kv: (kv[0], ("count", kv[1])))
        )
        decisions = (rejects, counts) | "AllDecisions" >> beam.Flatten()
        final = (
            {"doc": sketched.docs, "decision": decisions}
            | "JoinDocs" >> beam.CoGroupByKey()
            | "Finalize" >> beam.ParDo(_Finalize(cfg.write_index)).with_outputs("rejected", "index", main="kept")
        )
        if cfg.write_index:
            _ = final.index | "WriteIndex" >> beam.ParDo(_WriteIndexRows(cfg, self.staging))
        rejected = (final.rejected, sketched.invalid) | "Rejected" >> beam.Flatten()
        return {"kept": final.kept, "rejected": rejected}


# ------------------------------------------------------------------ local convenience


def dedup_records(
    docs: list[dict[str, Any]], cfg: DedupConfig | None = None, pipeline_args: list[str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Run :class:`FuzzyDedup` on in-memory documents with the local (in-process) runner.

    Returns ``(kept, rejected, metrics)``. For tests, notebooks and small corpora: input
    and results pass through this process's memory (``beam.Create`` would instead pickle
    and bz2-compress every document into the pipeline proto, slower than the dedup
    itself). The ``afm dedup`` command reads and writes sharded Parquet from the workers.
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    if any("multi_processing" in a for a in pipeline_args or ()):
        raise ValueError("dedup_records runs in-process; use run_dedup_files for multi-processing")
    chunk = 1024
    token = _Registry.put(
        {"in": [docs[i : i + chunk] for i in range(0, len(docs), chunk)], "kept": [], "rejected": []}
    )
    try:
        options = PipelineOptions(pipeline_args or ["--runner=DirectRunner"])
        pipeline = beam.Pipeline(options=options)
        dedup = FuzzyDedup(cfg)
        out = (
            pipeline
            | "Chunks" >> beam.Create(list(range(len(_Registry.get(token)["in"]))))
            | "Docs" >> beam.FlatMap(_Registry.chunk, token)
            | "Dedup" >> dedup
        )
        _ = out["kept"] | "CollectKept" >> beam.Map(_Registry.add, token, "kept")
        _ = out["rejected"] | "CollectRejected" >> beam.Map(_Registry.add, token, "rejected")
        try:
            result = pipeline.run()
            result.wait_until_finish()
        except BaseException:
            dedup.abort()
            raise
        dedup.commit()  # the index grows only once the run has succeeded
        store = _Registry.get(token)
        return store["kept"], store["rejected"], read_metrics(result)
    finally:
        _Registry.drop(token)


class _Registry:
    """Process-local exchange between the driver and in-process DirectRunner workers."""

    _stores: dict[str, dict[str, list]] = {}

    @classmethod
    def put(cls, store: dict[str, list]) -> str:
        token = uuid.uuid4().hex
        cls._stores[token] = store
        return token

    @classmethod
    def get(cls, token: str) -> dict[str, list]:
        return cls._stores[token]

    @classmethod
    def chunk(cls, index: int, token: str) -> list[dict[str, Any]]:
        return cls._stores[token]["in"][index]

    @classmethod
    def add(cls, record: dict[str, Any], token: str, which: str) -> None:
        cls._stores[token][which].append(record)

    @classmethod
    def drop(cls, token: str) -> None:
        cls._stores.pop(token, None)


def read_metrics(result: Any) -> dict[str, Any]:
    """Dedup counters/distributions of a finished pipeline as a flat dict."""
    from apache_beam.metrics.metric import MetricsFilter

    out: dict[str, Any] = {}
    metrics = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    for c in metrics["counters"]:
        name = c.key.metric.name
        out[name] = out.get(name, 0) + (c.committed if c.committed is not None else c.attempted)
    for d in metrics["distributions"]:
        value = d.committed if d.committed is not None else d.attempted
        if value is not None and value.count:
            out[f"{d.key.metric.name}.max"] = value.max
            out[f"{d.key.metric.name}.count"] = value.count
    return out


def converged_round(metrics: dict[str, Any], max_rounds: int) -> int | None:
    """The first round whose input was already a star forest (None: never converged)."""
    for r in range(max_rounds):
        if metrics.get(f"cc_round_{r:02d}_unsettled", 0) == 0:
            return r
    return None


def summarize(metrics: dict[str, Any], cfg: DedupConfig) -> dict[str, Any]:
    """The end-of-run cluster statistics of a dedup run."""
    metrics = {k.split("/", 1)[-1]: v for k, v in metrics.items()
               if "/" not in k or k.startswith(NAMESPACE + "/")}
    rounds = converged_round(metrics, cfg.max_rounds)
    docs_in = metrics.get("documents_in", 0) + metrics.get("invalid_documents", 0)
    rejected = metrics.get("rejected_exact", 0) + metrics.get("rejected_near", 0)
    return {
        "documents into the dedup stage": docs_in,
        "kept": metrics.get("kept", 0),
        "rejected exact_duplicate": metrics.get("rejected_exact", 0),
        "rejected near_duplicate": metrics.get("rejected_near", 0),
        "rejected invalid_document": metrics.get("invalid_documents", 0),
        "duplicate fraction": (rejected / docs_in) if docs_in else 0.0,
        "documents without words (kept)": metrics.get("documents_without_words", 0),
        "clusters (size > 1)": metrics.get("cluster_size.count", 0),
        "largest cluster": metrics.get("cluster_size.max", 0),
        "LSH candidate edges": metrics.get("candidate_edges", 0),
        "verified edges": metrics.get("verified_edges", 0) if cfg.verify else "not verified",
        "largest LSH bucket": metrics.get("bucket_size.max", 0),
        "components converged at round": rounds if rounds is not None else f"not within {cfg.max_rounds}",
        "unsettled nodes after max rounds": metrics.get("cc_unsettled_after_max_rounds", 0),
    }
