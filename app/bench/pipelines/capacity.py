"""A capacity model for one curate run at Common Crawl scale, from measured parts.

Sizing a Dataflow or Flink job needs three numbers per page: CPU time, bytes shuffled and
the memory a worker holds. CPU time is the steady-state rate of ``afm bench curate``
(every stage, one worker, start-up apart: its ``result.json`` in the bench workdir, or
passed in);
shuffle bytes are measured here by building, for a sample of real documents, the exact
records each shuffle of ``afm curate`` carries (packed the way the pipeline packs them)
and adding up their pickled sizes. Worker memory is bounded by design (every grouping
walks its values as a stream or combines them), so it is the per-process cost of the
stages' models plus one bundle, not a function of the corpus.

    afm bench curate capacity      # the rate measured, then the model from it
    python -m afm.app.bench.pipelines.capacity --pages 3e9 --curate-docs-per-s-core 64
"""

from __future__ import annotations

import argparse
import json
import pickle
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class ShuffleBytes:
    """Bytes one document puts into each shuffle of a curate run (means over a sample)."""

    ids: float  # the duplicate-id policy: (id, packed document)
    dedup_documents: float  # documents waiting for their dedup decision: (key, packed doc)
    dedup_sketch: float  # (content hash, (node, band keys, signature)) into the combiner
    dedup_bands: float  # (band key, node) for every band
    writer: float  # (shard, (id, packed record)) for the shard writer

    @property
    def total(self) -> float:
        return self.ids + self.dedup_documents + self.dedup_sketch + self.dedup_bands + self.writer


def _size(value: Any) -> int:
    return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def measure_shuffle_bytes(texts: Sequence[str]) -> ShuffleBytes:
    """Per-document shuffle bytes of ``texts`` (extracted page texts) through curate's
    default stages: the records are made by the pipeline's own functions."""
    import numpy as np

    from afm.filters.minhash import MinHasher, band_keys
    from afm.pipelines.beam.packing import pack
    from afm.pipelines.dedup.keys import doc_key, node_key
    from afm.pipelines.dedup.pipeline import DedupConfig
    from afm.schema import make_document

    cfg = DedupConfig()
    bands, rows = cfg.lsh()
    docs = [make_document(t, url=f"https://capacity.example/{i}") for i, t in enumerate(texts)]
    for d in docs:  # what the filters add before dedup
        d["signals"] = {f"signal_{k}": 0.5 for k in range(24)}
        d["quality_score"] = 0.5
        d["language"] = "en"
    sk = MinHasher(cfg.num_perm, cfg.seed, cfg.ngram).sketch([d["text"] for d in docs])
    keys = band_keys(sk.signatures, bands, rows).astype("<i8", copy=False)
    sums = dict.fromkeys(ShuffleBytes.__dataclass_fields__, 0.0)
    for i, doc in enumerate(docs):
        content = sk.content_hashes[i].tobytes()
        key = doc_key(doc["id"], content)
        node = node_key(key, doc["quality_score"])
        packed = pack(doc)
        sums["ids"] += _size((doc["id"], packed))
        sums["dedup_documents"] += _size((key, pack((doc, None))))
        sig = sk.signatures[i].astype("<u4").tobytes()
        sums["dedup_sketch"] += _size((content, (node, keys[i].tobytes(), sig)))
        sums["dedup_bands"] += sum(_size((int(k), node)) for k in np.asarray(keys[i]).tolist())
        sums["writer"] += _size((0, (doc["id"], packed)))
    return ShuffleBytes(**{k: v / len(docs) for k, v in sums.items()})


def capacity(pages: float, curate_docs_per_s_core: float, shuffle: ShuffleBytes,
             documents_per_page: float = 0.5) -> dict[str, float]:
    """Core-hours and shuffle volume of a curate run over ``pages`` crawled pages.

    ``curate_docs_per_s_core``: pages per second per core of the whole pipeline
    (``afm bench curate``, one worker); ``documents_per_page``: the share of pages that
    become documents reaching dedup (after extraction, language, safety and PII; on
    Common Crawl roughly half, an assumption stated in docs/curation.md)."""
    docs = pages * documents_per_page
    # Every extracted page crosses the id shuffle and the writer (rejects with their text
    # cut to `reject_text_chars`, so this is an upper bound); only documents that pass
    # the filters reach dedup's shuffles.
    every_page = shuffle.ids + shuffle.writer
    dedup = shuffle.dedup_documents + shuffle.dedup_sketch + shuffle.dedup_bands
    volume = pages * every_page + docs * dedup
    return {
        "pages": pages,
        "core_hours": pages / curate_docs_per_s_core / 3600,
        "documents_to_dedup": docs,
        "shuffle_bytes_per_page": volume / pages,
        "shuffle_tb": volume / 1e12,
    }


