"""Benchmark data from a local directory, in the layout lm-eval's task definitions expect.

Air-gapped clusters (and this project's CI) cannot reach the Hugging Face hub, so every
task can read its items from ``--data-dir``: JSONL, JSONL.gz or Parquet files named
``<stem>.<ext>`` (e.g. ``arc_easy-test.jsonl.gz``). A file may be in the upstream
dataset's own layout (the fields the task's prompt template reads) or in one of the
preprocessed layouts found in the wild; :data:`CONVERTERS` turns those back into the
upstream layout, so lm-eval's prompts and metrics apply unchanged. Which layout a file
uses is decided per record from its fields, never guessed from the file name.

Known preprocessed layouts (``../shared/eval/SOURCES.md`` describes the shared copies):
llm-foundry's ``{query, choices, gold}`` for ARC and BoolQ, ``{context_options,
continuation, gold}`` for WinoGrande, ``{context, answer, aliases}`` for TriviaQA, and
the original AllenAI TSV columns for OpenBookQA.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from afm.errors import UserError
from afm.io import read_records

SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet")
Record = dict[str, Any]


class LocalDataError(UserError):
    """A local benchmark file is missing or has records of an unknown layout."""


def find_file(data_dir: str | os.PathLike[str], stems: Iterable[str]) -> Path | None:
    """The first ``<data_dir>/<stem><suffix>`` that exists (stems in order of preference)."""
    root = Path(data_dir)
    for stem in stems:
        for suffix in SUFFIXES:
            path = root / f"{stem}{suffix}"
            if path.is_file():
                return path
    return None


def read_file(path: str | os.PathLike[str]) -> list[Record]:
    try:
        return list(read_records(path))
    except (OSError, ValueError) as exc:
        raise LocalDataError(f"{path}: cannot read ({exc})") from exc


# ------------------------------------------------------------------------ converters


def _strip_prefix(text: str, prefix: str) -> str:
    return text[len(prefix):] if text.startswith(prefix) else text


def arc(rec: Record) -> Record:
    """ARC: llm-foundry ``{query: "Question: ...", choices, gold}`` -> ai2_arc layout."""
    if "answerKey" in rec:
        return rec
    _need(rec, ("query", "choices", "gold"), "ARC")
    labels = [chr(ord("A") + i) for i in range(len(rec["choices"]))]
    return {
        "question": _strip_prefix(rec["query"], "Question: "),
        "choices": {"text": list(rec["choices"]), "label": labels},
        "answerKey": labels[int(rec["gold"])],
    }


def boolq(rec: Record) -> Record:
    """BoolQ: llm-foundry ``{query: "Passage: P\\nQuestion: Q?", gold}`` -> super_glue layout
    (lm-eval's template adds the ``?`` back)."""
    if "passage" in rec:
        return rec
    _need(rec, ("query", "gold"), "BoolQ")
    body = _strip_prefix(rec["query"], "Passage: ")
    passage, sep, question = body.rpartition("\nQuestion: ")
    if not sep:
        raise LocalDataError(f"BoolQ record without '\\nQuestion: ': {rec['query'][:80]!r}")
    return {"passage": passage, "question": question.removesuffix("?"), "label": int(rec["gold"])}


def winogrande(rec: Record) -> Record:
    """WinoGrande: llm-foundry ``{context_options, continuation, gold}`` -> winogrande layout.

    The two contexts are ``prefix + option``; the prefix is their common start cut back to
    a word boundary. lm-eval rebuilds exactly ``prefix + option`` and the continuation, so
    its requests equal those of the original data whatever the cut.
    """
    if "sentence" in rec:
        return rec
    _need(rec, ("context_options", "continuation", "gold"), "WinoGrande")
    a, b = rec["context_options"]
    n = len(os.path.commonprefix([a, b]))
    cut = a.rfind(" ", 0, n + 1) + 1 if n < min(len(a), len(b)) else n
    return {
        "sentence": f"{a[:cut]}_ {rec['continuation'].strip()}",
        "option1": a[cut:],
        "option2": b[cut:],
        "answer": str(int(rec["gold"]) + 1),
    }


def triviaqa(rec: Record) -> Record:
    """TriviaQA: llm-foundry ``{context: "Question: Q\\nAnswer:", answer, aliases}`` ->
    trivia_qa layout (lm-eval's template adds ``?``; a trailing one is removed here)."""
    if "question" in rec and isinstance(rec.get("answer"), dict):
        return rec
    _need(rec, ("context", "answer"), "TriviaQA")
    question = _strip_prefix(rec["context"], "Question: ").removesuffix("\nAnswer:").removesuffix("?")
    aliases = list(rec.get("aliases") or [rec["answer"]])
    return {"question": question,
            "answer": {"value": rec["answer"], "aliases": aliases,
                       "normalized_aliases": [a.lower() for a in aliases]}}


def openbookqa(rec: Record) -> Record:
    """OpenBookQA: the AllenAI TSV columns -> openbookqa/main layout."""
    if "question_stem" in rec:
        return rec
    _need(rec, ("Question Stem", "Choices", "Answer Key"), "OpenBookQA")
    import re

    parts = re.split(r"\(([A-Z])\)\s*", rec["Choices"])[1:]
    labels, texts = parts[0::2], [t.strip() for t in parts[1::2]]
    return {"id": rec.get("ID", ""), "question_stem": rec["Question Stem"],
            "choices": {"text": texts, "label": labels}, "answerKey": rec["Answer Key"].strip()}


def hellaswag(rec: Record) -> Record:
    """HellaSwag: the original ``hellaswag_val.jsonl`` layout is the hub's, with an int label."""
    _need(rec, ("ctx_a", "ctx_b", "endings", "activity_label", "label"), "HellaSwag")
    return {**rec, "label": str(rec["label"])}


def identity(rec: Record) -> Record:
    return rec


def _need(rec: Record, fields: tuple[str, ...], name: str) -> None:
    missing = [f for f in fields if f not in rec]
    if missing:
        raise LocalDataError(f"{name} record in an unknown layout: missing {missing} (has {sorted(rec)[:8]})")


CONVERTERS: dict[str, Callable[[Record], Record]] = {
    "arc": arc, "boolq": boolq, "winogrande": winogrande, "triviaqa": triviaqa,
    "openbookqa": openbookqa, "hellaswag": hellaswag, "identity": identity,
}


def load_split(data_dir: str | os.PathLike[str], stems: Iterable[str], converter: str,
               where: Callable[[Record], bool] | None = None) -> list[Record] | None:
    """Converted records of the first matching file (None when no file matches)."""
    path = find_file(data_dir, stems)
    if path is None:
        return None
    convert = CONVERTERS[converter]
    out = []
    for i, rec in enumerate(read_file(path)):
        try:
            doc = convert(rec)
        except LocalDataError as exc:
            raise LocalDataError(f"{path}, record {i + 1}: {exc}") from None
        if where is None or where(doc):
            out.append(doc)
    if not out:
        raise LocalDataError(f"{path}: no records" + (" for this subset" if where else ""))
    return out
