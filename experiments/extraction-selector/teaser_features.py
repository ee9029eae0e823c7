"""Issue 57: block features of repeated linked items (teaser and "more from" lists), first look.

    python experiments/extraction-selector/teaser_features.py CACHE OUT fit HELD...   # fits, one process per core
    python experiments/extraction-selector/teaser_features.py CACHE OUT report
    python experiments/extraction-selector/teaser_features.py CACHE OUT prefit A+B+C ...   # the nested run's fits
    python experiments/extraction-selector/teaser_features.py CACHE OUT nested

The five-source run loses on ScrapingHub and Google-Trends mostly where related-story teasers
and "more from" lists are kept: each teaser block is confident alone, and what gives it away is
the page around it, a run of sibling items that each open with a link. Three columns are added
to every block's features, from the page's block table alone (no new walk):

* a container is an *item* when it holds 1-6 blocks and its first block is at least half link
  characters (a linked headline, with or without a kicker, an excerpt, a date);
* a container is a *group* when at least 3 of its child containers are items and they are at
  least half of its child containers (a list of cards, not a body with one linked paragraph);
* per block, the nearest of its container and the three above it that is an item of a group
  gives log1p(the group's items), log1p(the group's words per item) and the group's link share
  (all 0 where there is none).

The definition and the decision rule were written before any figure
(``teaser-first-look.txt`` quotes the rule). ``fit``: each held-out source's trees and three
nets (seeds 0-2) on the other sources of CACHE, with the columns, kept in ``OUT/fits``.
``report``: each held-out source's margin over trafilatura at the settings the five-source
three-net nested run chose for that fold (``main_container.FOLDS["five"]``), with and without
the columns (without: CACHE's own fits), and the pool over the four old sources.
``prefit``: trees and nets on each named group of sources; ``nested``:
``five_sources_net_only.py``'s nested run with the columns (the block model computing them
from each held-out page's table as the extractor would), into OUT."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from five_sources_net_only import nested_table
from main_container import FOLDS, fold_probabilities

from afm.filters.extraction import block_model
from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_features import NAMES, features
from afm.filters.extraction.blocks import BlockTable, container_totals
from afm.filters.extraction.gold import extraction_scores

NEW_SOURCE = "googletrends"
ITEM_BLOCKS = 6  # an item holds at most this many blocks
LEAD_LINK = 0.5  # and its first block is at least this share link characters
GROUP_ITEMS = 3  # a group has at least this many item children
GROUP_SHARE = 0.5  # which are at least this share of its child containers
LEVELS = 4  # the block's container and the three above it
TEASER_NAMES = ("teaser_log_items", "teaser_log_item_words", "teaser_link_share")
_WORDS, _LINK = NAMES.index("log_words"), NAMES.index("link_density")


def teaser_columns(table: BlockTable, x: np.ndarray) -> np.ndarray:
    """(blocks, 3) teaser columns of one page (see the module's docstring)."""
    n, m = len(table), len(table.el_first)
    out = np.zeros((n, len(TEASER_NAMES)), dtype=np.float32)
    if n == 0 or m == 0:
        return out
    words = np.rint(np.expm1(x[:, _WORDS].astype(np.float64)))
    link = x[:, _LINK].astype(np.float64)
    chars = np.array([len(t) for t in table.texts], dtype=np.float64)
    first, last = table.el_first, table.el_last
    size = last - first
    lead = np.where(size > 0, link[np.minimum(first, n - 1)], 0.0)
    item = (size >= 1) & (size <= ITEM_BLOCKS) & (lead >= LEAD_LINK)
    parent = table.el_parent
    has = parent >= 0
    children = np.bincount(parent[has], minlength=m)
    items = np.bincount(parent[has], weights=item[has], minlength=m)
    group = (items >= GROUP_ITEMS) & (items >= GROUP_SHARE * children)
    totals = container_totals(table, np.column_stack([words, link * chars, chars]))
    per_item = totals[:, 0] / np.maximum(items, 1.0)
    share = totals[:, 1] / np.maximum(totals[:, 2], 1.0)
    found = np.full(n, -1)
    c = table.parent.astype(np.int64)
    for _ in range(LEVELS):
        ok = c >= 0
        cc = np.where(ok, c, 0)
        up = np.where(ok, parent[cc], -1)
        hit = ok & (found < 0) & item[cc] & (up >= 0) & group[np.maximum(up, 0)]
        found[hit] = up[hit]
        c = up
    on = found >= 0
    g = found[on]
    out[on] = np.column_stack([np.log1p(items[g]), np.log1p(per_item[g]), share[g]])
    return out


def features_with_teasers(table: BlockTable) -> np.ndarray:
    """The shipped features of a page and its teaser columns after them."""
    x = features(table)
    return np.concatenate([x, teaser_columns(table, x)], axis=1)


def augmented(cache: Path) -> list[bt.PageRecord]:
    """CACHE's records with the teaser columns after the shipped features."""
    records = bt.load_records(cache)
    for r in records:
        r.x = np.concatenate([r.x, teaser_columns(r.table, r.x)], axis=1)
    return records


def teaser_fits(records: list[bt.PageRecord], cache: Path, out: Path) -> bt.Fits:
    """``Fits`` over the augmented records in ``OUT/fits`` (CACHE's record files linked
    there), under keys of their own so no file of CACHE's fits is ever read for them."""
    folder = out / "fits"
    folder.mkdir(parents=True, exist_ok=True)
    for f in cache.glob("blocks-*.pkl.gz"):
        if not (folder / f.name).exists():
            (folder / f.name).symlink_to(f.resolve())
    fits = bt.Fits(records, lambda m: print(m, flush=True), folder)
    fits.key = f"teaser-{fits.key}"
    fits.net_keys = [f"teaser-{k}" for k in fits.net_keys]
    return fits


def report(records: list[bt.PageRecord], cache: Path, out: Path) -> None:
    plain = bt.Fits(records, None, cache)
    teaser = teaser_fits(records, cache, out)
    by = bt.sources_of(records)
    pools: dict[str, list] = {"without": [], "with teaser columns": []}
    on = sum(int((r.x[:, -3] > 0).sum()) for r in records)
    print(f"blocks with a teaser group: {on} of {sum(len(r.x) for r in records)}")
    for held, (threshold, rule) in FOLDS["five"].items():
        test = by[held]
        traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", test).values()))["f1"]
        cells = []
        for label, fits, width in (("without", plain, len(NAMES)), ("with teaser columns", teaser, None)):
            sources = "+".join(sorted(set(by) - {held}))
            files = [f"fit-{sources}-{teaser.key}.json", *(f"seq-{sources}-{k}.json" for k in teaser.net_keys)]
            if fits is teaser and not all((teaser.cache / f).exists() for f in files):
                cells.append(f"{label}: not fitted")
                continue
            probs = fold_probabilities(records, fits, held, width)
            rows = bt.page_rows(records, probs, threshold, rule)
            f1 = extraction_scores(list(rows.values()))["f1"]
            if held != NEW_SOURCE:
                pools[label] += list(rows.values())
            cells.append(f"{label} {f1:.4f} ({f1 - traf:+.4f})")
        print(f"{held:12s} trafilatura {traf:.4f}  " + "  ".join(cells), flush=True)
    old_pages = sum(len(ix) for s, ix in by.items() if s != NEW_SOURCE)
    for label, rows in pools.items():
        if len(rows) == old_pages:  # a pool of some folds only would not compare
            print(f"pooled over the old four, {label}: {extraction_scores(rows)['f1']:.4f} ({len(rows)} pages)")


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[3] not in ("fit", "report", "prefit", "nested"):
        sys.exit(__doc__)
    cache, out, what = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    records = augmented(cache)
    if what == "report":
        report(records, cache, out)
        return
    fits = teaser_fits(records, cache, out)
    if what == "nested":
        block_model.features = features_with_teasers  # the held-out pages' features, from their tables
        nested_table(records, fits, out)
        return
    # ``fit HELD``: the outer fold's sources (every source but HELD); ``prefit A+B+C``: those named.
    by = bt.sources_of(records)
    for item in sys.argv[4:]:
        sources = set(item.split("+")) if what == "prefit" else set(by) - {item}
        fits.get(sources)
        fits.sequence(sources)
        print("done", item, flush=True)

if __name__ == "__main__":
    main()
