"""Issue 57: the shipped block model's worst pages against trafilatura on one cached set.

    python experiments/extraction-selector/worst_pages.py CACHE SET [N]

Per page of SET in CACHE (``afm extraction blocks table``), the shipped ``blocks.json``'s F1
minus trafilatura's; for the N worst, the words kept wrongly and missed and the longest
such blocks with their probability and label: what a page type loses, read before a rule
or a feature is written for it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_model import BlockModel, render
from afm.filters.extraction.gold import counts, extraction_scores, page_f1


def main(cache: Path, name: str, n: int) -> None:
    model = BlockModel.load()
    records = [r for r in bt.load_records(cache) if r.set == name]
    rows, traf_rows, pages = [], [], []
    for r in records:
        p = model.probability(r.table)
        keep = model.rule.adjust(r.table, p, p >= model.threshold)
        text = render(r.table, keep)
        if model.rule.falls_back(text):
            text = r.texts.get(model.rule.fallback_to, "")  # the extractor the rule names
        row, traf = counts(r.page, text), counts(r.page, r.texts.get("trafilatura", ""))
        rows.append(row)
        traf_rows.append(traf)
        pages.append((page_f1(row) - page_f1(traf), r, p, keep))
    print("blocks", extraction_scores(rows), "trafilatura", extraction_scores(traf_rows), len(records))
    for delta, r, p, keep in sorted(pages, key=lambda t: t[0])[:n]:
        wrong, missed = keep & (r.label < 0.5), ~keep & (r.label >= 0.5)
        print(f"\n=== {r.id} {delta:+.3f}  words kept wrongly {int(r.tokens[wrong].sum())}, missed "
              f"{int(r.tokens[missed].sum())}, kept rightly {int(r.tokens[keep & (r.label >= 0.5)].sum())}")
        for what, mask in (("KEPT", wrong), ("MISS", missed)):
            for i in sorted(np.flatnonzero(mask & (r.tokens >= 4)), key=lambda i: -r.tokens[i])[:4]:
                print(f"  {what} p={p[i]:.2f} label={r.label[i]:.2f} words={int(r.tokens[i])} | "
                      f"{' '.join(r.table.texts[i].split())[:120]!r}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 15)
