"""The tokenize pipeline: document shards -> Parquet token shards, one document per row.

    files --Reshuffle--> read (the shared reader: afm.readers + afm.pipelines.beam.coerce)
        --> one document per id (pipelines/beam/ids.py) --tokenize (the project's one
        tokenizer, afm.model.text.tokenizer, loaded once per worker)--> key by hash(id) % N
        (the shard rule of every pipeline, afm.pipelines.beam.io.shard_of) --GroupByKey--> sort by id
        --> tokens-NNNNN-of-MMMMM.parquet + skipped.jsonl + manifest.json + _SUCCESS

Token shard schema (what ``afm.training.data.shards`` reads): ``id`` string, ``source`` string,
``tokens`` list<int32>: the document's tokens with NO BOS/EOS (the loader appends the EOS
that separates packed documents).

Inputs are resolved by :func:`afm.io.resolve_inputs`: given a curate output directory,
only its ``documents-*`` shards are read (never ``rejects-*``), and only when its
``_SUCCESS`` marker is there, so a rejected document can never reach training tokens.

Deterministic: N = ceil(documents / shard_docs) from a global count, a document's shard
is a hash of its id, and every shard is sorted by (id, source, tokens), so the same
inputs and tokenizer give byte-identical shards with identical names on any runner and
any number of workers. Shards are written into the run's staging directory and promoted
with the manifest and ``_SUCCESS`` only when the run succeeded (:mod:`afm.outputs`).

Nothing is lost silently: records that cannot be read, duplicate ids, and documents
that cannot be tokenized (no text, empty text, text that tokenizes to nothing) are
listed (id, source, reason) in ``skipped.jsonl`` and counted by reason in the manifest,
and the run checks documents in = tokenized + skipped.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa

from afm import fs
from afm.io import resolve_inputs, write_shard
from afm.model.text.tokenizer import Tokenizer
from afm.outputs import OutputDir, refuse_empty
from afm.pipelines.beam.accounting import AccountingError
from afm.pipelines.beam.ids import UniqueIds
from afm.pipelines.beam.io import ReadInputs, read_json, shard_of, write_json
from afm.pipelines.beam.logs import beam_logs, log_file, worker_logs
from afm.pipelines.beam.progress import ProgressDisplay, make_tick
from afm.pipelines.beam.runners import (
    LOCAL_RUNNERS,
    build_options,
    check_options,
    make_runner,
    run_to_completion,
)
from afm.pipelines.beam.worker_paths import WorkerPath, check_worker_paths
from afm.readers import file_format

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
STATS = ".stats.json"  # hidden: run scratch in the staging directory, never promoted
_SKIP = "skipped"


def _join(base: str, name: str) -> str:
    return fs.join(base, name)


def shard_name(index: int, num_shards: int) -> str:
    return f"tokens-{index:05d}-of-{num_shards:05d}.parquet"


def _skip_entry(rec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A reject of the reader or of the duplicate-id policy, as a skipped.jsonl entry."""
    reason = rec.get("reason") or "rejected"
    return {"id": str(rec.get("id")), "source": str(rec.get("source") or "web"),
            "reason": f"{prefix}{reason}"}


class TokenizeFn(beam.DoFn):
    """Document -> ``{"id", "source", "tokens"}``; undecodable ones to the ``skipped`` tag."""

    def __init__(self, tokenizer_model: str):
        self.tokenizer_model = tokenizer_model
        self.tokenizer: Tokenizer | None = None

    def setup(self) -> None:
        self.tokenizer = Tokenizer(self.tokenizer_model)  # read through afm.fs: local or a URL

    def process(self, doc: dict[str, Any]) -> Iterator[Any]:
        text = doc.get("text")
        reason = None
        if not isinstance(text, str):
            reason = "no_text"
        elif not text:
            reason = "empty_text"
        else:
            tokens = self.tokenizer.encode(text)  # no BOS/EOS: the loader adds the EOS
            if not tokens:
                reason = "no_tokens"
        if reason is not None:
            beam.metrics.Metrics.counter("tokenize", f"skipped_{reason}").inc()
            yield beam.pvalue.TaggedOutput(
                _SKIP, {"id": doc["id"], "source": doc["source"], "reason": reason}
            )
            return
        if not isinstance(doc.get("id"), str):  # the reader guarantees it; be explicit
            yield beam.pvalue.TaggedOutput(
                _SKIP, {"id": str(doc.get("id")), "source": doc["source"], "reason": "bad_id"})
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
        write_shard(_join(self.output, name), table, TOKEN_SCHEMA, row_group_size=self.row_group_size)
        per_source: dict[str, list[int]] = {}
        for r in rows:
            s = per_source.setdefault(r["source"], [0, 0])
            s[0] += 1
            s[1] += len(r["tokens"])
        yield {"shard": name, "documents": len(rows), "tokens": int(lengths.sum()),
               "per_source": per_source}


