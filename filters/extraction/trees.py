"""Additive regression trees evaluated together: the one tree walk of extraction.

:class:`Forest` holds every tree of a boosted ensemble as padded node arrays and walks them
all at once, one numpy gather per tree level, or in C (``_treewalk.c``, built by the
package's install; the same output bit for bit, under a third of the time on a page's blocks). The
block extractor's model (a ``HistGradientBoostingClassifier``) and the selector's gain model
(a ``GradientBoostingRegressor``, :meth:`Forest.from_node_lists`) are both evaluated by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np


@cache
def _c_walk() -> Any:
    """The compiled walk (``_treewalk.c``), or None where the install built no extension."""
    try:
        from afm.filters.extraction import _treewalk  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _treewalk


def compiled_walk() -> bool:
    """Whether :meth:`Forest.decision` walks the trees in C."""
    return _c_walk() is not None


def _floor32(x: np.ndarray) -> np.ndarray:
    """The largest float32 at or below each value (``v <= t`` for float32 ``v`` is then
    the same test in float32 as in float64)."""
    y = x.astype(np.float32)
    over = y.astype(np.float64) > x
    y[over] = np.nextafter(y[over], np.float32(-np.inf))
    return y


@dataclass
class Forest:
    """Additive binary trees evaluated together: ``base + sum_t leaf_t(x)``. Trees are
    padded to one node count; a leaf has ``left == -1``; ``x[feature] <= threshold`` goes
    left."""

    base: float
    feature: np.ndarray  # (trees, nodes) int
    threshold: np.ndarray  # (trees, nodes) float
    left: np.ndarray  # (trees, nodes) int
    right: np.ndarray  # (trees, nodes) int
    value: np.ndarray  # (trees, nodes) float
    depth: int  # the deepest leaf's depth: the number of steps down

    def decision(self, x: np.ndarray, compiled: bool = True) -> np.ndarray:
        """The raw score of each row of ``x``: every tree walked at once, one level per
        step, on flat arrays (a node's id is ``tree * nodes + node``; its children sit at
        ``2 * id`` and ``2 * id + 1`` of one array; a leaf's children are itself, so rows
        that reached a leaf stay there). In C when built (``compiled=False``: numpy, the
        reference the C walk is tested against)."""
        n_trees, width = self.feature.shape
        n, n_features = x.shape
        if n == 0:
            return np.zeros(0)
        feature, threshold, children, value = self._flat()
        walk = _c_walk() if compiled else None
        if walk is not None:
            out = np.empty(n)
            walk.decision(feature, threshold, children, value, np.ascontiguousarray(x, dtype=np.float32),
                          out, n_trees, width, n, n_features, self.depth, float(self.base))
            return out
        values = np.ascontiguousarray(x, dtype=np.float32).ravel()
        node = np.repeat(np.arange(n_trees, dtype=np.int32) * width, n)  # tree-major
        row_base = np.tile(np.arange(n, dtype=np.int32) * n_features, n_trees)
        for _ in range(self.depth):
            right = values.take(row_base + feature.take(node)) > threshold.take(node)
            node = children.take(2 * node + right)
        return self.base + value.take(node).reshape(n_trees, n).sum(axis=0)

    def _flat(self) -> tuple[np.ndarray, ...]:
        cached = getattr(self, "_flat_cache", None)
        if cached is not None:
            return cached
        n_trees, width = self.feature.shape
        ids = np.arange(n_trees * width).reshape(n_trees, width)
        offset = (np.arange(n_trees) * width)[:, None]
        leaf = self.left < 0
        children = np.stack([np.where(leaf, ids, self.left + offset).ravel(),
                             np.where(leaf, ids, self.right + offset).ravel()], axis=1)
        # float32 thresholds compared with float32 features: the split a float64 threshold
        # makes between two float32 values is kept by rounding it down to float32.
        cached = (self.feature.ravel().astype(np.int32), _floor32(self.threshold).ravel(),
                  children.ravel().astype(np.int32),
                  np.ascontiguousarray(self.value.ravel(), dtype=np.float64))
        object.__setattr__(self, "_flat_cache", cached)
        return cached

    def probability(self, x: np.ndarray, compiled: bool = True) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.decision(x, compiled)))

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "depth": self.depth,
                **{k: getattr(self, k).tolist() for k in ("feature", "threshold", "left",
                                                           "right", "value")}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Forest:
        arr = {k: np.asarray(data[k], dtype=np.int64 if k in ("feature", "left", "right")
                             else np.float64) for k in ("feature", "threshold", "left", "right",
                                                        "value")}
        return cls(float(data["base"]), depth=int(data["depth"]), **arr)

    @classmethod
    def from_sklearn(cls, model: Any) -> Forest:
        """From a fitted ``HistGradientBoostingClassifier`` (binary, no missing values in
        the features): its trees' nodes re-laid as padded arrays."""
        trees = [pred[0].nodes for pred in model._predictors]
        width = max(len(t) for t in trees)
        shape = (len(trees), width)
        feature, left, right = (np.zeros(shape, np.int64), np.full(shape, -1, np.int64),
                                np.full(shape, -1, np.int64))
        threshold, value = np.zeros(shape), np.zeros(shape)
        depth = 0
        for t, nodes in enumerate(trees):
            k = len(nodes)
            leaf = nodes["is_leaf"].astype(bool)
            feature[t, :k] = np.where(leaf, 0, nodes["feature_idx"].astype(np.int64))
            threshold[t, :k] = np.where(leaf, 0.0, nodes["num_threshold"])
            left[t, :k] = np.where(leaf, -1, nodes["left"].astype(np.int64))
            right[t, :k] = np.where(leaf, -1, nodes["right"].astype(np.int64))
            value[t, :k] = np.where(leaf, nodes["value"], 0.0)
            depth = max(depth, int(nodes["depth"].max()))
        base = float(np.ravel(model._baseline_prediction)[0])
        return cls(base, feature, threshold, left, right, value, depth)

    @classmethod
    def from_node_lists(cls, base: float, trees: Sequence[dict[str, np.ndarray]],
                        scale: float = 1.0) -> Forest:
        """From trees in sklearn's per-tree layout (``left``, ``right``, ``feature``,
        ``threshold``, ``value`` arrays; a leaf has ``left == -1``), each leaf value times
        ``scale`` (a learning rate)."""
        width = max((len(t["left"]) for t in trees), default=1)
        shape = (max(len(trees), 1), width)
        feature, left, right = (np.zeros(shape, np.int64), np.full(shape, -1, np.int64),
                                np.full(shape, -1, np.int64))
        threshold, value = np.zeros(shape), np.zeros(shape)
        depth = 0
        for t, tree in enumerate(trees):
            k = len(tree["left"])
            leaf = np.asarray(tree["left"]) < 0
            feature[t, :k] = np.where(leaf, 0, tree["feature"])
            threshold[t, :k] = np.where(leaf, 0.0, tree["threshold"])
            left[t, :k] = np.where(leaf, -1, tree["left"])
            right[t, :k] = np.where(leaf, -1, tree["right"])
            value[t, :k] = np.where(leaf, np.asarray(tree["value"]) * scale, 0.0)
            depth = max(depth, _depth(left[t], right[t]))
        return cls(float(base), feature, threshold, left, right, value, depth)


def _depth(left: np.ndarray, right: np.ndarray) -> int:
    """The number of steps from the root (node 0) down to the deepest leaf."""
    deepest, level, frontier = 0, 0, [0]
    while frontier:
        deepest = level
        frontier = [c for n in frontier if left[n] >= 0 for c in (left[n], right[n])]
        level += 1
    return deepest
