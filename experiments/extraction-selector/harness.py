"""Leave-one-source-out table of the selector from the cached candidate tables, with the
feature table cached (as ``afm extraction`` does) so that a change to the model or the search costs seconds.

Usage: python experiments/extraction-selector/harness.py CACHE_DIR [OUT.tsv]
Same figures as ``afm extraction cv`` (same code: ``afm.filters.extraction.train``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from afm.app.commands.filters.extraction import _table
from afm.filters.extraction import train


def main() -> None:
    cache = Path(sys.argv[1])
    table = _table(str(cache))
    header, out = train.report_rows(train.cross_validate_by_source(table))
    text = "\n".join("\t".join(map(str, r)) for r in [header, *out]) + "\n"
    print(text)
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
