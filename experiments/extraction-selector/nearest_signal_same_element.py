"""Issue 57: the nearest-signal columns' second form, a negative name on the content element itself counted as inside it.

    python experiments/extraction-selector/nearest_signal_same_element.py CACHE [CACHE ...]

The same test as ``nearest_signal.py`` (whose table gives the first form) (trees alone, the shipped threshold and page rule; each old source
held out; Fundus and Google-Trends scored by trees of all four), the three "inside content" flags read with
``>=`` (BEM names such as ``article__related`` put both words on one element), computed from the records'
stored innermost depths."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from nearest_signal import OLD, UNSEEN, f1_on

from afm.filters.extraction import block_features as bf
from afm.filters.extraction import block_train as bt
from afm.filters.extraction.gold import extraction_scores


def same_element_form(table: object, x: np.ndarray) -> np.ndarray:
    near = table.nearest.astype(np.int64)  # type: ignore[attr-defined]
    neg = near[:, bf._NEG_SIGNALS].max(axis=1)
    content = near[:, bf._CONTENT_SIGNALS].max(axis=1)
    out = x.copy()
    col = len(bf.NAMES) - len(bf.NEAREST_NAMES)
    for j, inner in enumerate((neg, near[:, bf._META], near[:, bf._COMMENT])):
        out[:, col + j] = (content > 0) & (inner >= content)
    return out


def main(caches: list[Path]) -> None:
    records = [r for c in caches for r in bt.load_records(c)]
    by = bt.sources_of(records)
    width = len(bf.NAMES) - len(bf.NEAREST_NAMES)
    forms = {"without": {i: r.x[:, :width] for i, r in enumerate(records)},
             "second form": {i: same_element_form(r.table, r.x) for i, r in enumerate(records)}}
    traf = {s: extraction_scores(list(bt.baseline_rows(records, "trafilatura", ix).values()))["f1"]
            for s, ix in by.items()}
    print("F1 minus trafilatura's on the held-out set; trees alone")
    print("held out        " + "   ".join(f"{f:>11s}" for f in forms))
    for held in (*OLD, *UNSEEN):
        idx = [i for s in OLD if s != held for i in by[s]]
        row = [f1_on(records, bt.fit_forest(records, idx, bt.STAGE1, xs), by[held], xs) - traf[held]
               for xs in forms.values()]
        print(f"{held:14s}  " + "   ".join(f"{v:+11.4f}" for v in row), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main([Path(a) for a in sys.argv[1:]])
