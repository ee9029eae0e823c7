"""First look (issue 57, 2026-12-07): a fixed share of pages, those the block model is least sure of,
handed to trafilatura. Each of the four training sources is held out from trees + three nets fitted on
the other three, at the setting its three-net nested run chose (`blocks-cv-three-nets.tsv`); the most
uncertain share ``q`` of pages by the "band" measure (`uncertain_fallback.py`: words within 0.15 of the
threshold over kept words, the words being the block's whitespace words from its feature row) goes to
trafilatura's cached text. The cut is the (1 - q) quantile over the *other* sources' held-out pages, so
q is a speed budget, not an F1 choice. Google-Trends is scored by the shipped file (fitted on the four),
at its setting, with the cut over the four. `unsure-quota-first-look.txt` holds the output.

    python experiments/extraction-selector/unsure_quota.py fit CACHE PROBS.pkl     # fits kept in CACHE
    python experiments/extraction-selector/unsure_quota.py report CACHE PROBS.pkl
    python experiments/extraction-selector/unsure_quota.py report CACHE PROBS.pkl RESILIPARSE.pkl  # resili_texts.py's
"""
import pickle
import sys
from pathlib import Path

import numpy as np
from uncertain_fallback import uncertainty

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_features import NAMES
from afm.filters.extraction.block_model import PageRule, load_block_model
from afm.filters.extraction.block_sequence import mixed
from afm.filters.extraction.gold import counts, extraction_scores

OLD = ("scrapinghub", "trafilatura", "utomo", "wcxb")
SETTING = {  # the three-net nested run's outer choices
    "scrapinghub": (0.6, PageRule(0.2, None, None, True, None)),
    "trafilatura": (0.4, PageRule(0.2, None, 1, True, None)),
    "utomo": (0.6, PageRule(0.3, None, 20, True, None)),
    "wcxb": (0.5, PageRule(None, None, 50, True, None)),
    "googletrends": (0.5, PageRule(0.3, None, None, True, 50)),  # the shipped file's
}
WORDS = NAMES.index("log_words")  # the words the extractor sees per block (whitespace-split)
QS = (0.0, 0.01, 0.02, 0.03, 0.05)


def fit(cache: Path, out: Path) -> None:
    records = bt.load_records(cache)
    fits = bt.Fits(records, lambda m: print(m, flush=True), cache)
    by = bt.sources_of(records)
    probs = {}
    for held in OLD:
        train = set(OLD) - {held}
        forest = fits.get(train)
        nets = fits.sequence(train)
        tp = bt.probabilities(forest, records, by[held])
        for i in by[held]:
            probs[i] = (tp[i], nets.probability(records[i].x))
        print("held out", held, flush=True)
    shipped = load_block_model()  # fitted on the four: Google-Trends is scored by it
    for i in by["googletrends"]:
        x = shipped.own_columns(records[i].x)
        probs[i] = (shipped.forest.probability(x) if len(x) else np.zeros(0),
                    shipped.sequence.probability(x) if len(x) else np.zeros(0))
    out.write_bytes(pickle.dumps(probs))


def report(cache: Path, pk: Path, fallback_texts: Path | None = None) -> None:
    """``fallback_texts``: a pickle of {(set, id): (text, cpu_s)} of another fallback
    extractor (``resili_texts.py``); the pages sent score its text instead of trafilatura's."""
    records = bt.load_records(cache)
    probs = pickle.loads(pk.read_bytes())
    by = bt.sources_of(records)
    other = pickle.loads(fallback_texts.read_bytes()) if fallback_texts else None
    mix, band, rows, traf, sent_rows = {}, {}, {}, {}, {}
    for s, ix in by.items():
        th, rule = SETTING[s]
        for i in ix:
            t, n = probs[i]
            mix[i] = mixed(t, n)
            band[i] = uncertainty("band", th, mix[i], np.expm1(records[i].x[:, WORDS]) if len(t) else np.zeros(0), t, n)
        rows.update(bt.page_rows(records, {i: mix[i] for i in ix}, th, rule))
        traf.update(bt.baseline_rows(records, "trafilatura", ix))
        for i in ix:
            sent_rows[i] = (counts(records[i].page, other[records[i].set, records[i].id][0])
                            if other else traf[i])
    print("F1 minus trafilatura's (share of pages sent by the quota); pool over the old four")
    for q in QS:
        cells, pooled = [], []
        for s, ix in by.items():
            others = [i for o in OLD if o != s for i in by[o]]
            cut = float(np.quantile([band[i] for i in others], 1 - q)) if q else np.inf
            sent = [i for i in ix if band[i] > cut]
            chosen = [sent_rows[i] if band[i] > cut else rows[i] for i in ix]
            f1 = extraction_scores(chosen)["f1"]
            t1 = extraction_scores([traf[i] for i in ix])["f1"]
            cells.append(f"{s} {f1 - t1:+.4f} ({len(sent) / len(ix):.3f})")
            if s in OLD:
                pooled += chosen
        every = [i for ix in by.values() for i in ix]
        cut4 = float(np.quantile([band[i] for s in OLD for i in by[s]], 1 - q)) if q else np.inf
        tc = sum(records[i].cpu.get("trafilatura", 0.0) for i in every)
        bc = sum(records[i].cpu.get(k, 0.0) for i in every for k in ("decode", "blocks", "features"))
        extra = sum(other[records[i].set, records[i].id][1] if other else records[i].cpu.get("trafilatura", 0.0)
                    for i in every if band[i] > cut4)
        speed = f"  cache cpu: traf / (blocks + fallback on sent) {tc / (bc + extra):.2f}x" if bc else ""
        print(f"q={q:.2f}  " + "  ".join(cells) + f"  pool {extraction_scores(pooled)['f1']:.4f}"
              + speed, flush=True)


if __name__ == "__main__":
    cmd, cache, pk = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if cmd == "fit":
        fit(cache, pk)
    else:
        report(cache, pk, Path(sys.argv[4]) if len(sys.argv) > 4 else None)