def build_pipeline(
    pipeline: beam.Pipeline,
    inputs: list[str],
    tokenizer_model: str,
    staging: str,
    *,
    shard_docs: int,
    progress_dir: str | None = None,
) -> str:
    """Add the tokenize transforms to ``pipeline``, writing shards into ``staging``;
    returns the path of the run's statistics file (read by :func:`run_tokenize`).
    ``progress_dir``: local runs publish their counts there (:mod:`afm.pipelines.beam.progress`)."""

    read = pipeline | "read" >> ReadInputs(inputs, "web", allow_pages=False, progress_dir=progress_dir)
    unique = read["docs"] | "one per id" >> UniqueIds()
    results = unique["kept"] | "tokenize" >> beam.ParDo(TokenizeFn(tokenizer_model)).with_outputs(
        _SKIP, main="ok")
    rows = results.ok
    skipped = (
        read["rejected"] | "read rejects" >> beam.Map(_skip_entry, "read:"),
        unique["rejected"] | "duplicate ids" >> beam.Map(_skip_entry),
        results[_SKIP],
    ) | "all skipped" >> beam.Flatten()
    if progress_dir:
        rows = rows | "progress kept" >> make_tick(progress_dir, "kept")
        _ = skipped | "progress rejected" >> make_tick(progress_dir, "rejected")
    count = rows | "count" >> beam.combiners.Count.Globally()
    num_shards = count | "shard count" >> beam.Map(lambda n: max(1, math.ceil(n / shard_docs)))
    infos = (
        rows
        | "key by shard" >> beam.Map(
            lambda r, n: (shard_of(r["id"], n), r), n=beam.pvalue.AsSingleton(num_shards))
        | "group shards" >> beam.GroupByKey()
        | "write shards" >> beam.ParDo(WriteTokenShardFn(staging),
                                       num_shards=beam.pvalue.AsSingleton(num_shards))
    )
    n_in = (
        (read["docs"] | "count docs" >> beam.combiners.Count.Globally(),
         read["rejected"] | "count read rejects" >> beam.combiners.Count.Globally())
        | "in parts" >> beam.Flatten()
        | "count in" >> beam.CombineGlobally(sum)
    )
    n_not_docs = read["skipped"] | "count not documents" >> beam.combiners.Count.Globally()
    stats_path = _join(staging, STATS)
    _ = (
        pipeline
        | "stats path" >> beam.Create([stats_path])
        | "write stats" >> beam.Map(
            lambda path, i, s, n, nd: write_json(path, {"infos": i, "skipped": s, "in": n,
                                                        "not_documents": nd}),
            i=beam.pvalue.AsSingleton(infos | "shard list" >> beam.combiners.ToList()),
            s=beam.pvalue.AsSingleton(skipped | "skipped list" >> beam.combiners.ToList()),
            n=beam.pvalue.AsSingleton(n_in), nd=beam.pvalue.AsSingleton(n_not_docs))
    )
    return stats_path


def _manifest(stats: dict[str, Any], tokenizer: str, inputs: list[str],
              skipped_inputs: list[str]) -> dict[str, Any]:
    infos = sorted(stats["infos"], key=lambda i: i["shard"])
    skipped = stats["skipped"]
    sources: dict[str, dict[str, int]] = {}
    for info in infos:
        for src, (docs, toks) in info["per_source"].items():
            agg = sources.setdefault(src, {"documents": 0, "tokens": 0})
            agg["documents"] += docs
            agg["tokens"] += toks
    reasons: dict[str, int] = {}
    for s in skipped:
        reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
    documents = sum(i["documents"] for i in infos)
    return {
        "format": "afm-token-shards-v1",
        "tokenizer": tokenizer,
        "inputs": inputs,
        "skipped_inputs": skipped_inputs,
        "shards": [{k: i[k] for k in ("shard", "documents", "tokens")} for i in infos],
        "documents_in": stats["in"],
        "documents": documents,
        "tokens": sum(i["tokens"] for i in infos),
        "skipped": len(skipped),
        "skipped_by_reason": dict(sorted(reasons.items())),
        "not_documents": stats.get("not_documents", 0),
        "accounting": {"ok": stats["in"] == documents + len(skipped),
                       "rule": "documents in = tokenized + skipped"},
        "sources": dict(sorted(sources.items())),
    }


def _tokenizer_model(tokenizer: str) -> str:
    """The ``tokenizer.model`` file of a tokenizer directory (or the file itself), local or
    a URL: workers load it with :class:`afm.model.text.tokenizer.Tokenizer` (through afm.fs)."""

    path = fs.join(tokenizer, "tokenizer.model") if fs.isdir(tokenizer) else tokenizer
    if not fs.isfile(path):
        raise FileNotFoundError(f"no tokenizer.model in {tokenizer}")
    return path if fs.is_remote(path) else os.path.abspath(path)


