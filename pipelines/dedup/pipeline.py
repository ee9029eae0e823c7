"""Global exact + fuzzy (MinHash LSH) de-duplication as one Beam transform.

``FuzzyDedup(cfg)`` takes a PCollection of document dicts and returns
``{"kept": docs, "rejected": rejects}``; every input document comes out exactly once
(kept with ``dup_cluster`` = its cluster's kept id and ``signals["dedup.cluster_size"]``,
or rejected as ``exact_duplicate`` / ``near_duplicate`` with ``duplicate_of`` and
``cluster``, or ``invalid_document`` when its text is not a string). Documents without
any word are kept and never clustered (emptiness is the quality filters' business).
The flow, all of it in Beam (nothing is collected on one worker; the steps are in
:mod:`afm.pipelines.dedup.steps`):

1. **Sketch** (batched DoFn): normalised-content hash, MinHash signature and LSH band keys
   of each document (:mod:`afm.filters.minhash`, vectorised). Documents themselves stay
   put; only small sketches are shuffled until the final join.
2. **Exact**: a combiner per content hash keeps the smallest node's sketch and the number
   of copies. Only that representative goes on to the LSH steps; every other copy
   becomes an ``exact_duplicate`` reject (``near_duplicate`` with ``same_text_as`` when
   its representative is itself a near duplicate of the cluster's kept document:
   ``duplicate_of`` always names a kept document), through a streaming join on the
   content hash.
3. **Candidates**: group representatives by band key; each bucket becomes a star of
   bounded fan-out (a huge bucket is split into sub-buckets whose minimums form a second
   star), so 20,000 near-copies of one template give 20,000 edges per band, never 200
   million pairs, and no node more than about ``max_bucket_fanout`` edges per bucket.
4. **Verify** (optional): repeated edges removed, then two streaming joins bring both
   endpoints' signatures together; an edge survives when the estimated Jaccard reaches
   the threshold.
5. **Connected components** (:mod:`afm.pipelines.beam.components`): large-star / small-star
   rounds that stop moving data once the graph has converged.
6. **Decide + join**: the component minimum is the kept document and the cluster id;
   the others are ``near_duplicate`` rejects with ``duplicate_of``; one join by document
   key attaches decisions to the documents.

Node keys (:mod:`afm.pipelines.dedup.keys`) make "keep the best document" free: the
smallest node of a component is the accepted-corpus document if there is one, else the
highest ``quality_score``, ties broken by id.

Incremental mode: with ``index_dir`` set (any filesystem: :mod:`afm.pipelines.
dedup_index`), the sketches of an already accepted corpus join steps 2-5 as rank-0
nodes. They are never emitted or rejected, they always win their cluster, and buckets
holding only accepted documents are skipped, so a weekly batch is de-duplicated against
everything before it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any

import apache_beam as beam

from afm.filters.minhash import NORMALIZATION_VERSION, SCHEME, lsh_params
from afm.pipelines.beam.components import ConnectedComponents
from afm.pipelines.beam.joins import LookupJoin
from afm.pipelines.beam.spill import StowFn
from afm.pipelines.dedup import index as dedup_index
from afm.pipelines.dedup.index import (  # noqa: F401 - the index API, re-exported
    BATCH_PREFIX,
    INDEX_GLOB_PREFIX,
    INDEX_META,
    STAGING_PREFIX,
    index_files,
    stale_staging,
)
from afm.pipelines.dedup.keys import (  # noqa: F401 - the node-key API, re-exported
    doc_key,
    is_accepted,
    key_to_id,
    node_key,
    node_to_id,
    node_to_key,
    quality_hex,
)
from afm.pipelines.dedup.steps import (
    EXACT,
    NAMESPACE,
    NEAR,
    STAGE,
    BucketStars,
    Finalize,
    Representative,
    SketchBatch,
    accepted_sketches,
    band_elements,
    count_reject,
    duplicated_content,
    exact_decision,
    near_decision,
    representative_centre,
    send_signature,
    verify_edge,
)

__all__ = ["EXACT", "NAMESPACE", "NEAR", "STAGE", "ConnectedComponents", "DedupConfig",
           "FuzzyDedup", "dedup_records", "index_files", "read_metrics", "summarize"]


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
    # An LSH bucket larger than this is split into sub-buckets (see BucketStars), so no
    # node gets more than about this many candidate edges from one bucket.
    max_bucket_fanout: int = 1000
    batch_size: int = 256  # documents per vectorised signature batch
    index_dir: str | None = None  # accepted-corpus index to de-duplicate against
    write_index: bool = False  # add this run's kept documents to ``index_dir``

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"dedup threshold must be in (0, 1), got {self.threshold}")
        if (self.ngram < 1 or self.num_perm < 2 or self.max_rounds < 1 or self.batch_size < 1
                or self.max_bucket_fanout < 2):
            raise ValueError("dedup ngram, batch_size, max_rounds must be >= 1, num_perm and "
                             "max_bucket_fanout >= 2")
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



# ----------------------------------------------------------------------- the transform


def _run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


class FuzzyDedup(beam.PTransform):
    """Documents -> ``{"kept": documents, "rejected": dedup rejects}`` (see module doc)."""

    def __init__(self, cfg: DedupConfig | None = None, spill_dir: str | None = None):
        super().__init__()
        self.cfg = cfg or DedupConfig()
        self.run_id = _run_id()
        # Where the documents' texts wait for the final join, and the rejects' texts after it
        # (afm.pipelines.beam.spill; the caller restores the rejects'); None: in the records.
        self.spill_dir = spill_dir

    @property
    def staging(self) -> str | None:
        """Where this run's index parts wait until :meth:`commit` (None: no index written)."""
        if not (self.cfg.write_index and self.cfg.index_dir):
            return None
        return dedup_index.staging_dir(self.cfg.index_dir, self.run_id)

    def commit(self) -> str | None:
        """Add this run's kept documents to the accepted-corpus index: one rename of the
        staging directory to ``batch-<run id>``. Call only after the whole run (its output
        included) has succeeded, so a failed run never grows the index; returns the
        committed directory (None when nothing was staged)."""
        if self.staging is None:
            return None
        return dedup_index.commit(self.cfg.index_dir, self.run_id)  # type: ignore[arg-type]

    def abort(self) -> None:
        """Drop what a failed run staged for the index."""
        if self.staging is not None:
            dedup_index.abort(self.cfg.index_dir, self.run_id)  # type: ignore[arg-type]

    def expand(self, docs: beam.PCollection) -> dict[str, beam.PCollection]:
        cfg = self.cfg
        bands, rows = cfg.lsh()
        accepted_files: list[str] = []
        if cfg.index_dir:
            dedup_index.check_index(cfg.index_dir, cfg.index_meta(), create=cfg.write_index)
            accepted_files = index_files(cfg.index_dir)
        sketched = (
            docs
            | "Batch" >> beam.BatchElements(min_batch_size=min(16, cfg.batch_size),
                                            max_batch_size=cfg.batch_size)
            | "Sketch" >> beam.ParDo(SketchBatch(cfg.num_perm, cfg.seed, cfg.ngram, bands, rows,
                                                 cfg.write_index, self.spill_dir)
                                     ).with_outputs("sketch", "invalid", main="docs")
        )
        sketches = sketched.sketch
        if accepted_files:
            accepted = (
                docs.pipeline
                | "IndexFiles" >> beam.Create(accepted_files)
                | "ReadIndex" >> beam.FlatMap(dedup_index.read_index_file)
                | "AcceptedSketches" >> beam.FlatMap(lambda row: accepted_sketches([row]))
            )
            sketches = (sketches, accepted) | "WithAccepted" >> beam.Flatten()

        # 2. exact: one representative per content hash (a combiner: hot hashes are cheap)
        if cfg.exact:
            represented = sketches | "Representatives" >> beam.CombinePerKey(Representative())
            reps = represented | "RepSketches" >> beam.Map(lambda kv: kv[1][0])
            duplicated = represented | "DuplicatedContent" >> beam.FlatMap(duplicated_content)
        else:
            reps = sketches | "Reps" >> beam.Values()
            duplicated = docs.pipeline | "NoDuplicatedContent" >> beam.Create([])

        # 3. candidates: bucket stars of bounded fan-out, each edge once
        edges = (
            reps
            | "BandKeys" >> beam.FlatMap(band_elements)
            | "GroupByBand" >> beam.GroupByKey()
            | "BucketStars" >> beam.ParDo(BucketStars(cfg.max_bucket_fanout))
            | "DistinctEdges" >> beam.Distinct()
        )

        # 4. verify: both endpoints' signatures, one streaming join each
        if cfg.verify:
            sigs = reps | "Signatures" >> beam.Map(lambda s: (s[0], s[2]))
            sent = {"lookup": sigs, "stream": edges} | "JoinSource" >> LookupJoin(send_signature)
            edges = {"lookup": sigs, "stream": sent} | "JoinTarget" >> LookupJoin(
                partial(verify_edge, cfg.threshold))

        # 5. components
        assignments = edges | "Components" >> ConnectedComponents(cfg.max_rounds)

        # 6. decisions: near duplicates from the graph; exact copies through their
        # representative's centre (streamed past each copy, keyed by content hash)
        near = assignments | "NearDecisions" >> beam.FlatMap(near_decision)
        rep_centres = (
            {"lookup": assignments, "stream": duplicated}
            | "RepresentativeCentre" >> LookupJoin(representative_centre, need_lookup=False)
        )
        copies = sketched.sketch | "Copies" >> beam.Map(lambda kv: (kv[0], kv[1][0]))
        exact = {"lookup": rep_centres, "stream": copies} | "ExactDecisions" >> LookupJoin(
            exact_decision)
        rejects = (near, exact) | "AllRejects" >> beam.Flatten()
        counts = (
            rejects
            | "RejectWinners" >> beam.FlatMap(count_reject)
            | "CountPerWinner" >> beam.CombinePerKey(sum)
            | "CountDecision" >> beam.Map(lambda kv: (kv[0], ("count", kv[1])))
        )
        decisions = (rejects, counts) | "AllDecisions" >> beam.Flatten()
        final = (
            {"doc": sketched.docs, "decision": decisions}
            | "JoinDocs" >> beam.CoGroupByKey()
            | "Finalize" >> beam.ParDo(Finalize(cfg.write_index)).with_outputs(
                "rejected", "index", main="kept")
        )
        if cfg.write_index:
            _ = final.index | "WriteIndex" >> beam.ParDo(
                dedup_index.WriteIndexRows(self.staging, bands, cfg.num_perm))
        rejected = final.rejected
        if self.spill_dir:  # the flatten below is a boundary: rejects cross it with their texts on disk
            rejected = rejected | "StowRejected" >> beam.ParDo(StowFn(self.spill_dir))
        rejected = (rejected, sketched.invalid) | "Rejected" >> beam.Flatten()
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
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    if any("multi_processing" in a for a in pipeline_args or ()):
        raise ValueError("dedup_records runs in-process; use run_dedup_files for multi-processing")
    chunk = 1024
    token = _Registry.put(
        {"in": [docs[i : i + chunk] for i in range(0, len(docs), chunk)], "kept": [], "rejected": []}
    )
    try:
        from afm.pipelines.beam.runners import make_runner

        options = PipelineOptions(pipeline_args or [])
        # The runner object, not Beam's "DirectRunner" name (which may try to fetch Prism).
        runner = None if options.view_as(StandardOptions).runner else make_runner("DirectRunner")
        pipeline = beam.Pipeline(runner=runner, options=options)
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
        "content hashes with copies": metrics.get("exact_groups_with_duplicates", 0),
        "largest cluster": metrics.get("cluster_size.max", 0),
        "LSH candidate edges": metrics.get("candidate_edges", 0),
        "verified edges": metrics.get("verified_edges", 0) if cfg.verify else "not verified",
        "largest LSH bucket": metrics.get("bucket_size.max", 0),
        "LSH buckets split (over max_bucket_fanout)": metrics.get("buckets_split", 0),
        "components converged at round": rounds if rounds is not None else f"not within {cfg.max_rounds}",
        "unsettled nodes after max rounds": metrics.get("cc_unsettled_after_max_rounds", 0),
    }
