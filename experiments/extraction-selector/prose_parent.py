"""Issue 57: does a block's place relative to the article's own paragraphs help the block model?

    python experiments/extraction-selector/prose_parent.py CACHE

An article's paragraphs are siblings: one element (or one level of wrappers below it) holds them.
What is set inside the article without being its text (a caption, a boxed promotion, a "what to know"
list, a reporter's credit, an embedded teaser) sits deeper, in a box of its own, or is another kind of
block than the paragraphs. The block features know the deepest container holding 80% of the prose
(``in_prose80``) and each block's own container, not whether the block sits where the paragraphs sit.
Five columns (``PROSE_PARENT_NAMES``, ``block_features.prose_parent_signals`` since the first look
passed), from the cached records alone (no new walk): the *prose parent* is the
container that directly holds the most prose words (prose as ``block_features.features`` counts it:
10+ words, link density under 0.3, a sentence mark), found at the blocks' containers (``table.parent``:
a ``<p>``'s is the paragraph itself) or one level up (the element holding the paragraphs), whichever
gathers the larger share (a paragraph in a wrapper of its own is not grouped); then per block the page's
share of prose under it, whether the block sits as the paragraphs do, whether it is inside the prose
parent but not so, how many levels deeper than the paragraphs its container is, and whether its kind
is the paragraphs' (prose-weighted) kind.

A first look with the trees alone (``trees_first_look.compare``), on the records without and with the
columns (records made since carry them: they are taken off for the "without" rows)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from trees_first_look import compare

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_features import NAMES, PROSE_PARENT_NAMES, prose_parent_signals

_COL = {name: j for j, name in enumerate(NAMES)}


def prose_words(x: np.ndarray) -> np.ndarray:
    """Per block, its words where it reads as prose, read back from the float32 rows as the first
    look did (the package's ``features`` counts them exactly: a block of exactly 10 words can differ)."""
    words = np.expm1(x[:, _COL["log_words"]].astype(np.float64))
    prose = (words >= 10) & (x[:, _COL["link_density"]] < 0.3) & (x[:, _COL["stops_per_word"]] > 0)
    return np.where(prose, words, 0.0)


def main(cache: Path) -> None:
    records = [r for r in bt.load_records(cache) if r.set.split("-")[0] != "fundus"]
    # the rows without the columns (the records now carry them), and with the first look's version
    base = [i for i, name in enumerate(NAMES) if name not in PROSE_PARENT_NAMES]
    for r in records:
        r.x = r.x[:, base]
    augmented = {i: np.hstack([r.x, prose_parent_signals(r.table, prose_words(r.x)).astype(np.float32)])
                 for i, r in enumerate(records)}
    new = np.concatenate([augmented[i][:, -len(PROSE_PARENT_NAMES):] for i in range(len(records))])
    print("blocks' mean of each column:",
          ", ".join(f"{n} {new[:, j].mean():.3f}" for j, n in enumerate(PROSE_PARENT_NAMES)), flush=True)
    compare(records, augmented)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
