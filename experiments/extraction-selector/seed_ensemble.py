"""First look (issue 57): does averaging the sequence nets of three seeds help, held out by source?

    python experiments/extraction-selector/seed_ensemble.py fit CACHE OUT SOURCE...   # per held-out source: nets of seeds 0-2
    python experiments/extraction-selector/seed_ensemble.py report CACHE OUT

``fit``: for each held-out SOURCE, the trees (kept in CACHE as ``afm extraction blocks cv``
keeps them) and the sequence nets of seeds 0, 1 and 2 fitted on the other sources (seed 0
is the cached net; each net also written to OUT). ``report``: per held-out source and set,
F1 margin over trafilatura at the shipped page rule, thresholds 0.5 and 0.6: the trees, the
trees averaged with each seed's net, and with the mean of the three nets. One fit per fold,
fixed settings: a first look, not the nested protocol."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from figures_rule import SHIPPED_RULE as RULE

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_sequence import SEQUENCE, SequenceNet, fit_sequence, mixed
from afm.filters.extraction.gold import extraction_scores

SEEDS = (0, 1, 2)


def load(cache: Path):
    records = bt.load_records(cache)
    return records, bt.Fits(records, lambda m: print(m, flush=True), cache)


def fit(cache: Path, out: Path, helds: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    records, fits = load(cache)
    by = bt.sources_of(records)
    for held in helds:
        train = set(by) - {held}
        fits.get(train)
        idx = [i for s, ix in by.items() if s in train for i in ix]
        for seed in SEEDS:
            path = out / f"seq-{held}-{seed}.json"
            if path.exists():
                continue
            if seed == 0:
                net = fits.sequence(train)
            else:
                t = time.process_time()
                net = fit_sequence(bt.training_pages(records, idx), {**SEQUENCE, "seed": seed})
                print(f"held {held} seed {seed}: {time.process_time() - t:.0f} CPU s", flush=True)
            path.write_text(json.dumps(net.to_json()))

def f1(rows) -> float:
    return extraction_scores(list(rows))["f1"]


def report(cache: Path, out: Path) -> None:
    records, fits = load(cache)
    by = bt.sources_of(records)
    rows: dict = {}
    for held, test in by.items():
        if not all((out / f"seq-{held}-{s}.json").exists() for s in SEEDS):
            continue
        trees = bt.probabilities(fits.get(set(by) - {held}), records, test)
        nets = [SequenceNet.from_json(json.loads((out / f"seq-{held}-{s}.json").read_text()))
                for s in SEEDS]
        p = {i: [n.probability(records[i].x) for n in nets] for i in test}
        variants = {"trees": trees,
                    **{f"mix s{s}": {i: mixed(trees[i], p[i][k]) for i in test} for k, s in enumerate(SEEDS)},
                    "mix mean3": {i: mixed(trees[i], np.mean(p[i], axis=0)) for i in test}}
        for name, probs in variants.items():
            for t in (0.5, 0.6):
                rows[held, name, t] = bt.page_rows(records, probs, t, RULE)
        for name in ("trafilatura", "cascade"):
            rows[held, name, 0] = bt.baseline_rows(records, name, test)
    helds = sorted({k[0] for k in rows})
    for held in helds:
        traf = rows[held, "trafilatura", 0]
        tr = f1(traf.values())
        print(f"== {held}: trafilatura {tr:.4f} cascade {f1(rows[held, 'cascade', 0].values()):.4f}")
        sets = sorted({records[i].set for i in traf})
        for (h, name, t), rs in rows.items():
            if h != held or t == 0:
                continue
            line = f"  {name:10s} {t}: {f1(rs.values()):.4f} ({f1(rs.values()) - tr:+.4f})"
            if len(sets) > 1:
                line += "  | " + " ".join(
                    f"{s.split('-', 1)[-1]}:"
                    f"{f1(v for i, v in rs.items() if records[i].set == s) - f1(v for i, v in traf.items() if records[i].set == s):+.3f}"
                    for s in sets)
            print(line)
    for name in ("trees", *(f"mix s{s}" for s in SEEDS), "mix mean3"):
        for t in (0.5, 0.6):
            print(f"pooled {name:10s} {t}: {f1(v for h in helds for v in rows[h, name, t].values()):.4f}")
    print(f"pooled trafilatura {f1(v for h in helds for v in rows[h, 'trafilatura', 0].values()):.4f} "
          f"cascade {f1(v for h in helds for v in rows[h, 'cascade', 0].values()):.4f}")


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] not in ("fit", "report"):
        sys.exit(__doc__)
    if sys.argv[1] == "fit":
        fit(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])
    else:
        report(Path(sys.argv[2]), Path(sys.argv[3]))
