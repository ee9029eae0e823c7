"""Issue 57: how far does a refit of the trees move held-out margins when one column of noise is added?

    python experiments/extraction-selector/placebo_column.py CACHE [CACHE ...]

The control for ``nearest_signal.py``: the records without the nearest-signal columns, and the same
plus one column of uniform noise (three seeds); the same held-out scheme and setting."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from nearest_signal import OLD, UNSEEN, f1_on, records_without

from afm.filters.extraction import block_train as bt


def main(caches: list[Path]) -> None:
    records, by, without = records_without(caches)
    print("held out        change of F1 with one noise column, seeds 0 1 2")
    for held in (*OLD, *UNSEEN):
        idx = [i for s in OLD if s != held for i in by[s]]
        base = f1_on(records, bt.fit_forest(records, idx, bt.STAGE1, without), by[held], without)
        changes = []
        for seed in range(3):
            rng = np.random.default_rng(seed)
            noisy = {i: np.column_stack([x, rng.random(len(x), dtype=np.float32)]) for i, x in without.items()}
            forest = bt.fit_forest(records, idx, bt.STAGE1, noisy)
            changes.append(f1_on(records, forest, by[held], noisy) - base)
        print(f"{held:14s}  " + "  ".join(f"{c:+.4f}" for c in changes), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main([Path(a) for a in sys.argv[1:]])