def _texts(shared: Path, limit: int) -> list[str]:
    truth = json.loads((shared / "eval/extraction/ground-truth.json").read_text(encoding="utf-8"))
    return [v["articleBody"] for v in truth.values() if v.get("articleBody")][:limit]


CURATE_RESULT = "curate/result.json"  # under the bench workdir, written by `afm bench curate`
SNAPSHOT_PAGES = 3e9


def steady_rate(workdir: Path) -> tuple[float, list[float]]:
    """The steady-state pages/s/core of ``afm bench curate``'s every-stage run, and the
    load average it was measured under, from its ``result.json``."""
    path = Path(workdir) / CURATE_RESULT
    if not path.exists():
        raise RuntimeError(f"{path} not found: run `afm bench curate` first (same --workdir); "
                           "the model takes its steady-state rate")
    data = json.loads(path.read_text(encoding="utf-8"))
    return float(data["afm-all"]["steady_pages_per_cpu_s"]), list(data.get("load_average") or [])


def bench_capacity(opts: Any) -> list[Any]:
    """``afm bench capacity``: the model at the steady-state rate ``afm bench curate``
    measured, next to the rate before issue 44 (31 pages/s/core)."""
    from afm.app.bench.common import Comparison
    from afm.app.bench.pipelines.curate import BEFORE_44
    from afm.console import console

    if opts.shared_dir is None:
        raise RuntimeError("needs ../shared/eval/extraction (real page texts) to measure sizes")
    rate, load = steady_rate(opts.workdir)
    texts = _texts(opts.shared_dir, 100 if opts.quick else 500)
    shuffle = measure_shuffle_bytes(texts)
    now = capacity(SNAPSHOT_PAGES, rate, shuffle)
    before = capacity(SNAPSHOT_PAGES, BEFORE_44, shuffle)
    console.print(f"steady state {rate:.1f} pages/s/core (afm bench curate, load average "
                  f"{', '.join(f'{x:.2f}' for x in load)}); shuffle "
                  f"{now['shuffle_bytes_per_page'] / 1e3:.1f} kB/page, {now['shuffle_tb']:.1f} TB")
    return [
        Comparison("core-hours, 3 B pages", now["core_hours"], before["core_hours"],
                   f"at {BEFORE_44:.0f} pages/s/core (before #44)", "core-h", "lower"),
        Comparison("shuffle TB, 3 B pages", now["shuffle_tb"], None, "", "TB", ""),
    ]


BENCHMARKS = {"capacity": bench_capacity}
BENCHMARK_INPUTS = {"capacity": ("curate",)}  # reads its result.json: runs after it


def main(argv: Sequence[str] | None = None) -> None:  # pragma: no cover - a report
    from afm.shared_data import find_shared_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=float, default=3e9)
    ap.add_argument("--curate-docs-per-s-core", type=float,
                    help="steady-state pages/s/core (default: `afm bench curate`'s result.json)")
    ap.add_argument("--workdir", type=Path, default=Path("work/bench"),
                    help="where `afm bench curate` wrote curate/result.json")
    ap.add_argument("--documents-per-page", type=float, default=0.5)
    args = ap.parse_args(argv)
    shared = find_shared_dir()
    if shared is None:
        raise SystemExit("needs ../shared/eval/extraction (real page texts) to measure sizes")
    texts = _texts(shared, 500)
    shuffle = measure_shuffle_bytes(texts)
    mean_chars = sum(map(len, texts)) / len(texts)
    rate = args.curate_docs_per_s_core or steady_rate(args.workdir)[0]
    out = capacity(args.pages, rate, shuffle, args.documents_per_page)
    print(json.dumps({"pages_per_s_core": round(rate, 2), "sample_documents": len(texts),
                      "mean_text_chars": round(mean_chars),
                      "shuffle_bytes": {k: round(v) for k, v in asdict(shuffle).items()},
                      **{k: round(v, 2) for k, v in out.items()}}, indent=2))


if __name__ == "__main__":  # pragma: no cover
    main()
