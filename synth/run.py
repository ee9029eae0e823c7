"""What every ``afm synth`` pipeline shares: its output directory, its record of drops,
its generator with the response cache, and its summary.

Output (``afm.outputs`` policy: staged, promoted with ``manifest.json`` and ``_SUCCESS``):

* ``conversations.jsonl`` -- the kept examples as chat conversations (``messages`` [+
  ``tools``], ``id``, ``meta``), ready for ``afm sft prepare``;
* ``dropped.jsonl`` -- every candidate not kept, with ``stage``, ``reason`` and details;
* extra files per pipeline (``triplets.jsonl`` for code), and the manifest: counts per
  stage and reason, the generator, cache hits, and the pipeline's own tables.

An interrupted run (no ``_SUCCESS``) is resumed by running the same command again: the
response cache (``--cache``, by default ``OUTPUT.cache.sqlite`` next to the output)
replays every request already answered. A finished output is replaced only with
``--overwrite``.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from afm import fs
from afm.finish import DROP_REASON, STAT, is_cut
from afm.outputs import SUCCESS, OutputDir
from afm.synth.generators import (
    CachedGenerator,
    Generation,
    GenerationRequest,
    Generator,
    generate_texts,
)


def default_cache(output: str) -> str:
    return os.path.abspath(output.rstrip("/")) + ".cache.sqlite"


@dataclass
class SynthRun:
    """One pipeline run: kept examples, drops with reasons, counters, the generator."""

    name: str
    generator: Generator
    progress: bool = True
    kept: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    extra_files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def ask(self, requests: list[GenerationRequest], label: str) -> list[Generation]:
        self.counts["requests"][label] += len(requests)
        return generate_texts(self.generator, requests, label=f"{self.name}: {label}", progress=self.progress)

    def drop(self, stage: str, reason: str, item: Any, **details: Any) -> None:
        self.counts[stage][f"dropped:{reason}"] += 1
        self.dropped.append({"stage": stage, "reason": reason, "item": item, **details})

    def finished(self, stage: str, gen: Generation, item: Any, **details: Any) -> list[str]:
        """The texts of ``gen`` that ended on their own; each reply that stopped for length
        (``afm.finish``: never a finished turn) is dropped with reason ``cut_reply`` and
        counted in the manifest's ``cut_replies``."""

        kept = []
        for i, text in enumerate(gen.texts):
            if is_cut(gen.finish[i] if i < len(gen.finish) else None):
                self.drop(stage, DROP_REASON, item, reply=text[:300], **details)
            else:
                kept.append(text)
        return kept

    def keep(self, stage: str, conversation: dict[str, Any]) -> None:
        self.counts[stage]["kept"] += 1
        self.kept.append(conversation)

    def count(self, stage: str, what: str, n: int = 1) -> None:
        self.counts[stage][what] += n


def _jsonl(path: str, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")


def open_output(output: str, overwrite: bool) -> Any:
    """Claim ``output``: a finished run needs ``overwrite``; an interrupted one is resumed."""

    names = fs.list_dir(output) if fs.exists(output) else []
    resume = bool(names) and SUCCESS not in names
    return OutputDir.prepare(output, overwrite=overwrite or resume)


def finish(run: SynthRun, out: Any, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write the files and promote the output; returns the manifest."""
    _jsonl(out.staged("conversations.jsonl"), run.kept)
    _jsonl(out.staged("dropped.jsonl"), run.dropped)
    for name, rows in run.extra_files.items():
        _jsonl(out.staged(name), rows)
    gen = run.generator
    cache = getattr(gen, "cache", None)
    manifest = {
        "kind": f"synth-{run.name}", "generator": gen.name,
        "kept": len(run.kept), "dropped": len(run.dropped),
        STAT: sum(d["reason"] == DROP_REASON for d in run.dropped),  # replies cut at the token limit
        "dropped_by_reason": dict(Counter(f"{d['stage']}/{d['reason']}" for d in run.dropped)),
        "counts": {k: dict(v) for k, v in run.counts.items()},
        "cache": ({"path": str(cache.path), "replayed": cache.hits, "new": cache.writes}
                  if isinstance(gen, CachedGenerator) and cache else "off"),
        # prompts a checkpoint generator cut to its window (--long-prompts cut); 0 otherwise
        "prompts_cut": int(getattr(getattr(gen, "inner", gen), "cut_prompts", 0)),
        **manifest,
    }
    out.promote(manifest)
    return manifest
