"""BFCL's question and answer files: where they are found, how they are read, and how a
test entry becomes a chat request for afm's template.

Files keep BFCL's own names and layout (one JSON object per line):
``BFCL_v4_<category>.json`` with ``id``, ``question`` (turns of messages) and ``function``
(BFCL function docs), answers in ``possible_answer/BFCL_v4_<category>.json``
(``ground_truth``). They are looked for, in order, in

1. ``--data-dir`` (or its ``bfcl/`` folder): a checkout of the leaderboard's data, any version
   whose file names this module knows (v3 or v4);
2. the installed ``bfcl-eval`` package (``pip install --no-deps bfcl-eval``): its data files
   are read directly, nothing of it is imported;
3. the sample afm ships (``evaluation/data/bfcl``: the first 20 entries of each non-live
   category, 10 of each live one), reported as a sample in the results.

Function docs become OpenAI-style tool schemas the way BFCL does for function-calling
models (its ``GORILLA_TO_OPENAPI`` type names; a ``float`` parameter says so in its
description), with BFCL's Python hint appended to each description; names are kept as they
are (afm's template has no character restriction). The model sees them through
``afm.model.text.chat`` like any tool list it was fine-tuned on.
"""

from __future__ import annotations

import copy
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afm.evaluation.posttrain.files import PosttrainDataError, read_json_lines

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "data" / "bfcl"

# afm task name -> BFCL category (file stem after the version prefix), per version.
CATEGORIES: dict[str, dict[str, str]] = {
    "bfcl_simple": {"v4": "simple_python", "v3": "simple"},
    "bfcl_multiple": {"v4": "multiple", "v3": "multiple"},
    "bfcl_parallel": {"v4": "parallel", "v3": "parallel"},
    "bfcl_parallel_multiple": {"v4": "parallel_multiple", "v3": "parallel_multiple"},
    "bfcl_irrelevance": {"v4": "irrelevance", "v3": "irrelevance"},
    "bfcl_live_simple": {"v4": "live_simple", "v3": "live_simple"},
    "bfcl_live_multiple": {"v4": "live_multiple", "v3": "live_multiple"},
    "bfcl_live_parallel": {"v4": "live_parallel", "v3": "live_parallel"},
    "bfcl_live_parallel_multiple": {"v4": "live_parallel_multiple", "v3": "live_parallel_multiple"},
    "bfcl_live_irrelevance": {"v4": "live_irrelevance", "v3": "live_irrelevance"},
    "bfcl_live_relevance": {"v4": "live_relevance", "v3": "live_relevance"},
}
VERSIONS = ("v4", "v3")
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."

# BFCL's type names -> JSON-schema ones (its constants/type_mappings.py, Python subset).
TO_OPENAPI = {
    "integer": "integer", "number": "number", "float": "number", "string": "string",
    "boolean": "boolean", "bool": "boolean", "array": "array", "list": "array", "dict": "object",
    "object": "object", "tuple": "array", "any": "string",
}


class BfclDataError(PosttrainDataError):
    """BFCL files that cannot be found or read."""


@dataclass(frozen=True)
class BfclSet:
    """One category's entries (and answers, for AST categories), and where they came from."""

    task: str
    category: str  # BFCL's name, e.g. simple_python
    entries: list[dict[str, Any]]
    answers: list[dict[str, Any]] | None  # None for relevance / irrelevance
    source: str  # "data-dir" | "bfcl-eval package" | "afm sample"
    path: str

    @property
    def is_relevance(self) -> bool:
        return "relevance" in self.category  # irrelevance too


def package_data_dir() -> Path | None:
    """The installed ``bfcl_eval`` package's data folder, found without importing it."""
    try:
        spec = importlib.util.find_spec("bfcl_eval")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    return folder if folder.is_dir() else None


def _candidates(data_dir: str | None) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    if data_dir:
        out += [(Path(data_dir), "data-dir"), (Path(data_dir) / "bfcl", "data-dir")]
    pkg = package_data_dir()
    if pkg is not None:
        out.append((pkg, "bfcl-eval package"))
    out.append((SAMPLE_DIR, "afm sample"))
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = read_json_lines(path, BfclDataError)
    for n, row in enumerate(rows, 1):
        if "id" not in row:
            raise BfclDataError(f"{path}: entry {n} has no id")
    return rows


def load(task: str, data_dir: str | None) -> BfclSet:
    """The entries of ``task`` from the first place that has its category."""
    if task not in CATEGORIES:
        raise BfclDataError(f"unknown BFCL task {task!r}; known: {', '.join(CATEGORIES)}")
    for folder, source in _candidates(data_dir):
        for version in VERSIONS:
            category = CATEGORIES[task][version]
            path = folder / f"BFCL_{version}_{category}.json"
            if not path.is_file():
                continue
            entries = read_jsonl(path)
            answers = None
            if "relevance" not in category:
                answer_path = folder / "possible_answer" / path.name
                if not answer_path.is_file():
                    raise BfclDataError(f"{path} has no answers beside it ({answer_path})")
                answers = read_jsonl(answer_path)
                by_id = {a["id"]: a for a in answers}
                missing = [e["id"] for e in entries if e["id"] not in by_id]
                if missing:
                    raise BfclDataError(f"{answer_path}: no answer for {missing[:3]}")
                answers = [by_id[e["id"]] for e in entries]
            for e in entries:
                if not isinstance(e.get("question"), list) or not isinstance(e.get("function"), list):
                    raise BfclDataError(f"{path}: entry {e['id']} needs question and function lists")
            return BfclSet(task, category, entries, answers, source, str(path))
    raise BfclDataError(f"{task}: no BFCL_v4/v3 file for it in {data_dir or 'the bfcl-eval package or afm sample'}")


def _openapi_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """BFCL's ``_cast_to_openai_type`` with the OpenAPI mapping (nested lists and dicts)."""
    for value in properties.values():
        kind = value.get("type")
        if kind is None:
            value["type"] = "string"
        else:
            if kind == "float":
                value["format"] = "float"
                value["description"] = value.get("description", "") + " This is a float type value."
            value["type"] = TO_OPENAPI.get(kind, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _openapi_properties(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = TO_OPENAPI.get(items.get("type", "string"), "string")
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = TO_OPENAPI.get(items["items"].get("type", "string"), "string")
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _openapi_properties(items["properties"])
    return properties


def to_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL function docs -> ``{"type": "function", "function": {...}}`` tool schemas."""
    tools = []
    for doc in copy.deepcopy(functions):
        doc["description"] = doc.get("description", "") + PYTHON_HINT
        params = doc.setdefault("parameters", {})
        params["type"] = "object"
        params["properties"] = _openapi_properties(params.get("properties", {}))
        tools.append({"type": "function", "function": doc})
    return tools


def messages(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation of a single-turn entry (BFCL's ``question[0]``)."""
    turn = entry["question"][0]
    return [{"role": m["role"], "content": m["content"]} for m in turn]
