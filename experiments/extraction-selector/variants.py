"""Leave-one-source-out F1 and estimated cost of selector variants (candidate tiers, slow share).

Usage: python experiments/extraction-selector/variants.py CACHE_DIR [variant ...]
Every variant run is printed; the README records all of them, not only the one kept.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from afm.filters.extraction import train
from afm.filters.extraction.table import load_rows

VARIANTS = {
    # name: (fast tier, slow tier, slow share)
    "A": (("traf_recall", "resiliparse", "readability"),
          ("traf_fast", "traf_precision", "traf_fallback", "boilerpipe", "justext"), 0.2),
    "B": (("traf_recall", "resiliparse"),
          ("readability", "traf_precision", "traf_fallback", "justext"), 0.2),
    "C": (("traf_recall", "resiliparse", "readability"), ("traf_fallback", "justext"), 0.2),
    "D": (("traf_recall", "resiliparse", "readability"), ("traf_fallback",), 0.3),
}


def main() -> None:
    cache = Path(sys.argv[1])
    rows = [r for f in sorted(cache.glob("rows-*.jsonl.gz")) for r in load_rows(f)]
    names = sys.argv[2:] or list(VARIANTS)
    for name in names:
        fast, slow, share = VARIANTS[name]
        table = train.build_table(rows, fast, slow)
        results = train.cross_validate_by_source(table, share, fast, slow)
        header, out = train.report_rows(results)
        print(f"\n== variant {name}: fast {fast} slow {slow} share {share}")
        print("\t".join(header))
        for r in out:
            print("\t".join(str(x) for x in r))
        for src in sorted({train.source_of(s) for s in table.sets}):
            idx = [i for i, s in enumerate(table.sets) if train.source_of(s) == src]
            fast_ms = statistics.mean(sum(rows[i]["cpu"].get(c, 0) for c in ("parse", *fast))
                                      for i in idx) * 1000
            slow_ms = statistics.mean(sum(rows[i]["cpu"].get(c, 0) for c in slow) for i in idx) * 1000
            base_ms = statistics.mean(rows[i]["cpu"]["parse"] + rows[i]["cpu"]["traf_fallback"]
                                      for i in idx) * 1000
            share_src = results[src]["slow_share"] if src in results else results[
                next(s for s in results if train.source_of(s) == src)]["slow_share"]
            print(f"cost {src}: fast {fast_ms:.1f} ms + {share_src:.0%} x slow {slow_ms:.1f} ms"
                  f" = {fast_ms + share_src * slow_ms:.1f} ms vs trafilatura default ~{base_ms:.1f} ms")


if __name__ == "__main__":
    main()
