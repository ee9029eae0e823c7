"""First look (issue 57): does the page's declared genre tell reader comments from forum replies?

    python experiments/extraction-selector/genre_features.py CACHE GOLD OUT trees|nets|report [HELD...]
    python experiments/extraction-selector/genre_features.py CACHE GOLD OUT prefit A+B C+D ...   # more fits, in parallel
    python experiments/extraction-selector/genre_features.py CACHE GOLD OUT nested

News pages (ScrapingHub, Google-Trends) lose most on reader comments kept under a short
post; WCXB's forum pages need the replies, which sit under the same comment-class
containers. Their markup says which is which: ``og:type`` is ``article`` on 160 of
ScrapingHub's 181 pages and 132 of Google-Trends' 180, on 12 of WCXB's 113 forum pages;
forum pages declare schema.org ``DiscussionForumPosting`` or ``QAPage``. This script adds
four page columns to every block's features - declared an article (og:type ``article`` or a
schema.org ``*Article``/``BlogPosting`` type), declared a forum or Q&A page, and each of
those times the block's comment-class context - and fits the trees (and with ``nets`` the
sequence nets; HELD: only those folds) per held-out source on the other three of the four training sources, plus
Google-Trends held out from all four. ``report``: the F1 margins over trafilatura at the
shipped page rule, with and without the columns (the cache's own fits), one fit per fold:
a first look. ``nested``: the nested leave-one-source-out of ``afm extraction blocks cv
--one-stage --sequence`` on the four training sources with the columns (``block_train.choose``
on the same fits), and Google-Trends scored by the model chosen and fitted on all four.
GOLD holds ``wcxb/``, ``trafilatura/``, ``utomo/``,
``googletrends/`` (the pages' HTML: the records keep none); CACHE holds the four training
sources' records and Google-Trends' (``afm extraction blocks table``)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
from figures_rule import SHIPPED_RULE as RULE

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_features import NAMES
from afm.filters.extraction.block_sequence import SequenceNet, fit_sequence, mixed
from afm.filters.extraction.gold import extraction_scores, load_sets
from afm.filters.extraction.trees import Forest
from afm.shared_data import find_shared_dir

TRAINING = ("scrapinghub", "trafilatura", "utomo", "wcxb")
_OG = re.compile(rb"""<meta[^>]+(?:property|name)\s*=\s*["']og:type["'][^>]*>""", re.I)
_CONTENT = re.compile(rb"""content\s*=\s*["']\s*([^"']*)""", re.I)
_LD_ARTICLE = re.compile(rb""""@type"\s*:\s*\[?\s*"(?:\w*Article|BlogPosting)\"""")
_LD_FORUM = re.compile(rb""""@type"\s*:\s*\[?\s*"(?:DiscussionForumPosting|QAPage|Question)\"""")


def genre(body: bytes) -> tuple[float, float]:
    """(declared an article, declared a forum or Q&A page) from the page's markup."""
    head = body[:400_000]
    og = _OG.search(head)
    kind = b""
    if og:
        m = _CONTENT.search(og.group())
        kind = m.group(1).strip().lower() if m else b""
    article = kind == b"article" or bool(_LD_ARTICLE.search(head))
    forum = kind in (b"forum", b"qa") or bool(_LD_FORUM.search(head))
    return float(article), float(forum)


def genre_flags(gold: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """:func:`genre` of every gold page, by (set, id) (the records keep no HTML)."""
    paths = {name: gold / name for name in ("wcxb", "trafilatura", "utomo", "googletrends")}
    shared = find_shared_dir()
    pages = load_sets(scrapinghub=shared / "eval" if shared else None,
                      **{k: v for k, v in paths.items() if v.is_dir()})
    return {(p.set, p.id): genre(p.body) for p in pages}


def augmented(cache: Path, gold: Path) -> list[bt.PageRecord]:
    records = bt.load_records(cache)
    flags = genre_flags(gold)
    comment = NAMES.index("ctx_comment_class")
    for r in records:
        article, forum = flags[r.set, r.id]
        in_comment = (r.x[:, comment] > 0).astype(np.float32)
        extra = np.column_stack([np.full(len(r.x), article), np.full(len(r.x), forum),
                                 article * in_comment, forum * in_comment]).astype(np.float32)
        r.x = np.concatenate([r.x, extra], axis=1)
    return records


def folds(records: list[bt.PageRecord]) -> dict[str, tuple[set[str], list[int]]]:
    by = bt.sources_of(records)
    out = {held: (set(TRAINING) - {held}, by[held]) for held in TRAINING}
    out["googletrends"] = (set(TRAINING), by["googletrends"])
    return out


def fit(records: list[bt.PageRecord], out: Path, nets: bool, only: list[str]) -> None:
    by = bt.sources_of(records)
    for held, (train, _) in folds(records).items():
        if only and held not in only:
            continue
        idx = [i for s in sorted(train) for i in by[s]]
        path = out / f"{'seq' if nets else 'fit'}-{held}.json"
        if path.exists():
            continue
        model = (fit_sequence(bt.training_pages(records, idx)) if nets
                 else bt.fit_forest(records, idx, bt.STAGE1))
        path.write_text(json.dumps(model.to_json()))
        print("fitted", path.name, flush=True)


def f1(rows) -> float:
    return extraction_scores(list(rows))["f1"]


def report(records: list[bt.PageRecord], cache: Path, out: Path) -> None:
    plain = bt.Fits(records, None, cache)  # the cache's fits, on the features without the columns
    width = len(NAMES)
    for held, (train, test) in folds(records).items():
        tr = f1(bt.baseline_rows(records, "trafilatura", test).values())
        print(f"== held out {held} ({len(test)} pages): trafilatura {tr:.4f}", flush=True)
        xs = {i: records[i].x[:, :width] for i in test}
        base_trees = bt.probabilities(plain.get(train), records, test, xs)
        base_net = plain.sequence(train)
        variants = {"without": (base_trees, {i: base_net.probability(xs[i]) for i in test})}
        if (out / f"fit-{held}.json").exists():
            trees = bt.probabilities(Forest.from_json(json.loads((out / f"fit-{held}.json").read_text())),
                                     records, test)
            net = None
            if (out / f"seq-{held}.json").exists():
                seq = SequenceNet.from_json(json.loads((out / f"seq-{held}.json").read_text()))
                net = {i: seq.probability(records[i].x) for i in test}
            variants["with genre"] = (trees, net)
        for label, (trees, net) in variants.items():
            cells = [f"trees@{t} {f1(bt.page_rows(records, trees, t, RULE).values()) - tr:+.4f}"
                     for t in (0.5, 0.6, 0.7)]
            if net is not None:
                mix = {i: mixed(trees[i], net[i]) for i in test}
                cells += [f"mix@{t} {f1(bt.page_rows(records, mix, t, RULE).values()) - tr:+.4f}"
                          for t in (0.5, 0.6)]
            print(f"  {label:10s}: " + "  ".join(cells), flush=True)


def genre_fits(records: list[bt.PageRecord], cache: Path, out: Path) -> bt.Fits:
    """``Fits`` over the records with the columns, kept in ``OUT/fits`` (the cache's
    record files linked there, so the keys are the cache's; the first look's fits filed
    under the names ``Fits`` gives them)."""
    folder = out / "fits"
    folder.mkdir(exist_ok=True)
    for f in cache.glob("blocks-*.pkl.gz"):
        if not (folder / f.name).exists():
            (folder / f.name).symlink_to(f)
    fits = bt.Fits(records, lambda m: print(m, flush=True), folder)
    for held, (train, _) in folds(records).items():
        name = "+".join(sorted(train))
        for prefix, key in (("fit", fits.key), ("seq", fits.net_keys[0])):  # the first seed's net, that run's only one
            src, dst = out / f"{prefix}-{held}.json", folder / f"{prefix}-{name}-{key}.json"
            if src.exists() and not dst.exists():
                dst.write_bytes(src.read_bytes())
    return fits


def nested(records: list[bt.PageRecord], fits: bt.Fits) -> None:
    by = bt.sources_of(records)
    variants = ("one", "mix")
    pooled = []
    for held, (train, test) in folds(records).items():
        fit_on = [i for s in sorted(train) for i in by[s]]
        variant, t, rule, _, _ = bt.choose(records, fit_on, fits,  # the rules of its day
                                             bt.Choice(tuple(variants), rules=tuple(bt.page_rules(("trafilatura",)))))
        probs = bt.probabilities(fits.get(train), records, test)
        if variant == "mix":
            net = fits.sequence(train)
            probs = {i: mixed(probs[i], net.probability(records[i].x)) for i in test}
        rows = bt.page_rows(records, probs, t, rule)
        traf = bt.baseline_rows(records, "trafilatura", test)
        if held != "googletrends":
            pooled += list(rows.values())
        print(f"{held:12s} {f1(rows.values()):.4f} ({f1(rows.values()) - f1(traf.values()):+.4f}) "
              f"{bt.setting_name(variant, t, rule)} fallback {bt.fallback_share(records, probs, t, rule):.4f}",
              flush=True)
    print(f"pooled over the four {f1(pooled):.4f}")


def main() -> None:
    if len(sys.argv) < 5 or sys.argv[4] not in ("trees", "nets", "report", "prefit", "nested"):
        sys.exit(__doc__)
    cache, gold, out, what = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    out.mkdir(parents=True, exist_ok=True)
    records = augmented(cache, gold)
    if what == "report":
        report(records, cache, out)
    elif what == "prefit":
        fits = genre_fits(records, cache, out)
        for group in sys.argv[5:]:
            fits.get(group.split("+"))
            fits.sequence(group.split("+"))
    elif what == "nested":
        nested(records, genre_fits(records, cache, out))
    else:
        fit(records, out, nets=what == "nets", only=sys.argv[5:])


if __name__ == "__main__":
    main()
