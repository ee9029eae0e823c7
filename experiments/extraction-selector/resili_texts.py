"""Resiliparse's main-content text and CPU seconds per gold page (the cascade's call), for
``unsure_quota.py report CACHE PROBS OUT.pkl``:

    python experiments/extraction-selector/resili_texts.py OUT.pkl SHARED_EVAL WCXB TRAFILATURA UTOMO GOOGLETRENDS
"""
import pickle
import sys
import time
from pathlib import Path

from afm.filters.extraction.candidates import Page, run_candidate
from afm.filters.extraction.gold import load_sets
from afm.filters.extraction.table import decode

sh, wcxb, traf, utomo, gt = map(Path, sys.argv[2:7])
pages = load_sets(scrapinghub=sh, wcxb=wcxb, trafilatura=traf, utomo=utomo, googletrends=gt)
out = {}
for p in pages:
    html = decode(p.body)
    t = time.process_time()
    text = run_candidate("resiliparse", Page(html, p.url))
    out[(p.set, p.id)] = (text, time.process_time() - t)
Path(sys.argv[1]).write_bytes(pickle.dumps(out))
print(len(out), "pages", sum(c for _, c in out.values()) / len(out) * 1000, "ms a page",
      sum(not t for t, _ in out.values()), "empty")
