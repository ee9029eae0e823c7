"""The tokenize pipeline: document shards -> Parquet token shards, one document per row.

    files --Reshuffle--> read docs --tokenize (SentencePiece, once per worker)-->
        key by hash(id) % N --GroupByKey--> sort by id --> tokens-NNNNN-of-MMMMM.parquet
                                                                   + manifest.json

Token shard schema (what ``afm.training.data`` reads): ``id`` string, ``source`` string,
``tokens`` list<int32>: the document's tokens with NO BOS/EOS (the loader appends the EOS
that separates packed documents).

Deterministic: N = ceil(documents / shard_docs) from a global count, a document's shard
is a hash of its id, and every shard is sorted by (id, source, tokens), so the same
inputs and tokenizer give byte-identical shards with identical names on any runner and
any number of workers. Files are written to a temporary name and renamed when complete,
so a retried bundle rewrites the same file and readers never see half a shard.

Documents that cannot be tokenized (no ``text``, empty text, or text that tokenizes to
nothing) are not lost silently: they are counted in the manifest by reason and listed
(id, source, reason) in ``skipped.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

TOKEN_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("tokens", pa.list_(pa.int32()), nullable=False),
    ],
    metadata={"afm.record": "tokens", "afm.schema_version": "1"},
)
MANIFEST = "manifest.json"
SKIPPED = "skipped.jsonl"
_SKIP = "skipped"


def _join(base: str, name: str) -> str:
    return f"{base.rstrip('/')}/{name}" if "://" in base else os.path.join(base, name)


def shard_of(doc_id: str, num_shards: int) -> int:
    digest = hashlib.sha1(doc_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % num_shards


def shard_name(index: int, num_shards: int) -> str:
    return f"tokens-{index:05d}-of-{num_shards:05d}.parquet"


def read_documents(path: str) -> Iterator[dict[str, Any]]:
    """``id``/``source``/``text`` of every record of a Parquet or JSONL(.gz) file
    (local or any Beam filesystem). A record without an id gets the SHA-1 of its text."""
    low = path.lower()
    if low.endswith(".parquet"):
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            pf = pq.ParquetFile(fh)
            cols = [c for c in ("id", "source", "text") if c in pf.schema_arrow.names]
            if "text" not in cols:
                raise ValueError(f"{path}: no 'text' column")
            for batch in pf.iter_batches(batch_size=1024, columns=cols):
                yield from (_norm(r) for r in batch.to_pylist())
    elif low.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
        with FileSystems.open(path) as fh:  # compression from the suffix
            for lineno, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
                yield _norm(rec)
    else:
        raise ValueError(f"{path}: unsupported input (expected .parquet or .jsonl[.gz])")


def _norm(rec: dict[str, Any]) -> dict[str, Any]:
    text = rec.get("text")
    doc_id = rec.get("id")
    if not doc_id:
        doc_id = hashlib.sha1(str(text).encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return {"id": str(doc_id), "source": str(rec.get("source") or "web"), "text": text}


class TokenizeFn(beam.DoFn):
    """Document -> ``{"id", "source", "tokens"}``; undecodable ones to the ``skipped`` tag."""

    def __init__(self, tokenizer_model: str):
        self.tokenizer_model = tokenizer_model
        self.sp: Any = None

    def setup(self) -> None:
        import sentencepiece as spm

        with FileSystems.open(self.tokenizer_model, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            self.sp = spm.SentencePieceProcessor(model_proto=fh.read())

    def process(self, doc: dict[str, Any]) -> Iterator[Any]:
        text = doc.get("text")
        reason = None
        if not isinstance(text, str):
            reason = "no_text"
        elif not text:
            reason = "empty_text"
        else:
            tokens = self.sp.encode(text, out_type=int)
            if not tokens:
                reason = "no_tokens"
        if reason is not None:
            beam.metrics.Metrics.counter("tokenize", f"skipped_{reason}").inc()
            yield beam.pvalue.TaggedOutput(
                _SKIP, {"id": doc["id"], "source": doc["source"], "reason": reason}
            )
            return
        # int32 numpy, not a list of Python ints: 4 bytes a token through the shuffle.
        yield {"id": doc["id"], "source": doc["source"], "tokens": np.asarray(tokens, np.int32)}


class WriteTokenShardFn(beam.DoFn):
    """``(index, rows)`` -> one sorted Parquet shard (temp name + rename); yields its stats."""

    def __init__(self, output: str, row_group_size: int = 1024):
        self.output = output
        self.row_group_size = row_group_size

    def process(self, element: tuple[int, Iterable[dict[str, Any]]], num_shards: int) -> Iterator[dict[str, Any]]:
        index, rows = element
        rows = sorted(rows, key=lambda r: (r["id"], r["source"], r["tokens"].tobytes()))
        lengths = np.asarray([len(r["tokens"]) for r in rows], np.int64)
        if lengths.sum() >= 2**31:
            raise ValueError(
                f"shard {index} would hold {int(lengths.sum())} tokens, more than a Parquet "
                "list<int32> column can index; use a smaller --shard-docs"
            )
        offsets = np.zeros(len(rows) + 1, np.int32)
        np.cumsum(lengths, out=offsets[1:])
        values = np.concatenate([r["tokens"] for r in rows]) if rows else np.zeros(0, np.int32)
        table = pa.Table.from_arrays(
            [
                pa.array([r["id"] for r in rows], pa.string()),
                pa.array([r["source"] for r in rows], pa.string()),
                pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.int32())),
            ],
            schema=TOKEN_SCHEMA,
        )
        name = shard_name(index, num_shards)
        final = _join(self.output, name)
        tmp = _join(self.output, f".{name}.{uuid.uuid4().hex}.tmp")
        with FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            pq.write_table(table, fh, compression="zstd", row_group_size=self.row_group_size)
        if FileSystems.exists(final):
            FileSystems.delete([final])
        FileSystems.rename([tmp], [final])
        per_source: dict[str, list[int]] = {}
        for r in rows:
            s = per_source.setdefault(r["source"], [0, 0])
            s[0] += 1
            s[1] += len(r["tokens"])
        yield {"shard": name, "documents": len(rows), "tokens": int(lengths.sum()),
               "per_source": per_source}


def _write_text(path: str, payload: str) -> None:
    from afm.pipelines.io_beam import write_bytes

    write_bytes(path, payload.encode("utf-8"), mime_type="text/plain")


def _write_manifest(infos: list[dict[str, Any]], skipped: list[dict[str, Any]], output: str,
                    tokenizer: str, inputs: list[str]) -> None:
    infos = sorted(infos, key=lambda i: i["shard"])
    skipped = sorted(skipped, key=lambda s: (s["id"], s["source"], s["reason"]))
    sources: dict[str, dict[str, int]] = {}
    for info in infos:
        for src, (docs, toks) in info["per_source"].items():
            agg = sources.setdefault(src, {"documents": 0, "tokens": 0})
            agg["documents"] += docs
            agg["tokens"] += toks
    reasons: dict[str, int] = {}
    for s in skipped:
        reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
    manifest = {
        "format": "afm-token-shards-v1",
        "tokenizer": tokenizer,
        "inputs": inputs,
        "shards": [{k: i[k] for k in ("shard", "documents", "tokens")} for i in infos],
        "documents": sum(i["documents"] for i in infos),
        "tokens": sum(i["tokens"] for i in infos),
        "skipped": len(skipped),
        "skipped_by_reason": dict(sorted(reasons.items())),
        "sources": dict(sorted(sources.items())),
    }
    _write_text(_join(output, SKIPPED), "".join(json.dumps(s, sort_keys=True) + "\n" for s in skipped))
    _write_text(_join(output, MANIFEST), json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def build_pipeline(
    pipeline: beam.Pipeline,
    inputs: list[str],
    tokenizer_model: str,
    output: str,
    *,
    shard_docs: int,
    tokenizer_label: str,
) -> None:
    """Add the tokenize transforms to ``pipeline``."""
    docs = (
        pipeline
        | "files" >> beam.Create(sorted(inputs))
        | "spread files" >> beam.Reshuffle()
        | "read" >> beam.FlatMap(read_documents)
    )
    results = docs | "tokenize" >> beam.ParDo(TokenizeFn(tokenizer_model)).with_outputs(_SKIP, main="ok")
    rows, skipped = results.ok, results[_SKIP]
    count = rows | "count" >> beam.combiners.Count.Globally()
    num_shards = count | "shard count" >> beam.Map(lambda n: max(1, math.ceil(n / shard_docs)))
    infos = (
        rows
        | "key by shard" >> beam.Map(
            lambda r, n: (shard_of(r["id"], n), r), n=beam.pvalue.AsSingleton(num_shards))
        | "group shards" >> beam.GroupByKey()
        | "write shards" >> beam.ParDo(WriteTokenShardFn(output), num_shards=beam.pvalue.AsSingleton(num_shards))
    )
    skipped_list = skipped | "skipped list" >> beam.combiners.ToList()
    _ = (
        infos
        | "shard list" >> beam.combiners.ToList()
        | "manifest" >> beam.Map(
            lambda i, s: _write_manifest(i, s, output, tokenizer_label, sorted(inputs)),
            s=beam.pvalue.AsSingleton(skipped_list))
    )


def run_tokenize(
    inputs: list[str],
    tokenizer_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    shard_docs: int = 20_000,
    runner: str = "DirectRunner",
    num_workers: int = 1,
    pipeline_args: list[str] | None = None,
) -> dict[str, Any]:
    """Tokenize every document of ``inputs`` (files, directories or globs of Parquet/JSONL
    document shards) into ``output_dir``; returns the manifest (statistics).

    ``num_workers`` > 1 runs the local runner with that many worker processes.
    """
    from afm.pipelines.runners import make_runner
    from apache_beam.options.pipeline_options import PipelineOptions

    from afm.io import expand_inputs

    # Not plain .json: pipeline folders hold manifests and stats as .json.
    files = [f for f in expand_inputs(inputs) if f.lower().endswith((".parquet", ".jsonl", ".jsonl.gz"))]
    if not files:
        raise FileNotFoundError(f"no .parquet/.jsonl document shards in {inputs}")
    if shard_docs <= 0:
        raise ValueError("shard_docs must be positive")
    tok_dir = Path(tokenizer_dir)
    model_file = tok_dir / "tokenizer.model" if tok_dir.is_dir() else tok_dir
    if not model_file.is_file():
        raise FileNotFoundError(f"no tokenizer.model in {tokenizer_dir}")
    out = Path(output_dir)
    if out.is_dir() and any(out.glob("tokens-*.parquet")):
        raise FileExistsError(f"{out} already holds token shards; choose an empty --output")
    out.mkdir(parents=True, exist_ok=True)

    args = [f"--runner={runner}", f"--direct_num_workers={num_workers}"]
    if runner == "DirectRunner":
        args.append("--direct_running_mode=" + ("multi_processing" if num_workers > 1 else "in_memory"))
    options = PipelineOptions(args + list(pipeline_args or []))
    # make_runner avoids Beam's "DirectRunner" name, which may try to fetch the Prism binary.
    with beam.Pipeline(runner=make_runner(runner), options=options) as p:
        build_pipeline(
            p, files, str(model_file.absolute()), str(out.absolute()),
            shard_docs=shard_docs, tokenizer_label=str(tok_dir),
        )
    return json.loads((out / MANIFEST).read_text())
