"""The safety prompt sets: harmful requests (should be refused) and safe prompts that look
unsafe (should be answered).

* ``safety_harmbench``: HarmBench's standard behaviours (Mazeika et al. 2024, MIT): the
  full ``harmbench_behaviors_text_all.csv`` (or ``_test`` / ``_val``) from ``--data-dir``,
  else the 100-behaviour sample afm ships; violation rate per semantic category
  (chemical_biological, illegal, misinformation_disinformation, harassment_bullying,
  cybercrime_intrusion, harmful) - the report's harmful-content and sensitive-topic axes.
* ``safety_xstest``: XSTest's 200 unsafe contrast prompts (Röttger et al. 2024, CC-BY-4.0):
  violation rate per type.
* ``overrefusal_xstest``: XSTest's 250 safe prompts that resemble unsafe ones: refusal
  (over-refusal) rate per type.

XSTest's ``xstest_prompts.csv`` in ``--data-dir`` replaces the shipped copy. A ``--limit``
takes prompts round-robin over the categories (:func:`spread`), so a short run still sees
every kind of prompt.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from afm.evaluation.posttrain.files import PosttrainDataError

DATA = Path(__file__).resolve().parents[2] / "data" / "safety"
HARMBENCH_FILES = ("harmbench_behaviors_text_all.csv", "harmbench_behaviors_text_test.csv",
                   "harmbench_behaviors_text_val.csv")


class SafetyDataError(PosttrainDataError):
    """A safety prompt file that is missing or not in its publisher's layout."""


@dataclass(frozen=True)
class SafetyItem:
    id: str
    prompt: str
    category: str
    harmful: bool  # True: the right answer is a refusal


@dataclass(frozen=True)
class SafetySet:
    task: str
    items: list[SafetyItem]
    source: str

    @property
    def harmful(self) -> bool:
        return self.items[0].harmful if self.items else True


def spread(items: list[SafetyItem], n: int) -> list[SafetyItem]:
    """``n`` items taken in turn from each category (file order within a category)."""
    by_cat: dict[str, list[SafetyItem]] = {}
    for it in items:
        by_cat.setdefault(it.category, []).append(it)
    queues = list(by_cat.values())
    out: list[SafetyItem] = []
    depth = 0
    while len(out) < min(n, len(items)):
        for q in queues:
            if depth < len(q) and len(out) < n:
                out.append(q[depth])
        depth += 1
    return out


def _rows(path: Path, needed: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise SafetyDataError(f"{path}: not a readable CSV ({exc})") from None
    missing = [c for c in needed if rows and c not in rows[0]]
    if not rows or missing:
        raise SafetyDataError(f"{path}: expected columns {list(needed)} (missing {missing or 'rows'})")
    return rows


def _find(data_dir: str | None, names: tuple[str, ...], shipped: str) -> tuple[Path, str]:
    for name in names:
        if data_dir and (Path(data_dir) / name).is_file():
            return Path(data_dir) / name, "data-dir"
    return DATA / shipped, "afm shipped copy" if shipped == "xstest_prompts.csv" else "afm sample (100 behaviours)"


def load(task: str, data_dir: str | None) -> SafetySet:
    if task == "safety_harmbench":
        path, source = _find(data_dir, HARMBENCH_FILES, "harmbench_behaviors_sample.csv")
        rows = _rows(path, ("Behavior", "FunctionalCategory", "SemanticCategory", "BehaviorID"))
        items = [SafetyItem(r["BehaviorID"], r["Behavior"], r["SemanticCategory"], True) for r in rows
                 if r["FunctionalCategory"] == "standard"]  # contextual / copyright need their context strings
    elif task in ("safety_xstest", "overrefusal_xstest"):
        path, source = _find(data_dir, ("xstest_prompts.csv", "xstest_v2_prompts.csv"), "xstest_prompts.csv")
        rows = _rows(path, ("id", "prompt", "type", "label"))
        want = "unsafe" if task == "safety_xstest" else "safe"
        items = [SafetyItem(r["id"], r["prompt"], r["type"], want == "unsafe") for r in rows if r["label"] == want]
    else:
        raise SafetyDataError(f"unknown safety task {task!r}")
    if not items:
        raise SafetyDataError(f"{path}: no prompts for {task}")
    return SafetySet(task, items, f"{source}: {path}")
