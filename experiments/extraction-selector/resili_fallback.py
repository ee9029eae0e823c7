"""Issue 57, first look: the block model's page fallback given Resiliparse's main-content text instead of trafilatura's.

    python experiments/extraction-selector/resili_fallback.py CACHE [--source NAME ...]

The fallback hands trafilatura the pages with too few kept words, and trafilatura costs ~5.5x a block page, so a 3%
fallback cost the extractor a fifth of its speed (4.39x against 5.54x). Resiliparse costs under half a block page. This
reruns the nested three-net procedure (``block_train.cross_validate``, the cache's fits) with the fallback's text read
from Resiliparse's column of the cache's baselines; every other choice and the margins' baseline (trafilatura) are as
in ``afm extraction blocks cv --net-only``. A first look, run when the extract stage still fell back to trafilatura; since
2026-12-07 the page rule names its fallback (``PageRule.fallback_to``) and this is ``afm extraction blocks cv --net-only
--fallback resiliparse``, which this script now calls the same way."""

from __future__ import annotations

import sys
from pathlib import Path

from afm.filters.extraction import block_train as bt


def main(cache: Path, sources: list[str]) -> None:
    records = bt.load_records(cache)
    if sources:
        records = [r for r in records if bt.source_of(r.set) in sources]
    missing = sum("resiliparse" not in r.texts for r in records)
    if missing:
        sys.exit(f"{missing} pages lack Resiliparse's text (`afm extraction blocks table` adds it)")
    # every rule's fallback is Resiliparse; the margins' baseline stays trafilatura's text
    results = bt.cross_validate(records, bt.Choice(("mix",), rules=tuple(bt.page_rules(("resiliparse",)))),
                                fits=bt.Fits(records, None, cache))
    header, rows = bt.report_rows(results)
    print("\t".join(header))
    for row in rows:
        print("\t".join(map(str, row)), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    names = [args[i + 1] for i, a in enumerate(args) if a == "--source"]
    main(Path(args[0]), names)
