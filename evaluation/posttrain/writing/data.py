"""Prompt and reference files of the judged writing tasks, in their publishers' layouts.

The files come from ``--data-dir`` (the user fetched them, or a package ships them); only
with ``--allow-hub`` are the public ones fetched from the Hugging Face hub when
``--data-dir`` lacks them (:data:`HUB`: AlpacaEval 2.0's reference outputs, Arena-Hard
v2.0's questions and baseline answers). afm ships only its toy writing set.

* ``alpaca_eval``: AlpacaEval 2.0's ``alpaca_eval_gpt4_baseline.json`` (GPT-4 Turbo's
  outputs, the 2.0 reference) or AlpacaEval's ``alpaca_eval.json`` (a JSON list;
  ``instruction``, the reference model's ``output`` and ``generator``), or the same rows as
  ``alpaca_eval.jsonl``; with AlpacaEval's ``instruction_difficulty.csv`` beside it (row
  index -> difficulty) the LC GLM uses it, and with its ``df_gamed.csv`` too (the gamed
  baselines' annotations, both files from the hub dataset tatsu-lab/alpaca_eval) the LC is
  AlpacaEval 2.0's published ``length_controlled_v1``.
* ``arena_hard``: an Arena-Hard-Auto benchmark folder (``arena-hard-v0.1`` or
  ``arena-hard-v2.0``, or ``arena_hard``) with ``question.jsonl`` (v0.1: ``question_id``,
  ``turns``; v2.0: ``uid``, ``prompt``) and ``model_answer/<baseline>.jsonl`` (v0.1:
  ``choices[0].turns[0].content``; v2.0: the last message's ``content``, a string or
  ``{"answer": ...}``); the baseline is ``--arena-baseline`` (one model, or one per category:
  ``hard_prompt=o3-mini-2025-01-31,creative_writing=gemini-2.0-flash-001``), else v2.0's own
  pair of baselines per category (:data:`ARENA_V2_BASELINES`) when both answer files are
  there, else the only answer file there.
* ``afm_writing``: ``writing.jsonl`` (``id``, ``category`` = summarization | composition |
  general, ``prompt``, optional ``reference``), else afm's toy set
  (``evaluation/data/writing/demo-writing.jsonl``), reported as such.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afm.evaluation.posttrain.files import PosttrainDataError, read_json_lines

DEMO_WRITING = Path(__file__).resolve().parents[2] / "data" / "writing" / "demo-writing.jsonl"
ARENA_FOLDERS = ("arena-hard-v2.0", "arena-hard-v0.1", "arena_hard", "arena-hard")
ALPACA_FILES = ("alpaca_eval_gpt4_baseline.json", "alpaca_eval.json", "alpaca_eval.jsonl")
# Arena-Hard v2.0's baselines: one per question category (its arena-hard-v2.0.yaml).
ARENA_V2_BASELINES = {"hard_prompt": "o3-mini-2025-01-31", "creative_writing": "gemini-2.0-flash-001"}
# What --allow-hub fetches (Hugging Face dataset repos, files in their layouts above).
HUB = {
    "alpaca_eval": ("tatsu-lab/alpaca_eval", ("alpaca_eval_gpt4_baseline.json",)),
    "arena_hard": ("lmarena-ai/arena-hard-auto", ("data/arena-hard-v2.0/question.jsonl",
                                                  "data/arena-hard-v2.0/model_answer/{baseline}.jsonl")),
}


class WritingDataError(PosttrainDataError):
    """Writing-task files that are missing or not in a known layout."""


@dataclass(frozen=True)
class WritingItem:
    id: str
    prompt: str
    reference: str | None = None
    category: str = "general"
    difficulty: float | None = None


@dataclass(frozen=True)
class WritingSet:
    task: str
    items: list[WritingItem]
    source: str
    reference_model: str | None = None
    gamed: str | None = None  # AlpacaEval's df_gamed.csv beside the files (its LC v1 regularisation)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return read_json_lines(path, WritingDataError)


def _need(row: dict[str, Any], key: str, path: Path, n: int) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise WritingDataError(f"{path}: row {n} has no {key!r} text")
    return value


def hub_folder(task: str, baselines: tuple[str, ...] = ()) -> Path:
    """The task's public files fetched from the hub (``--allow-hub``) into the hub cache."""
    repo, patterns = HUB[task]
    files = [f.format(baseline=b) for f in patterns for b in (baselines if "{baseline}" in f else ("",))]
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(repo, repo_type="dataset", allow_patterns=files))
    except Exception as exc:  # network, auth, missing repo: one line for the user
        raise WritingDataError(f"{task}: could not fetch {', '.join(files)} from the hub dataset {repo} "
                               f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise WritingDataError(f"{task}: the hub dataset {repo} has no {', '.join(missing)}")
    return folder


def load_alpaca_eval(data_dir: str | None, allow_hub: bool = False) -> WritingSet:
    root = Path(data_dir) if data_dir else None
    path = next((p for p in ([root / f for f in ALPACA_FILES] if root else []) if p.is_file()), None)
    if path is None and allow_hub:
        path = hub_folder("alpaca_eval") / ALPACA_FILES[0]
    if path is None:
        raise WritingDataError("alpaca_eval needs alpaca_eval_gpt4_baseline.json (AlpacaEval 2.0's instructions with "
                               f"the reference outputs) in --data-dir{f' ({data_dir})' if data_dir else ''}, or "
                               f"--allow-hub to fetch it from {HUB['alpaca_eval'][0]}; see docs/evaluation.md")
    if path.suffix == ".json":
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise WritingDataError(f"{path}: not readable JSON ({exc})") from None
        if not isinstance(rows, list):
            raise WritingDataError(f"{path}: expected a JSON list of instructions")
    else:
        rows = _jsonl(path)
    difficulty = _difficulty(path.parent / "instruction_difficulty.csv", len(rows))
    items = [WritingItem(str(r.get("id", i)), _need(r, "instruction", path, i), _need(r, "output", path, i),
                         difficulty=difficulty[i] if difficulty else None) for i, r in enumerate(rows)]
    models = {r.get("generator") for r in rows if r.get("generator")}
    gamed = path.parent / "df_gamed.csv"
    return WritingSet("alpaca_eval", items, str(path), ", ".join(sorted(models)) or None,
                      str(gamed) if gamed.is_file() else None)


def _difficulty(path: Path, n: int) -> list[float] | None:
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    try:
        values = {int(r[0]): float(r[1]) for r in rows[1:] if len(r) >= 2}
    except ValueError as exc:
        raise WritingDataError(f"{path}: expected index,instruction_difficulty rows ({exc})") from None
    if set(range(n)) - set(values):
        raise WritingDataError(f"{path}: no difficulty for every one of the {n} instructions")
    return [values[i] for i in range(n)]


def parse_baselines(spec: str | None) -> str | dict[str, str] | None:
    """``--arena-baseline``: one model, or ``CATEGORY=MODEL,...``."""
    if not spec or "=" not in spec:
        return spec or None
    out = {}
    for part in spec.split(","):
        category, _, model = part.partition("=")
        if not category.strip() or not model.strip():
            raise WritingDataError(f"--arena-baseline {spec!r}: expected MODEL or CATEGORY=MODEL,...")
        out[category.strip()] = model.strip()
    return out


def load_arena_hard(data_dir: str | None, baseline: str | None = None, allow_hub: bool = False) -> WritingSet:
    chosen_baselines = parse_baselines(baseline)
    root = Path(data_dir) if data_dir else None
    folder = next((root / f for f in ARENA_FOLDERS if root and (root / f / "question.jsonl").is_file()), None)
    if folder is None and allow_hub:
        wanted = chosen_baselines or ARENA_V2_BASELINES
        models = tuple(sorted(set(wanted.values()))) if isinstance(wanted, dict) else (wanted,)
        folder = hub_folder("arena_hard", models) / "data" / "arena-hard-v2.0"
    if folder is None:
        raise WritingDataError("arena_hard needs an Arena-Hard-Auto folder (arena-hard-v2.0/ or arena-hard-v0.1/ "
                               "with question.jsonl and model_answer/<baseline>.jsonl) in --data-dir, or "
                               f"--allow-hub to fetch v2.0 from {HUB['arena_hard'][0]}; see docs/evaluation.md")
    answers_dir = folder / "model_answer"
    files = sorted(answers_dir.glob("*.jsonl")) if answers_dir.is_dir() else []
    if chosen_baselines is None:
        if all((answers_dir / f"{m}.jsonl").is_file() for m in ARENA_V2_BASELINES.values()):
            chosen_baselines = dict(ARENA_V2_BASELINES)
        elif len(files) == 1:
            chosen_baselines = files[0].stem
        else:
            raise WritingDataError(f"arena_hard: name the baseline with --arena-baseline (answers in {answers_dir}: "
                                   f"{[f.stem for f in files] or 'none'})")
    models = sorted(set(chosen_baselines.values())) if isinstance(chosen_baselines, dict) else [chosen_baselines]
    answers: dict[str, dict[str, str]] = {}
    for model in models:
        path = answers_dir / f"{model}.jsonl"
        if not path.is_file():
            raise WritingDataError(f"arena_hard: no {path} (answers of the baseline {model!r})")
        answers[model] = {str(row.get("uid", row.get("question_id", ""))): _answer_text(row, path, n)
                          for n, row in enumerate(_jsonl(path))}
    items = []
    for n, q in enumerate(_jsonl(folder / "question.jsonl")):
        qid = str(q.get("uid", q.get("question_id", "")))
        prompt = q.get("prompt") or ((q.get("turns") or [{}])[0].get("content"))
        if not isinstance(prompt, str) or not prompt:
            raise WritingDataError(f"{folder / 'question.jsonl'}: question {n} has no prompt text")
        category = str(q.get("category", "general"))
        if isinstance(chosen_baselines, dict):
            if category not in chosen_baselines:
                raise WritingDataError(f"arena_hard: no baseline for category {category!r} "
                                       f"(--arena-baseline gives {', '.join(chosen_baselines)})")
            model = chosen_baselines[category]
        else:
            model = chosen_baselines
        if qid not in answers[model]:
            raise WritingDataError(f"{answers_dir / (model + '.jsonl')}: no baseline answer for question {qid!r}")
        items.append(WritingItem(qid, prompt, answers[model][qid], category=category))
    reference = (", ".join(f"{c}: {m}" for c, m in chosen_baselines.items()) if isinstance(chosen_baselines, dict)
                 else chosen_baselines)
    return WritingSet("arena_hard", items, str(folder), reference)


def _answer_text(row: dict[str, Any], path: Path, n: int) -> str:
    try:
        if "choices" in row:
            return str(row["choices"][0]["turns"][0]["content"])
        content = row["messages"][-1]["content"]
        return str(content["answer"] if isinstance(content, dict) else content)
    except (KeyError, IndexError, TypeError):
        raise WritingDataError(f"{path}: answer {n} is in neither Arena-Hard layout") from None


def load_graded(data_dir: str | None) -> WritingSet:
    path = Path(data_dir) / "writing.jsonl" if data_dir else None
    source = "data-dir"
    if path is None or not path.is_file():
        path, source = DEMO_WRITING, "afm toy set"
    items = []
    for n, r in enumerate(_jsonl(path)):
        category = str(r.get("category", "general"))
        items.append(WritingItem(str(r.get("id", n)), _need(r, "prompt", path, n), r.get("reference"), category))
    return WritingSet("afm_writing", items, f"{source}: {path}")