def run_tokenize(
    inputs: list[str],
    tokenizer_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    shard_docs: int = 20_000,
    runner: str = "DirectRunner",
    num_workers: int = 1,
    pipeline_args: list[str] | None = None,
    overwrite: bool = False,
    dry_run: bool = False,
    allow_empty: bool = False,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Tokenize every document of ``inputs`` (files, directories or globs of Parquet/JSONL
    document shards; a curate output directory means its ``documents-*``) into
    ``output_dir``; returns the manifest (statistics). The output must be empty unless
    ``overwrite``; it is claimed (and checked writable) before anything is computed.

    ``runner`` and ``pipeline_args`` go through the runner factory
    (:mod:`afm.pipelines.beam.runners`); ``num_workers`` is the local runner's process count
    unless the Beam options name one. With ``dry_run`` the graph is built and the options
    and worker paths are checked; nothing runs (returns the check). A run that tokenizes
    no document raises :class:`~afm.outputs.EmptyOutput` and promotes nothing, unless
    ``allow_empty`` (:func:`afm.outputs.refuse_empty`, the one rule).
    """


    if shard_docs <= 0:
        raise ValueError("shard_docs must be positive")
    resolved = resolve_inputs(inputs)
    files = [f for f in resolved.files if f.lower().endswith((".parquet", ".jsonl", ".jsonl.gz",
                                                               ".ndjson", ".ndjson.gz"))]
    skipped_inputs = [f"{p} ({why})" for p, why in resolved.skipped]
    skipped_inputs += [f"{p} (not a document file)" for p in resolved.files if p not in files]
    if not files:
        why = "; ".join(f"{p}: {w}" for p, w in resolved.skipped if file_format(p))
        raise FileNotFoundError(f"no .parquet/.jsonl document shards in {list(inputs)}"
                                + (f" (not read: {why})" if why else
                                   " (a finished curate run that kept no document has none)"))
    model_file = _tokenizer_model(str(tokenizer_dir))
    output = str(output_dir) if fs.is_remote(str(output_dir)) else os.path.abspath(output_dir)
    options = build_options(runner, pipeline_args, local_workers=num_workers)
    check = check_options(runner, options, submitting=not dry_run)
    paths = [WorkerPath("input", f) for f in files] + [
        WorkerPath("tokenizer", model_file), WorkerPath("output", output, "write")]
    check.extend(check_worker_paths(paths, runner, options))
    if dry_run:
        transforms = 0
        if check.ok:  # (Beam validates some options itself when a pipeline is made)
            pipeline = beam.Pipeline(options=options)
            build_pipeline(pipeline, files, model_file, fs.join(output, ".staging-dry-run"),
                           shard_docs=shard_docs)
            transforms = len(pipeline.to_runner_api().components.transforms)
        return {"dry_run": True, "runner": runner, "inputs": files, "ok": check.ok,
                "option_errors": check.errors, "option_warnings": check.warnings,
                "graph_transforms": transforms}
    if not check.ok:
        raise ValueError(f"cannot run on {runner}:\n  - " + "\n  - ".join(check.errors))
    out = OutputDir.prepare(output, overwrite=overwrite)
    log_path = log_file(output, out.run_id) if worker_logs() == "file" else None
    local = runner in LOCAL_RUNNERS
    progress_dir = tempfile.mkdtemp(prefix="afm-progress-") if local else None
    try:
        total = sum(os.path.getsize(f) for f in files if not fs.is_remote(f)) or None
        with beam_logs(log_path), ProgressDisplay(progress_dir or tempfile.gettempdir(), "tokenize",
                                                  total_bytes=total, enabled=local and show_progress):
            # make_runner avoids Beam's "DirectRunner" name, which may try to fetch Prism.
            pipeline = beam.Pipeline(runner=make_runner(runner, worker_log=log_path), options=options)
            stats_path = build_pipeline(pipeline, files, model_file, out.staging,
                                        shard_docs=shard_docs, progress_dir=progress_dir)
            run_to_completion(pipeline, runner=runner, options=options)
        stats = read_json(stats_path)
        manifest = _manifest(stats, str(tokenizer_dir), files, skipped_inputs)
        manifest["runner"] = runner
        if not manifest["accounting"]["ok"]:
            raise AccountingError(
                f"tokenize: {manifest['documents_in']} documents in != {manifest['documents']} "
                f"tokenized + {manifest['skipped']} skipped (nothing was promoted)")
        by_reason = manifest.get("skipped_by_reason", {})
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(by_reason.items(), key=lambda kv: -kv[1])[:3])
        refuse_empty("tokenize", manifest["documents"],
                     f"{manifest['documents_in']} document(s) read from {len(files)} file(s), "
                     f"{manifest['skipped']} skipped" + (f": {reasons}" if reasons else ""), allow_empty)
        skipped = sorted(stats["skipped"], key=lambda s: (s["id"], s["source"], s["reason"]))
        fs.write_bytes(out.staged(SKIPPED), "".join(
            json.dumps(s, sort_keys=True) + "\n" for s in skipped).encode("utf-8"))
        manifest["logs"] = log_path or "terminal"
        out.promote(manifest)
    except BaseException:
        out.abort()
        raise
    finally:
        if progress_dir:
            shutil.rmtree(progress_dir, ignore_errors=True)
    return manifest
