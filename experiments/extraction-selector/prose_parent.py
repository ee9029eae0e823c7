"""Issue 57: does a block's place relative to the article's own paragraphs help the block model?

    python experiments/extraction-selector/prose_parent.py CACHE

An article's paragraphs are siblings: one element (or one level of wrappers below it) holds them.
What is set inside the article without being its text (a caption, a boxed promotion, a "what to know"
list, a reporter's credit, an embedded teaser) sits deeper, in a box of its own, or is another kind of
block than the paragraphs. The block features know the deepest container holding 80% of the prose
(``in_prose80``) and each block's own container, not whether the block sits where the paragraphs sit.
Five columns (``PP_NAMES``), from the cached records alone (no new walk): the *prose parent* is the
container that directly holds the most prose words (prose as ``block_features.features`` counts it:
10+ words, link density under 0.3, a sentence mark), found at the blocks' containers (``table.parent``:
a ``<p>``'s is the paragraph itself) or one level up (the element holding the paragraphs), whichever
gathers the larger share (a paragraph in a wrapper of its own is not grouped); then per block the page's
share of prose under it, whether the block sits as the paragraphs do, whether it is inside the prose
parent but not so, how many levels deeper than the paragraphs its container is, and whether its kind
is the paragraphs' (prose-weighted) kind.

A first look with the trees alone at one setting fixed in advance (the shipped file's threshold 0.5 and
page rule: fill >= 0.3, headline dropped, reader comments of 50 words, no fallback), on the same
records with and without the columns: each training source held out from trees of the other three;
Google-Trends (never trained on) scored by trees of all four; Fundus not read. Printed: F1 minus
trafilatura's (defaults, no comments) on the held-out set."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_features import NAMES
from afm.filters.extraction.block_model import PageRule
from afm.filters.extraction.blocks import BlockTable
from afm.filters.extraction.gold import extraction_scores

THRESHOLD = 0.5
RULE = PageRule(fill_below=0.3, drop_headline=True, comment_words=50)
OLD = ("scrapinghub", "trafilatura", "utomo", "wcxb")
UNSEEN = ("googletrends",)
PP_NAMES = ("pp_share", "pp_member", "pp_inside", "pp_steps_off", "pp_kind_match")
MAX_OFF = 5
_COL = {name: j for j, name in enumerate(NAMES)}


def prose_words(x: np.ndarray) -> np.ndarray:
    """Per block, its words where it reads as prose (as ``block_features.features`` counts them)."""
    words = np.expm1(x[:, _COL["log_words"]].astype(np.float64))
    prose = (words >= 10) & (x[:, _COL["link_density"]] < 0.3) & (x[:, _COL["stops_per_word"]] > 0)
    return np.where(prose, words, 0.0)


def pp_columns(table: BlockTable, x: np.ndarray) -> np.ndarray:
    """(blocks, len(PP_NAMES)) for one page."""
    n = len(table)
    out = np.zeros((n, len(PP_NAMES)), dtype=np.float32)
    out[:, 3] = MAX_OFF + 1
    prose = prose_words(x)
    total = prose.sum()
    n_el = len(table.el_parent)
    if n == 0 or total <= 0 or n_el == 0:
        return out
    parent = table.parent.astype(np.int64)
    grand = np.where(parent >= 0, table.el_parent[np.maximum(parent, 0)], -1).astype(np.int64)
    best = None
    for level, anc in ((1, parent), (2, grand)):
        ok = anc >= 0
        direct = np.bincount(anc[ok], weights=prose[ok], minlength=n_el)
        el = int(np.argmax(direct))
        share = direct[el] / total
        if best is None or share > best[2] + 1e-9:
            best = (level, anc, share, el)
    level, anc, share, pp = best  # type: ignore[misc]
    member = anc == pp
    idx = np.arange(n)
    inside = (idx >= table.el_first[pp]) & (idx < table.el_last[pp])
    depth_of_parent = np.where(parent >= 0, table.el_depth[np.maximum(parent, 0)], 0).astype(np.int64)
    off = depth_of_parent - int(table.el_depth[pp]) - (level - 1)
    kinds = table.kind.astype(np.int64)
    weights = np.bincount(kinds[member], weights=prose[member], minlength=int(kinds.max()) + 1)
    main_kind = int(np.argmax(weights))
    out[:, 0] = share
    out[:, 1] = member
    out[:, 2] = inside & ~member
    out[:, 3] = np.where(inside, np.clip(off, -1, MAX_OFF), MAX_OFF + 1)
    out[:, 4] = kinds == main_kind
    return out


def main(cache: Path) -> None:
    records = [r for r in bt.load_records(cache) if r.set.split("-")[0] != "fundus"]
    by = bt.sources_of(records)
    augmented = {i: np.hstack([r.x, pp_columns(r.table, r.x)]) for i, r in enumerate(records)}
    new = np.concatenate([augmented[i][:, -len(PP_NAMES):] for i in range(len(records))])
    print("blocks' mean of each column:", ", ".join(f"{n} {new[:, j].mean():.3f}" for j, n in enumerate(PP_NAMES)),
          flush=True)
    traf = {s: extraction_scores(list(bt.baseline_rows(records, "trafilatura", ix).values()))["f1"]
            for s, ix in by.items()}
    print(f"trees alone, threshold {THRESHOLD}, {bt.describe_rule(RULE)}; F1 minus trafilatura's on the held-out set")
    print("held out        without   with      change   (trafilatura's F1)")
    for held in (*OLD, *UNSEEN):
        idx = [i for s in OLD if s != held for i in by[s]]
        row = []
        for xs in (None, augmented):
            forest = bt.fit_forest(records, idx, bt.STAGE1, xs)
            probs = bt.probabilities(forest, records, by[held], xs)
            f1 = extraction_scores(list(bt.page_rows(records, probs, THRESHOLD, RULE).values()))["f1"]
            row.append(f1 - traf[held])
        print(f"{held:14s}  {row[0]:+.4f}   {row[1]:+.4f}   {row[1] - row[0]:+.4f}   ({traf[held]:.4f})", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
