"""The learned part of extraction: the fast-path gate, the slow path's vote (or the older
gradient-boosted switch model), and the shipped model file.

A page goes through a cascade (``select.py``):

1. the *fast* candidates run (trafilatura's balanced pass without fallbacks and
   Resiliparse: two families, ~15 ms together); when their texts agree (4-token shingle
   Dice overlap at or above ``gate``) the first one's text is the answer: the fast path
   (with ``fast_trim``, less its leading and trailing lines the second one lacks);
2. otherwise the *reference* (trafilatura's default mode, its own readability / jusText
   fallbacks included) runs, then the *voters*; the answer is the reference's text plus
   the lines at least ``min_votes`` voters hold (``vote.py``). A file without voters
   (``min_votes`` = 0) keeps the older rule: gradient-boosted trees predict each of
   ``others``' F1 gain over the reference and the page switches to the best when the
   predicted gain exceeds ``tau`` (``tau`` >= 1: never).

``gate`` is chosen by leave-one-source-out cross-validation on the training sets
(``train.py``): the setting whose worst held-out training source gains most over that
source's best single candidate, the cheapest within noise.

The model file (``data/extraction/selector.json``, made by ``afm extraction train``) is
plain JSON (trees, when there is a switch model, as arrays), so extraction needs numpy only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from afm.errors import UserError
from afm.filters.extraction.trees import Forest

MODEL_PATH = Path(__file__).resolve().parent.parent / "data" / "extraction" / "selector.json"


@dataclass
class TreeEnsemble:
    """Additive regression trees: ``base + rate * sum(tree(x))`` (sklearn's layout:
    node arrays, a leaf has ``left == -1``)."""

    base: float
    rate: float
    trees: list[dict[str, np.ndarray]]

    def predict(self, x: np.ndarray) -> np.ndarray:
        """``base + rate * sum(tree(x))``, walked by the extractor's one :class:`Forest`."""
        forest = self.__dict__.get("_forest")
        if forest is None:
            forest = self.__dict__["_forest"] = Forest.from_node_lists(self.base, self.trees, self.rate)
        return forest.decision(np.asarray(x, dtype=np.float64).reshape(len(x), -1))

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


FORMAT = "afm-extraction-selector/2"


@dataclass
class Selector:
    """Everything extraction needs to choose: the candidates of each stage, the gate, the
    switch margin and the switch model."""

    fast_candidates: tuple[str, ...]  # the first is the fast path's answer
    reference: str  # the slow path's default answer
    others: tuple[str, ...]  # slow candidates the model may switch to
    gate: float  # fast-candidate agreement at or above which the fast path answers
    tau: float  # predicted F1 gain over the reference needed to switch (>= 1: never)
    model: TreeEnsemble | None  # predicts each of ``others``' gain over the reference
    meta: dict[str, Any]
    voters: tuple[str, ...] = ()  # the slow path's vote: candidates beside the reference
    min_votes: int = 0  # voters that must hold a line the reference lacks (0: no vote)
    fast_trim: bool = False  # the fast path drops the edge lines the second fast candidate lacks

    @property
    def votes(self) -> bool:
        """Whether the slow path answers with the vote (else the reference or a switch)."""
        return self.min_votes > 0 and bool(self.voters)

    @property
    def switches(self) -> bool:
        """Whether the slow path can answer other than the reference."""
        return (not self.votes and self.model is not None and bool(self.others)
                and self.tau < 1.0)

    @property
    def all_candidates(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.fast_candidates, self.reference, *self.others,
                                    *self.voters)))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": FORMAT, "fast_candidates": self.fast_candidates,
                "reference": self.reference, "others": self.others, "gate": self.gate,
                "tau": self.tau, "model": self.model.to_json() if self.model else None,
                "voters": self.voters, "min_votes": self.min_votes, "fast_trim": self.fast_trim,
                "meta": self.meta}
        path.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> Selector:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: cannot read the extraction selector ({exc})") from exc
        if data.get("format") != FORMAT:
            raise UserError(f"{path}: not an extraction selector file ({FORMAT})")
        model = TreeEnsemble.from_json(data["model"]) if data.get("model") else None
        return cls(tuple(data["fast_candidates"]), str(data["reference"]),
                   tuple(data["others"]), float(data["gate"]), float(data["tau"]), model,
                   dict(data.get("meta") or {}), tuple(data.get("voters") or ()),
                   int(data.get("min_votes") or 0), bool(data.get("fast_trim")))


@lru_cache(maxsize=4)
def load_selector(path: str = str(MODEL_PATH)) -> Selector:
    """The selector at ``path`` (the shipped one by default), loaded once per process."""
    return Selector.load(Path(path))
