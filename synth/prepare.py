"""``afm sft prepare``: instruction data -> an SFT dataset the trainer reads.

Stages, in order, each counted (records in = kept + rejected, per stage and in total):

1. **read** -- JSONL / Parquet records through the project's input boundary
   (``afm.readers``): an undecodable line or row group is a reject, never a crash.
2. **format** -- any known layout (``afm.synth.formats``: chat, ShareGPT, Alpaca,
   prompt/completion, and preference pairs through their one reader) -> a validated
   conversation with at least one assistant turn (nothing to train on otherwise), none of
   whose replies stopped for length (``afm.finish``: a ``finish_reason`` / ``stop_reason``
   of ``length`` or ``max_tokens`` on the row, as ``chosen_finish_reason`` on a
   preference row, on an assistant message or a ShareGPT ``gpt`` turn; the chat template
   would close the cut reply as a finished turn): ``cut_reply``, counted in the
   manifest's ``cut_replies``. Every reject is counted by its reason.
3. **pii** -- the PII filter of the curation pipeline (``afm.filters.pii``) on every
   message text and string tool-call argument: personal data replaced by typed
   placeholders; a conversation made mostly of personal data dropped (``mostly_pii``).
   The report verifies that no personal data is in its demonstration data (§4.1.1).
4. **dedup** -- exact duplicates after redaction (same content hash) dropped, naming the
   copy kept (the report deduplicates with text embeddings; near-duplicate detection is
   the curation pipeline's MinHash for larger sets).
5. **tokenize** -- the chat template (``afm.model.text.chat``) -> ids and the assistant mask;
   longer than ``max_tokens`` dropped (``too_long``: a truncated reply teaches the model to
   stop mid-sentence).
6. **decontaminate** -- every message text scanned against the benchmark n-gram index
   (``afm decontam build-index``, ``afm.filters.ngram_index``) with the same rule as the
   corpus: a conversation is dropped when it shares an n-gram with an evaluation prompt,
   unless that n-gram occurs in at least ``threshold`` conversations of this set (common
   usage). The counts need the whole set, so candidates are staged and decided in a
   second pass.

Output (through the output-directory policy, ``afm.outputs``): ``tokens-NNNNN.parquet``
(``id``, ``source`` = the dataset name, ``tokens``, ``loss_mask``, ``messages`` as JSON),
``rejects-NNNNN.parquet`` (the conversation as ``text`` JSON, ``rejected_by``, ``reason``,
``details``), ``manifest.json`` and ``_SUCCESS``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from afm.errors import UserError
from afm.filters.ngram_index import NgramIndex
from afm.filters.pii import PiiFilter
from afm.finish import DROP_REASON, STAT
from afm.io import ShardSequence, read_shard, resolve_inputs
from afm.model.text.chat import CHAT_TEMPLATE
from afm.model.text.tokenizer import Tokenizer
from afm.outputs import OutputDir
from afm.readers import Failure, Record, read_file
from afm.schema import REJECT_SCHEMA, make_reject
from afm.synth.formats import Conversation, FormatError, conversation_id, to_conversation

SFT_SCHEMA = pa.schema([
    ("id", pa.string()), ("source", pa.string()), ("tokens", pa.list_(pa.int32())),
    ("loss_mask", pa.list_(pa.int8())), ("messages", pa.string()),
], metadata={"afm.record": "sft", "afm.schema_version": "1"})
_CANDIDATE_SCHEMA = SFT_SCHEMA.append(pa.field("hits", pa.string()))
# The chat versions of curate's stages for the ``chat`` source (pii, dedup, decontaminate, in
# the stage registry's order: tests/unit/project/test_layout.py checks it), around this
# module's own format check and the chat template's tokenization.
STAGES = ("read", "format", "pii", "dedup", "tokenize", "decontaminate")
ROWS_PER_SHARD = 50_000
ROW_GROUP = 1024


class PrepareError(UserError):
    """Bad arguments (no input, unknown tokenizer, unusable index)."""


@dataclass
class PrepareConfig:
    name: str  # the dataset name: the mixture key in data.weights
    tokenizer: str
    decontam_index: str | None = None  # None: decontamination off (said in the manifest)
    threshold: int = 1000  # common-usage n-grams (report §3.1.1), counted over this set
    pii: bool = True
    max_tokens: int = 4096
    dedup: bool = True


@dataclass
class StageCount:
    seen: int = 0
    rejected: int = 0
    reasons: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {"in": self.seen, "kept": self.seen - self.rejected, "rejected": self.rejected,
                "reasons": dict(self.reasons)}


def _redact_value(value: Any, scan: Callable[[str], tuple[str, dict[str, int], dict[str, float]]],
                  counts: Counter, chars: list[float]) -> Any:
    if isinstance(value, str):
        text, found, signals = scan(value)
        counts.update(found)
        chars[0] += signals["char_ratio"] * max(len(value.replace(" ", "")), 1)
        chars[1] += signals["items"]
        return text
    if isinstance(value, dict):
        return {k: _redact_value(v, scan, counts, chars) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_value(v, scan, counts, chars) for v in value]
    return value


def redact_conversation(conv: Conversation, pii: Any) -> tuple[Conversation, Counter, bool]:
    """Messages with personal data replaced; the counts per kind; whether the conversation
    is mostly personal data (the filter's own rule over all its text)."""
    counts: Counter = Counter()
    chars = [0.0, 0.0]  # PII characters, items
    messages = []
    for m in conv.messages:
        new = dict(m)
        if isinstance(m.get("content"), str):
            new["content"] = _redact_value(m["content"], pii.scan, counts, chars)
        if m.get("tool_calls"):
            new["tool_calls"] = _redact_value(m["tool_calls"], pii.scan, counts, chars)
        messages.append(new)
    total = max(sum(len(t.replace(" ", "")) for t in conv.texts()), 1)
    cfg = pii.cfg
    mostly = cfg.drop_mostly_pii and chars[1] >= cfg.min_items_for_drop and chars[0] / total >= cfg.max_pii_char_ratio
    out = Conversation(messages, conv.tools, conv.id, dict(conv.meta))
    return out, counts, bool(mostly)


def _reject(conv_text: str, conv_id: str, name: str, stage: str, reason: str, **details: Any) -> dict[str, Any]:
    doc = {"id": conv_id, "source": name, "text": conv_text}
    return make_reject(doc, stage, reason, **details)  # type: ignore[arg-type]


def input_files(inputs: list[str]) -> list[str]:
    """The JSONL / Parquet files named by ``inputs`` (files, directories, globs)."""

    try:
        files = resolve_inputs(inputs).files
    except FileNotFoundError as exc:
        raise PrepareError(str(exc)) from None
    files = [f for f in files if f.endswith((".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".parquet"))]
    if not files:
        raise PrepareError(f"no .jsonl / .parquet files in {inputs}")
    return files


def iter_records(files: list[str]) -> Iterator[Record | Failure]:
    """Every record (or failure) of the files, in order."""
    for path in files:
        for item in read_file(path):
            if isinstance(item, (Record, Failure)):
                yield item


def prepare_sft(inputs: list[str], output: str, cfg: PrepareConfig, *, overwrite: bool = False,
                progress: bool = True) -> dict[str, Any]:
    """Run the stages of the module docstring; returns the manifest."""


    if not cfg.name or not cfg.name.replace("-", "").replace("_", "").isalnum():
        raise PrepareError(f"dataset name {cfg.name!r}: use letters, digits, - and _ (it is a mixture key)")
    try:
        tok = Tokenizer.load(cfg.tokenizer)
    except (FileNotFoundError, ValueError) as exc:
        raise PrepareError(f"tokenizer {cfg.tokenizer}: {exc}") from None
    index = None
    if cfg.decontam_index:
        try:
            index = NgramIndex(cfg.decontam_index)
        except (FileNotFoundError, ValueError) as exc:
            raise PrepareError(f"decontamination index: {exc}") from None
    if cfg.threshold < 2:
        raise PrepareError("threshold must be >= 2 (with 1 every benchmark n-gram is common usage)")
    pii = None
    if cfg.pii:
        pii = PiiFilter()
    files = input_files(inputs)  # fails before the output is claimed
    out = OutputDir.prepare(output, overwrite=overwrite)
    counts = {s: StageCount() for s in STAGES}
    redactions: Counter = Counter()
    rejects = ShardSequence(out.staging, "rejects", REJECT_SCHEMA, rows_per_shard=ROWS_PER_SHARD, row_group_size=ROW_GROUP)
    candidates = ShardSequence(out.staging, ".candidates", _CANDIDATE_SCHEMA, rows_per_shard=ROWS_PER_SHARD,
                               row_group_size=ROW_GROUP)
    seen_ids: dict[str, str] = {}
    doc_freq: Counter = Counter()  # benchmark n-gram key -> conversations holding it
    try:
        items: Iterator[Any] = iter_records(files)
        if progress:
            from afm.console import track

            items = track(items, f"prepare {cfg.name}", unit="records")
        for item in items:
            counts["read"].seen += 1
            if isinstance(item, Failure):
                counts["read"].rejected += 1
                counts["read"].reasons[item.reason] += 1
                rejects.add(_reject("", f"unreadable:{item.where.describe()}", cfg.name, "read",
                                    item.reason, **item.details()))
                continue
            raw = json.dumps(item.value, ensure_ascii=False, default=str)
            counts["format"].seen += 1
            try:
                conv = to_conversation(item.value)  # the layout's reader, the finish rule included
                if not any(m["role"] == "assistant" for m in conv.messages):
                    raise FormatError("no assistant turn: nothing to train on", "no_assistant_turn")
            except FormatError as exc:
                reason = exc.reason
                counts["format"].rejected += 1
                counts["format"].reasons[reason] += 1
                rid = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:24]
                rejects.add(_reject(raw, rid, cfg.name, "format", reason, error=str(exc),
                                    **item.where.details()))
                continue
            counts["pii"].seen += 1
            if pii is not None:
                conv, found, mostly = redact_conversation(conv, pii)
                if mostly:
                    counts["pii"].rejected += 1
                    counts["pii"].reasons["mostly_pii"] += 1
                    rejects.add(_reject(conv.to_json(), conv.id, cfg.name, "pii", "mostly_pii",
                                        counts=dict(found)))
                    continue
                redactions.update(found)
            counts["dedup"].seen += 1
            content = conversation_id(conv.messages, conv.tools)
            if cfg.dedup and content in seen_ids:
                counts["dedup"].rejected += 1
                counts["dedup"].reasons["duplicate"] += 1
                rejects.add(_reject(conv.to_json(), conv.id, cfg.name, "dedup", "duplicate",
                                    duplicate_of=seen_ids[content]))
                continue
            if cfg.dedup:
                seen_ids[content] = conv.id
            counts["tokenize"].seen += 1
            ids, mask = tok.encode_chat(conv.messages, tools=conv.tools)
            if len(ids) > cfg.max_tokens:
                counts["tokenize"].rejected += 1
                counts["tokenize"].reasons["too_long"] += 1
                rejects.add(_reject(conv.to_json(), conv.id, cfg.name, "tokenize", "too_long",
                                    tokens=len(ids), max_tokens=cfg.max_tokens))
                continue
            hits: list[dict[str, Any]] = []
            if index is not None:
                found_hits = index.scan(["\n".join(conv.texts())])[0]
                hits = [{"key": h.key, "benchmark": h.benchmark, "example": h.example_id,
                         "ngram": h.ngram} for h in found_hits]
                doc_freq.update({h["key"] for h in hits})
            candidates.add({"id": conv.id, "source": cfg.name, "tokens": ids,
                            "loss_mask": [int(m) for m in mask],
                            "messages": conv.to_json(), "hits": json.dumps(hits)})
        candidates.flush()
        kept = _decide(candidates.files, out, cfg, doc_freq, counts["decontaminate"], rejects,
                       index is not None)
        rejects.flush()
        totals = {"in": counts["read"].seen, "kept": kept["rows"],
                  "rejected": sum(c.rejected for c in counts.values())}
        if totals["in"] != totals["kept"] + totals["rejected"]:
            raise RuntimeError(f"accounting broken: {totals}")  # a bug, never silent
        if totals["kept"] == 0:  # an empty dataset is a failure, never a finished run
            reasons = Counter()
            for c in counts.values():
                reasons.update(c.reasons)
            why = ", ".join(f"{r} {n}" for r, n in reasons.most_common(4)) or "no records read"
            raise PrepareError(f"no usable conversation in {', '.join(map(str, inputs))}: {totals['rejected']} of "
                               f"{totals['in']} records rejected ({why}); nothing was written")
        for path in candidates.files:
            os.remove(path)
        manifest = {
            "kind": "sft-dataset", "name": cfg.name, "inputs": list(inputs),
            "tokenizer": {"path": os.path.abspath(cfg.tokenizer), "vocab_size": tok.vocab_size,
                          "sha256": hashlib.sha256(tok.path.read_bytes()).hexdigest()},
            "chat_template_sha256": hashlib.sha256(CHAT_TEMPLATE.encode()).hexdigest(),
            "totals": totals, "stages": {s: c.as_dict() for s, c in counts.items()},
            STAT: counts["format"].reasons[DROP_REASON],  # rows whose reply stopped for length
            "tokens": kept["tokens"], "trained_tokens": kept["trained"],
            "pii_redactions": dict(redactions), "pii": cfg.pii,
            "decontamination": ({"index": os.path.abspath(cfg.decontam_index), "threshold": cfg.threshold,
                                 "removed_per_benchmark": kept["per_benchmark"]}
                                if index is not None else "off"),
            "max_tokens": cfg.max_tokens,
        }
        out.promote(manifest)
        return manifest
    except BaseException:
        out.abort()
        raise


def _decide(files: list[str], out: Any, cfg: PrepareConfig, doc_freq: Counter, count: StageCount,
            rejects: ShardSequence, decontaminate: bool) -> dict[str, Any]:
    """Second pass: drop candidates holding a benchmark n-gram below the common-usage count,
    write the rest as the dataset's shards."""
    writer = ShardSequence(out.staging, "tokens", SFT_SCHEMA, rows_per_shard=ROWS_PER_SHARD, row_group_size=ROW_GROUP)
    tokens = trained = 0
    per_benchmark: dict[str, int] = defaultdict(int)
    for path in files:
        for row in read_shard(path).to_pylist():
            count.seen += 1
            hits = json.loads(row.pop("hits"))
            rare = [h for h in hits if doc_freq[h["key"]] < cfg.threshold] if decontaminate else []
            if rare:
                count.rejected += 1
                count.reasons["benchmark_overlap"] += 1
                benches = sorted({h["benchmark"] for h in rare})
                for b in benches:
                    per_benchmark[b] += 1
                first = rare[0]
                rejects.add(_reject(row["messages"], row["id"], cfg.name, "decontaminate",
                                    "benchmark_overlap", benchmark=first["benchmark"],
                                    example_id=first["example"], ngram=first["ngram"],
                                    benchmarks=benches, collisions=len(rare)))
                continue
            writer.add(row)
            tokens += len(row["tokens"])
            trained += int(np.sum(row["loss_mask"]))
    writer.flush()
    return {"rows": writer.count, "tokens": tokens, "trained": trained, "per_benchmark": dict(per_benchmark)}


__all__ = ["PrepareConfig", "PrepareError", "SFT_SCHEMA", "prepare_sft", "redact_conversation"]
