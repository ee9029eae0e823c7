"""The trees' walk in C (``filters/extraction/_treewalk.c``) gives the numpy walk's scores bit
for bit, which stays the fallback and the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from afm.filters.extraction import trees
from afm.filters.extraction.trees import Forest, compiled_walk

needs_compiled = pytest.mark.skipif(not compiled_walk(),
                                    reason="the C tree walk is not built in this install (no C compiler?)")


def _grow(tree: dict[str, list], rng: np.random.Generator, features: int, depth: int = 0) -> int:
    """One node of a random tree (sklearn's layout, a leaf's ``left`` -1), its children grown
    after it; its index."""
    k = len(tree["left"])
    for col in tree.values():
        col.append(0)
    if depth >= 6 or (depth > 0 and rng.random() < 0.3):
        tree["left"][k] = tree["right"][k] = -1
        tree["value"][k] = float(rng.normal())
        return k
    tree["feature"][k] = int(rng.integers(features))
    tree["threshold"][k] = float(rng.choice([-1.0, 0.0, 0.5, 1.0 / 3.0, 2.0]))
    tree["left"][k] = _grow(tree, rng, features, depth + 1)
    tree["right"][k] = _grow(tree, rng, features, depth + 1)
    return k


def _random_forest(rng: np.random.Generator, n_trees: int, features: int) -> Forest:
    """Trees of random shape (leaves at every depth up to 6), thresholds drawn from a few
    values so features meet them exactly."""
    trees_ = []
    for _ in range(n_trees):
        tree: dict[str, list] = {k: [] for k in ("left", "right", "feature", "threshold", "value")}
        _grow(tree, rng, features)
        trees_.append({k: np.array(v) for k, v in tree.items()})
    return Forest.from_node_lists(0.25, trees_, scale=0.1)


@needs_compiled
def test_compiled_walk_gives_the_numpy_walks_scores_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    for n_trees, rows in ((1, 1), (7, 33), (40, 200), (100, 65)):  # chunk edges included
        forest = _random_forest(rng, n_trees, 6)
        x = rng.choice([-1.0, 0.0, 0.5, 1.0 / 3.0, 2.0, 3.0], size=(rows, 6)).astype(np.float32)
        x[rng.random(x.shape) < 0.05] = np.nan  # NaN goes left in both (no comparison is true)
        assert np.array_equal(forest.decision(x), forest.decision(x, compiled=False))
    assert forest.decision(np.zeros((0, 6), np.float32)).shape == (0,)
    # float64 and non-contiguous input are converted as the numpy walk converts them
    wide = rng.normal(size=(20, 12))[:, ::2]
    assert np.array_equal(forest.decision(wide), forest.decision(wide, compiled=False))


@needs_compiled
def test_compiled_walk_on_the_shipped_model_and_real_pages(shared_eval: Path) -> None:
    from afm.filters.extraction.block_features import features
    from afm.filters.extraction.block_model import load_block_model
    from afm.filters.extraction.blocks import page_blocks
    from afm.filters.extraction.decode import decode_html
    from afm.filters.extraction.gold import load_scrapinghub

    forest = load_block_model().forest
    for page in load_scrapinghub(shared_eval, limit=60):
        x = features(page_blocks(decode_html(page.body)[0]))
        assert np.array_equal(forest.decision(x), forest.decision(x, compiled=False))


@needs_compiled
def test_a_corrupt_forest_is_an_error_not_a_read_outside_the_arrays() -> None:
    from afm.filters.extraction import _treewalk  # type: ignore[attr-defined]

    forest = _random_forest(np.random.default_rng(1), 3, 4)
    feature, threshold, children, value = forest._flat()
    x, out = np.zeros((2, 4), np.float32), np.empty(2)
    n_trees, width = forest.feature.shape
    bad = feature.copy()
    bad[0] = 9  # a feature the rows do not have
    with pytest.raises(ValueError, match="out of range"):
        _treewalk.decision(bad, threshold, children, value, x, out, n_trees, width, 2, 4, forest.depth, 0.0)
    with pytest.raises(ValueError, match="expected"):
        _treewalk.decision(feature, threshold, children, value, x[:1], out, n_trees, width, 2, 4,
                           forest.depth, 0.0)


def test_the_numpy_walk_is_used_where_no_extension_was_built(monkeypatch) -> None:
    forest = _random_forest(np.random.default_rng(2), 5, 3)
    x = np.random.default_rng(3).normal(size=(9, 3)).astype(np.float32)
    want = forest.decision(x, compiled=False)
    monkeypatch.setattr(trees, "_c_walk", lambda: None)
    assert np.array_equal(forest.decision(x), want)


def test_the_install_builds_the_compiled_tree_walk_where_a_compiler_is(can_build_c) -> None:
    """The extension is optional in setup.py, so a broken build would pass silently."""
    assert compiled_walk()
