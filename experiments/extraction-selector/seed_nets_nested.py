"""Issue 57: the nested procedure with each sequence net replaced by the mean of several seeds' nets.

    python experiments/extraction-selector/seed_nets_nested.py fit CACHE SEED SOURCES...
    python experiments/extraction-selector/seed_nets_nested.py nested OUT CACHE CACHE...

One net's seed moves the shipped procedure's held-out ScrapingHub margin by 0.016
(``seed-one-nested.txt``), so a single-seed run cannot settle a bar of a few thousandths.
``fit``: the sequence nets on each ``a+b+c`` SOURCES group, fitted with SEED, kept in CACHE
as ``afm extraction blocks cv`` keeps them. CACHE should link the record files and the
trees' fits of the seed-0 cache, so only the nets are new: the records' stamps key the trees,
the seed keys the nets. ``nested``: ``five_sources_net_only.py`` on the first CACHE, with
every net (inner and outer) the mean of the nets fitted on the same sources in every CACHE;
the trees come from the first."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from five_sources_net_only import main as nested_run

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_sequence import SEQUENCE, SequenceNet


class MeanNet:
    """The mean of several nets' block probabilities (one net's interface)."""

    def __init__(self, nets: list[SequenceNet]) -> None:
        self.nets = nets

    def probability(self, x: np.ndarray) -> np.ndarray:
        return np.mean([net.probability(x) for net in self.nets], axis=0)


def fit(cache: Path, seed: int, groups: list[str]) -> None:
    SEQUENCE["seed"] = seed  # in place: block_train keys and fits with this dict
    records = bt.load_records(cache)
    fits = bt.Fits(records, print, cache)
    for group in groups:
        fits.sequence(group.split("+"))


def nested(out: Path, caches: list[Path]) -> None:
    memo: dict[frozenset[str], MeanNet] = {}

    def sequence(self: Any, sources: Any) -> MeanNet:
        key = frozenset(sources)
        if key not in memo:
            name = "+".join(sorted(key))
            paths = [next(c.glob(f"seq-{name}-*.json")) for c in caches]
            memo[key] = MeanNet([SequenceNet.from_json(json.loads(p.read_text())) for p in paths])
        return memo[key]

    bt.Fits.sequence = sequence  # type: ignore[method-assign]
    nested_run(caches[0], out)


if __name__ == "__main__":
    if sys.argv[1] == "fit":
        fit(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
    else:
        nested(Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]])
