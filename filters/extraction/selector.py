"""The learned part of extraction: gradient-boosted trees that predict each candidate's
F1 on a page from :mod:`features`, the fast-path gate, and the shipped model file.

The model file (``data/extraction/selector.json``, made by ``afm extraction train``) holds
two tree ensembles, exported from scikit-learn as plain arrays so that extraction needs
numpy only:

* ``fast``: chooses among the cheap candidates (``FAST``) alone;
* ``full``: chooses among every candidate (``FAST`` + ``SLOW``);

and the gate: the slow candidates run only when the cheap ones disagree
(``page_agreement`` below ``gate``), the threshold chosen on the training sets so that a
set share of pages takes the slow path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from afm.errors import UserError

MODEL_PATH = Path(__file__).resolve().parent.parent / "data" / "extraction" / "selector.json"


@dataclass
class TreeEnsemble:
    """Additive regression trees: ``base + rate * sum(tree(x))`` (sklearn's layout:
    node arrays, a leaf has ``left == -1``)."""

    base: float
    rate: float
    trees: list[dict[str, np.ndarray]]

    def predict(self, x: np.ndarray) -> np.ndarray:
        out = np.full(len(x), self.base, dtype=np.float64)
        rows = np.arange(len(x))
        for tree in self.trees:
            node = np.zeros(len(x), dtype=np.int64)
            left, right, feature, threshold = (tree["left"], tree["right"], tree["feature"],
                                               tree["threshold"])
            while True:
                inner = left[node] >= 0
                if not inner.any():
                    break
                go_left = x[rows, np.maximum(feature[node], 0)] <= threshold[node]
                node = np.where(inner, np.where(go_left, left[node], right[node]), node)
            out += self.rate * tree["value"][node]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "rate": self.rate,
                "trees": [{k: v.tolist() for k, v in t.items()} for t in self.trees]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TreeEnsemble:
        kinds = {"left": np.int64, "right": np.int64, "feature": np.int64,
                 "threshold": np.float64, "value": np.float64}
        trees = [{k: np.asarray(t[k], dtype=kinds[k]) for k in kinds} for t in data["trees"]]
        return cls(float(data["base"]), float(data["rate"]), trees)

    @classmethod
    def from_sklearn(cls, model: Any) -> TreeEnsemble:
        """From a fitted ``sklearn.ensemble.GradientBoostingRegressor`` (squared error)."""
        trees = []
        for est in model.estimators_[:, 0]:
            t = est.tree_
            trees.append({"left": t.children_left.copy(), "right": t.children_right.copy(),
                          "feature": t.feature.copy(), "threshold": t.threshold.copy(),
                          "value": t.value[:, 0, 0].copy()})
        base = float(np.ravel(model.init_.constant_)[0])
        return cls(base, float(model.learning_rate), trees)


@dataclass
class Selector:
    """Everything extraction needs to choose: candidate lists, the gate, two models."""

    fast_candidates: tuple[str, ...]
    slow_candidates: tuple[str, ...]
    gate: float  # page_agreement at or above which the cheap candidates decide alone
    fast: TreeEnsemble
    full: TreeEnsemble
    meta: dict[str, Any]

    @property
    def all_candidates(self) -> tuple[str, ...]:
        return self.fast_candidates + self.slow_candidates

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": "afm-extraction-selector/1", "fast_candidates": self.fast_candidates,
                "slow_candidates": self.slow_candidates, "gate": self.gate,
                "fast": self.fast.to_json(), "full": self.full.to_json(), "meta": self.meta}
        path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> Selector:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: cannot read the extraction selector ({exc})") from exc
        if data.get("format") != "afm-extraction-selector/1":
            raise UserError(f"{path}: not an extraction selector file")
        return cls(tuple(data["fast_candidates"]), tuple(data["slow_candidates"]),
                   float(data["gate"]), TreeEnsemble.from_json(data["fast"]),
                   TreeEnsemble.from_json(data["full"]), dict(data.get("meta") or {}))


@lru_cache(maxsize=4)
def load_selector(path: str = str(MODEL_PATH)) -> Selector:
    """The selector at ``path`` (the shipped one by default), loaded once per process."""
    return Selector.load(Path(path))
