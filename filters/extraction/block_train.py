"""Train and cross-validate the block extractor by source, next to trafilatura and the cascade.

Per gold page (``gold.py``'s loaders) a *page record* is made once and cached: its blocks
(``blocks.py``), their features, each block's label and weight, and the texts of the two
extractors the block model is compared with on the same page: trafilatura alone
(defaults, ``include_comments=False``: the candidate ``traf_fallback``) and the current
cascade (``select.py`` with the shipped selector, then the teaser trim, as the extract
stage runs it), with Resiliparse's main-content text beside them (a page rule may hand a
page to it or to trafilatura: ``PageRule.fallback_to``).

Labels: a block is main content by the share of its 4-token shingles found in the page's
gold text (a block under four tokens: whether its token sequence occurs there), the
metric's own tokens and shingles. Pages with snippet gold (trafilatura's evaluation pages)
label only the blocks holding a "with" snippet (1) or a "without" snippet (0). Weights: a
block weighs its tokens' share of the page (the metric averages pages, each counting its
shingles), and every source weighs the same in total.

Cross-validation is by *source* (leave one source out; a source's sets, e.g. Utomo's two,
stay together): every figure reported for a source is from a model fitted without any
page of it, and the choices made beside the trees (the keep threshold, the page rule:
``block_model.PageRule``, the tree settings) are made by an inner leave-one-source-out
over the training sources only (nested): the setting whose worst inner held-out source has
the best F1 margin over trafilatura on that source, among those that send at most
``MAX_FALLBACK_SHARE`` of the pages to the fallback extractor (``page_rules``' ``fallbacks``:
which extractors it may be).
"""

from __future__ import annotations

import gzip
import json
import pickle
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from afm.console import track
from afm.errors import UserError
from afm.filters.extraction.block_features import NAMES, context_features, features
from afm.filters.extraction.block_model import (
    FALLBACK_EXTRACTORS,
    BlockModel,
    Forest,
    PageRule,
    render,
)
from afm.filters.extraction.block_sequence import (
    SEQUENCE,
    Page,
    SequenceNet,
    SequenceNets,
    fit_sequence,
    mixed,
    net_setting,
)
from afm.filters.extraction.blocks import BlockTable, page_blocks
from afm.filters.extraction.gold import GoldPage, counts, extraction_scores, shingles
from afm.filters.extraction.train import source_of

K = TypeVar("K")
_TOKEN = re.compile(r"\w+")
_WS = re.compile(r"\s+")
COVERED = 0.5  # a block is content when this share of its shingles is in the gold
BASELINES = ("trafilatura", "cascade")
# The texts a record keeps per page: the baselines and every fallback a page rule may name.
RECORD_TEXTS = tuple(dict.fromkeys(BASELINES + FALLBACK_EXTRACTORS))
THRESHOLDS = (0.4, 0.5, 0.6, 0.7)
# Page rules tried with each threshold (``block_model.PageRule``): fill, lead, fallback,
# headline, reader comments on declared articles.
FILLS: tuple[float | None, ...] = (None, 0.2, 0.3)
LEADS: tuple[int | None, ...] = (None, 10)
FALLBACKS: tuple[int | None, ...] = (None, 1, 20, 50, 100)
HEADLINES = (False, True)
COMMENTS: tuple[int | None, ...] = (None, 50)
# The fallback costs up to ~6x the block extractor (trafilatura; Resiliparse under half):
# at most this share of the inner held-out pages may go to it, so extraction stays >= 5x
# trafilatura's speed.
MAX_FALLBACK_SHARE = 0.03
# The extractors the page rules hand pages to unless told (``page_rules``): Resiliparse, whose
# nested run kept every training source at or above trafilatura at no cost in speed
# (experiments/extraction-selector, "Resiliparse as a selectable fallback"); trafilatura
# until 2026-12-07.
DEFAULT_FALLBACKS = ("resiliparse",)
# The model variants ``choose`` tries, as the cross-validation's table names them.
VARIANT_NAMES = {"one": "trees", "two": "trees + context stage", "mix": "trees + sequence net"}
# Tree settings (scikit-learn's HistGradientBoostingClassifier). Depth bounds the
# extraction cost (one numpy step per level), trees x blocks the rest.
STAGE1: dict[str, Any] = {"max_iter": 100, "max_depth": 5, "max_leaf_nodes": 24,
                          "learning_rate": 0.1, "min_samples_leaf": 40}
STAGE2: dict[str, Any] = {"max_iter": 60, "max_depth": 4, "max_leaf_nodes": 12,
                          "learning_rate": 0.1, "min_samples_leaf": 40}


@dataclass
class PageRecord:
    """One gold page as the block model's training and evaluation read it."""

    set: str
    id: str
    table: BlockTable
    x: np.ndarray  # features, one row a block
    label: np.ndarray  # 1 content, 0 not, nan unknown (snippet gold)
    tokens: np.ndarray  # \w+ tokens per block
    page: GoldPage  # the gold (no HTML kept)
    texts: dict[str, str]  # the baselines' outputs
    cpu: dict[str, float]  # CPU seconds of the block extractor's steps and the baselines


def _fold(text: str) -> str:
    return _WS.sub(" ", text).strip().lower()


def block_labels(table: BlockTable, page: GoldPage) -> tuple[np.ndarray, np.ndarray]:
    """(label, tokens) per block under the page's gold. Text gold: the share of the
    block's tokens that some gold 4-token shingle of the page's token stream covers (the
    blocks' tokens in page order, shingles crossing block boundaries), so a short block
    counts as content only where the gold has it in this place: "Twitter" in a tag list
    is not, though the article names Twitter. Snippet gold: 1 for a block holding a
    "with" snippet, 0 for one holding a "without" snippet, unknown (nan) otherwise."""
    toks = [_TOKEN.findall(t) for t in table.texts]
    tokens = np.array([len(t) for t in toks], dtype=np.float64)
    label = np.full(len(table), np.nan)
    if page.truth is not None:
        gold = shingles(page.truth)
        stream = [t for block in toks for t in block]
        owner = np.repeat(np.arange(len(toks)), tokens.astype(np.int64))
        covered = np.zeros(len(stream), dtype=bool)
        if len(stream) < 4:
            if stream and tuple(stream) in gold:
                covered[:] = True
        else:
            hit = np.fromiter((tuple(stream[j: j + 4]) in gold for j in range(len(stream) - 3)),
                              dtype=bool, count=len(stream) - 3)
            for k in range(4):
                covered[k: k + len(hit)] |= hit
        share = np.bincount(owner, weights=covered, minlength=len(toks))
        label = np.where(tokens > 0, share / np.maximum(tokens, 1.0), 0.0)
        return label, tokens
    folded = [_fold(t) for t in table.texts]
    for snippets, value in ((page.without, 0.0), (page.with_, 1.0)):
        for s in snippets:
            s = _fold(s)
            for i, text in enumerate(folded):
                if s and s in text:
                    label[i] = value
    return label, tokens


def page_record(page: GoldPage) -> PageRecord:
    """Decode, cut into blocks and label one gold page (the baselines' texts are added
    from their own cache: :func:`baseline_row`)."""
    from afm.filters.extraction.table import decode

    cpu: dict[str, float] = {}
    start = time.process_time()
    html = decode(page.body)
    cpu["decode"] = time.process_time() - start
    start = time.process_time()
    table = page_blocks(html)
    cpu["blocks"] = time.process_time() - start
    start = time.process_time()
    x = features(table)
    cpu["features"] = time.process_time() - start
    label, tokens = block_labels(table, page)
    gold = GoldPage(page.set, page.id, page.url, b"", page.truth, page.with_, page.without)
    return PageRecord(page.set, page.id, table, x, label, tokens, gold, {}, cpu)


def baseline_row(page: GoldPage, cascade: Callable[[str, str | None], str],
                 baselines: Iterable[str] = RECORD_TEXTS, have: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """The comparison extractors' texts and CPU seconds on one gold page (the expensive
    part of the records: cached apart, so a change of the blocks or features re-runs
    only the cheap part). ``cascade``: the extract stage's text of a page (the stage sits
    above this package, so its caller hands it in); ``have``: the page's cached row, whose
    texts are kept (only the extractors it lacks are run)."""
    from afm.filters.extraction.table import decode

    html = decode(page.body)
    texts = dict(have["texts"]) if have else {}
    cpu = dict(have["cpu"]) if have else {}
    for name in baselines:
        if name in texts:
            continue
        start = time.process_time()
        texts[name] = baseline_text(name, html, page.url, cascade)
        cpu[name] = time.process_time() - start
    return {"set": page.set, "id": page.id, "texts": texts, "cpu": cpu}


# The record texts that are candidate extractors' (``candidates.CANDIDATES``), by candidate name.
_CANDIDATE_OF = {"trafilatura": "traf_fallback", "resiliparse": "resiliparse"}


def baseline_text(name: str, html: str, url: str | None,
                  cascade: Callable[[str, str | None], str]) -> str:
    """A comparison extractor's text: ``trafilatura`` (defaults, no comments),
    ``resiliparse`` (its main-content text, as the extract stage's fallback runs it) or
    ``cascade`` (the shipped selector, as the extract stage runs it: ``cascade``)."""
    from afm.filters.extraction.candidates import Page, run_candidate

    if name in _CANDIDATE_OF:
        return run_candidate(_CANDIDATE_OF[name], Page(html, url))
    if name == "cascade":
        try:
            return cascade(html, url)
        except Exception:  # noqa: BLE001 - as the stage: a failure is an empty text
            return ""
    raise UserError(f"unknown baseline {name!r}")


def _run(fn: Any, pages: Sequence[GoldPage], workers: int, what: str) -> Iterator[Any]:
    if workers <= 1:
        yield from track(map(fn, pages), what, len(pages), "pages")
        return
    with ProcessPoolExecutor(workers) as pool:
        yield from track(pool.map(fn, pages, chunksize=8), what, len(pages), "pages")


def build_cache(pages: Sequence[GoldPage], cache: Path, name: str,
                cascade: Callable[[str, str | None], str], workers: int = 1) -> int:
    """``blocks-<name>.pkl.gz`` (the records, always rebuilt: seconds per hundred pages)
    and ``baselines-<name>.jsonl.gz`` (``RECORD_TEXTS``: trafilatura's, the cascade's and
    Resiliparse's texts: built once, kept while it covers the same pages, a text it lacks
    added; ``cascade``: a picklable function giving the extract stage's text of a page)."""
    cache.mkdir(parents=True, exist_ok=True)
    base_path = cache / f"baselines-{name}.jsonl.gz"
    old = {(r["set"], r["id"]): r for r in _read_jsonl(base_path)} if base_path.exists() else {}
    same_pages = set(old) == {(p.set, p.id) for p in pages}
    if not same_pages or not all(set(RECORD_TEXTS) <= set(r["texts"]) for r in old.values()):
        keep = old if same_pages else {}  # another page set: every text run again
        run = [(p, keep.get((p.set, p.id))) for p in pages]
        rows = _run(partial(_baseline_of, cascade=cascade), run, workers,
                    f"{name}: {', '.join(RECORD_TEXTS)}")
        # written aside and moved into place: an interrupted run keeps the old texts
        part = base_path.with_name(base_path.name + ".part")
        with gzip.open(part, "wt", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        part.replace(base_path)
    records = list(_run(page_record, pages, workers, f"{name}: blocks"))
    with gzip.open(cache / f"blocks-{name}.pkl.gz", "wb", compresslevel=3) as f:
        pickle.dump(records, f, protocol=pickle.HIGHEST_PROTOCOL)
    return len(records)


def _baseline_of(item: tuple[GoldPage, dict[str, Any] | None],
                 cascade: Callable[[str, str | None], str]) -> dict[str, Any]:
    """:func:`baseline_row` of a (page, cached row or None) pair (a picklable step)."""
    page, have = item
    return baseline_row(page, cascade, RECORD_TEXTS, have)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_records(cache: Path) -> list[PageRecord]:
    """Every cached record, with its page's baseline texts."""
    files = sorted(Path(cache).glob("blocks-*.pkl.gz"))
    if not files:
        raise UserError(f"{cache}: no block records (blocks-*.pkl.gz); run "
                        "`afm extraction blocks table`")
    out: list[PageRecord] = []
    for f in files:
        name = f.name.removeprefix("blocks-").removesuffix(".pkl.gz")
        base = {(r["set"], r["id"]): r for r in _read_jsonl(Path(cache) / f"baselines-{name}.jsonl.gz")}
        with gzip.open(f, "rb") as fh:
            for rec in pickle.load(fh):
                if rec.x.shape[1] != len(NAMES):
                    raise UserError(f"{f}: its records have {rec.x.shape[1]} block features, this "
                                    f"version {len(NAMES)}; rebuild them with `afm extraction blocks table`")
                row = base.get((rec.set, rec.id))
                if row is None:
                    raise UserError(f"{f}: page {rec.id} has no baseline texts; rerun "
                                    "`afm extraction blocks table`")
                rec.texts = row["texts"]
                rec.cpu.update(row["cpu"])
                out.append(rec)
    return out


# ---------------------------------------------------------------------------- fitting


def training_pages(records: Sequence[PageRecord], idx: Sequence[int]) -> list[Page]:
    """Per page of ``idx``: its features, labels (1 content, 0 not or unknown) and block
    weights - a block weighs its tokens' share of its page, a page 1 / its source's pages,
    an unlabelled block (snippet gold) 0. The sequence net reads pages whole; the trees
    read the labelled blocks (:func:`training_arrays`)."""
    per_source: dict[str, int] = defaultdict(int)
    for i in idx:
        per_source[source_of(records[i].set)] += 1
    out = []
    for i in idx:
        r = records[i]
        known = ~np.isnan(r.label)
        tok = np.maximum(r.tokens, 1.0) * known
        weight = tok / max(float(tok.sum()), 1e-300) / per_source[source_of(r.set)]
        out.append((r.x, np.where(known, r.label >= COVERED, False).astype(np.float32), weight))
    return out


def training_arrays(records: Sequence[PageRecord], idx: Sequence[int],
                    xs: dict[int, np.ndarray] | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, weight) over the labelled blocks of the pages ``idx``, weighted as
    :func:`training_pages` says (``xs``: other rows than the records' own features, per
    page)."""
    parts_x, parts_y, parts_w = [], [], []
    for i, (x, y, w) in zip(idx, training_pages(records, idx)):
        known = w > 0
        if known.any():
            parts_x.append((x if xs is None else xs[i])[known])
            parts_y.append(y[known] > 0.5)
            parts_w.append(w[known])
    if not parts_x:
        raise UserError("no labelled blocks to fit the block model on")
    return np.concatenate(parts_x), np.concatenate(parts_y), np.concatenate(parts_w)


def fit_forest(records: Sequence[PageRecord], idx: Sequence[int], setting: dict[str, Any],
               xs: dict[int, np.ndarray] | None = None) -> Forest:
    """Gradient-boosted trees (scikit-learn's histogram GBT, log loss) on the labelled
    blocks of ``idx``, as a :class:`Forest`."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    x, y, w = training_arrays(records, idx, xs)
    model = HistGradientBoostingClassifier(**setting, early_stopping=False, random_state=0)
    model.fit(x, y, sample_weight=w * len(w) / w.sum())
    return Forest.from_sklearn(model)


def probabilities(forest: Forest, records: Sequence[PageRecord], idx: Sequence[int],
                  xs: dict[int, np.ndarray] | None = None) -> dict[int, np.ndarray]:
    """Per page, each block's probability of being content (one batched call)."""
    rows = [records[i].x if xs is None else xs[i] for i in idx]
    if not rows or sum(map(len, rows)) == 0:
        return {i: np.zeros(0) for i in idx}
    p = forest.probability(np.concatenate(rows))
    out, at = {}, 0
    for i, x in zip(idx, rows):
        out[i] = p[at: at + len(x)]
        at += len(x)
    return out


def page_rows(records: Sequence[PageRecord], probs: dict[int, np.ndarray], threshold: float,
              rule: PageRule | None = None, memo: dict[Any, Any] | None = None,
              sent: set[int] | None = None) -> dict[int, tuple[float, float, float]]:
    """Per page, the metric's (tp, fp, fn) of the block extractor's text at ``threshold``
    with the page ``rule`` (a page it hands to the fallback scores the text of the
    extractor the rule names, ``PageRule.fallback_to``, in the record's baselines, as the
    extract stage runs it); ``memo``: scores kept by page and kept blocks across calls;
    ``sent``: gets the pages handed to the fallback (their share without a second pass of
    the rule, :func:`fallback_share`'s)."""
    rule = rule or PageRule()
    out = {}
    for i, p in probs.items():
        r = records[i]
        keep, fallback = _rule_keeps(r, p, threshold, rule)
        if fallback and sent is not None:
            sent.add(i)
        key = (i, rule.fallback_to) if fallback else (i, np.packbits(keep).tobytes())
        row = memo.get(key) if memo is not None else None
        if row is None:
            row = counts(r.page, _fallback_text(r, rule.fallback_to) if fallback
                         else render(r.table, keep))
            if memo is not None:
                memo[key] = row
        out[i] = row
    return out


def _rule_keeps(record: PageRecord, p: np.ndarray, threshold: float, rule: PageRule) -> tuple[np.ndarray, bool]:
    """The blocks ``rule`` keeps at ``threshold``, and whether it hands the page to the
    fallback (the kept blocks' \\w+ tokens are the rendered text's: ``PageRule.falls_back``)."""
    keep = rule.adjust(record.table, p, p >= threshold)
    return keep, rule.fallback_words is not None and record.tokens[keep].sum() < rule.fallback_words


def check_fallback_texts(records: Sequence[PageRecord], idx: Sequence[int],
                         rules: Iterable[PageRule]) -> None:
    """A one-line error, before any fit, where a page of ``idx`` lacks the text of an
    extractor one of ``rules`` hands pages to (a cache made before that extractor was a
    fallback)."""
    needed = {r.fallback_to for r in rules if r.fallback_words is not None}
    for i in idx:
        for name in needed:
            _fallback_text(records[i], name)


def _fallback_text(record: PageRecord, name: str) -> str:
    """The record's text of fallback extractor ``name`` (a clear error where its cache
    predates that extractor: an empty text would score as a failed extraction)."""
    text = record.texts.get(name)
    if text is None:
        raise UserError(f"page {record.set}/{record.id} has no {name} text in its cache; rerun "
                        "`afm extraction blocks table` (it adds only the missing texts)")
    return text


def fallback_share(records: Sequence[PageRecord], probs: dict[int, np.ndarray],
                   threshold: float, rule: PageRule) -> float:
    """The share of the pages ``probs`` that ``rule`` hands to the fallback extractor."""
    if rule.fallback_words is None or not probs:
        return 0.0
    return sum(_rule_keeps(records[i], p, threshold, rule)[1] for i, p in probs.items()) / len(probs)


def page_rules(fallbacks: Sequence[str] = DEFAULT_FALLBACKS,
               leads: Sequence[int | None] = LEADS,
               headlines: Sequence[bool] = HEADLINES) -> list[PageRule]:
    """Every page rule the choice tries (the grid of ``FILLS``, ``leads``, ``FALLBACKS``,
    ``headlines``, ``COMMENTS``), each fallback word count with each extractor of
    ``fallbacks`` (``block_model.FALLBACK_EXTRACTORS``); none: only the rules that never
    hand a page on (trafilatura's ~5x a block page's cost makes even 3% of the pages a
    fifth of the extractor's time; Resiliparse costs under half a block page).
    ``leads=(None,)``: no rule drops the blocks above the first long one.
    ``headlines=(True,)``: every rule drops the headline, a convention rather than a choice
    (the record carries the title apart; a near-tie on the inner sources once fell the other
    way and cost ScrapingHub's news 0.010). Both keep the grid's order however the values
    were given: ties in the choice go to the first."""
    if not leads or any(w is not None and w < 1 for w in leads):
        raise UserError(f"lead rule word counts {tuple(leads)}: give None or counts of at least 1")
    if not headlines or not set(headlines) <= {False, True}:
        raise UserError(f"headline rules {tuple(headlines)}: give True (dropped), False (kept) or both")
    leads = sorted(set(leads), key=lambda w: -1 if w is None else w)  # None first, as in LEADS
    unknown = sorted(set(fallbacks) - set(FALLBACK_EXTRACTORS))
    if unknown:
        raise UserError(f"fallback extractor {', '.join(unknown)}: use {', '.join(FALLBACK_EXTRACTORS)}")
    named = [to for to in FALLBACK_EXTRACTORS if to in fallbacks]  # one order, however they were typed
    ends = [(None, "trafilatura")] + [(fb, to) for fb in FALLBACKS if fb is not None for to in named]
    return [PageRule(f, lead, fb, head, c, to) for c in COMMENTS for head in HEADLINES if head in headlines
            for f in FILLS for lead in leads for fb, to in ends]


def baseline_rows(records: Sequence[PageRecord], name: str, idx: Sequence[int]
                  ) -> dict[int, tuple[float, float, float]]:
    return {i: counts(records[i].page, records[i].texts.get(name, "")) for i in idx}


def sources_of(records: Sequence[PageRecord], idx: Iterable[int] | None = None
               ) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for i in range(len(records)) if idx is None else idx:
        out[source_of(records[i].set)].append(i)
    return dict(sorted(out.items()))


class Fits:
    """Stage-1 forests and sequence nets by the sources they were fitted on, each fitted
    once: the nested cross-validation needs the same fit in several folds (a fit on {A, B}
    serves the folds holding out C and D), and ``train`` the cross-validation's. With a
    ``cache`` folder they are kept there (``fit-<sources>-<key>.json``,
    ``seq-<sources>-<key>.json``; the key covers the settings, the feature names and the
    records' files), so ``cv`` then ``train`` fit each once."""

    def __init__(self, records: Sequence[PageRecord], log: Any = None,
                 cache: Path | None = None, nets: int | None = None) -> None:
        self.records = records
        self.log = log
        self.cache = cache
        self.forests: dict[frozenset[str], Forest] = {}
        self.sequences: dict[frozenset[str], SequenceNets] = {}
        count = int(SEQUENCE["nets"] if nets is None else nets)
        if count < 1:
            raise UserError(f"the block model averages at least one sequence net, not {count}")
        self.setting = {**SEQUENCE, "nets": count}
        self.nets: list[dict[frozenset[str], SequenceNet]] = [{} for _ in range(count)]
        self.key = ""
        self.net_keys = [""] * len(self.nets)
        if cache is not None:
            import hashlib

            files = sorted(Path(cache).glob("blocks-*.pkl.gz"))
            stamp = [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]

            def key(setting: Any) -> str:
                return hashlib.sha1(json.dumps([setting, NAMES, COVERED, stamp]).encode()).hexdigest()[:12]

            self.key = key(STAGE1)
            self.net_keys = [key(net_setting(k, self.setting)) for k in range(count)]

    def get(self, sources: Iterable[str]) -> Forest:
        """Stage 1's forest fitted on ``sources``."""
        return self._kept(self.forests, "fit", self.key, sources, "stage 1", Forest.from_json,
                          lambda idx: fit_forest(self.records, idx, STAGE1))

    def sequence(self, sources: Iterable[str]) -> SequenceNets:
        """The sequence nets fitted on ``sources`` (``block_sequence``; one per seed), each
        kept apart: the nets of a setting with fewer serve one with more."""
        name = frozenset(sources)
        if name not in self.sequences:
            pages: list[Page] = []  # built once, for the first seed that is not cached

            def fit(idx: list[int], k: int) -> SequenceNet:
                if not pages:
                    pages.extend(training_pages(self.records, idx))
                return fit_sequence(pages, net_setting(k, self.setting))

            self.sequences[name] = SequenceNets([
                self._kept(self.nets[k], "seq", self.net_keys[k], name,
                           f"sequence net (seed {net_setting(k, self.setting)['seed']})",
                           SequenceNet.from_json, lambda idx, k=k: fit(idx, k))
                for k in range(len(self.nets))])
        return self.sequences[name]

    def _kept(self, store: dict[frozenset[str], Any], prefix: str, key: str,
              sources: Iterable[str], what: str, load: Callable[[dict[str, Any]], Any],
              fit: Callable[[list[int]], Any]) -> Any:
        """A fit on ``sources``: from ``store``, else from the cache folder
        (``<prefix>-<sources>-<key>.json``), else made by ``fit`` and kept in both."""
        name = frozenset(sources)
        if name in store:
            return store[name]
        path = (Path(self.cache) / f"{prefix}-{'+'.join(sorted(name))}-{key}.json"
                if self.cache is not None else None)
        if path is not None and path.exists():
            store[name] = load(json.loads(path.read_text()))
            return store[name]
        idx = [i for s, ix in sources_of(self.records).items() if s in name for i in ix]
        start = time.process_time()
        store[name] = fit(idx)
        if self.log:
            self.log(f"  {what} fitted on {', '.join(sorted(name))}: "
                     f"{time.process_time() - start:.0f} CPU s")
        if path is not None:
            path.write_text(json.dumps(store[name].to_json()))
        return store[name]


@dataclass(frozen=True)
class Choice:
    """What :func:`choose` searches and the bound it keeps, one value for the training and
    cross-validation commands and the experiments to pass down.

    * ``variants``: ``one`` (stage 1's probability decides), ``two`` (the context stage on
      top) and ``mix`` (the mean of stage 1's and the sequence net's probabilities,
      ``block_sequence``; ``("mix",)``: only it);
    * ``thresholds``: the keep thresholds tried;
    * ``rules``: the page rules tried with each (``page_rules()``: its fallback extractors);
    * ``max_fallback_share``: the largest mean share of the inner held-out pages a setting
      may hand to the fallback extractor (its cost is the extractor's speed).
    """

    variants: tuple[str, ...] = ("one", "two")
    thresholds: tuple[float, ...] = THRESHOLDS
    rules: tuple[PageRule, ...] = field(default_factory=lambda: tuple(page_rules()))
    max_fallback_share: float = MAX_FALLBACK_SHARE

    def __post_init__(self) -> None:
        unknown = sorted(set(self.variants) - set(VARIANT_NAMES))
        if unknown or not self.variants:
            raise UserError(f"model variants {', '.join(unknown) or '(none)'}: use {', '.join(VARIANT_NAMES)}")
        if not self.thresholds or not all(0 < t < 1 for t in self.thresholds):
            raise UserError(f"keep thresholds {self.thresholds}: give at least one, each in (0, 1)")
        if not self.rules:
            raise UserError("the choice needs at least one page rule")
        if not 0 <= self.max_fallback_share <= 1:
            raise UserError(f"max fallback share {self.max_fallback_share}: give a share in [0, 1]")


def choose(records: Sequence[PageRecord], idx: Sequence[int], fits: Fits,
           choice: Choice | None = None, log: Any = None,
           ) -> tuple[str, float, PageRule, dict[int, np.ndarray], dict[str, Any]]:
    """(variant, threshold, page rule) among ``choice``'s by leave-one-source-out on the
    pages ``idx``, and the context features of those pages (the ``two`` variant's, built on
    the stage-1 out-of-source probabilities), and every setting's inner margins. Chosen,
    among the settings that send at most ``choice.max_fallback_share`` of the held-out pages
    to the fallback: the one whose worst held-out source has the best F1 margin over
    trafilatura there (one stage before two when within 0.001 of it)."""
    choice = choice or Choice()
    variants, rules = choice.variants, choice.rules
    check_fallback_texts(records, idx, rules)
    by = sources_of(records, idx)
    if len(by) < 2:
        raise UserError("choosing the block model's settings needs two sources at least")
    traf = {s: extraction_scores(list(baseline_rows(records, "trafilatura", ix).values()))["f1"]
            for s, ix in by.items()}
    oof: dict[int, np.ndarray] = {}
    for held, test in by.items():
        oof.update(probabilities(fits.get(set(by) - {held}), records, test))
    two = "two" in variants
    ctx = {i: context_features(records[i].table, records[i].x, oof[i]) for i in idx} if two else {}
    margins: dict[tuple[str, float, PageRule], list[float]] = defaultdict(list)
    shares: dict[tuple[str, float, PageRule], list[float]] = defaultdict(list)
    for held, test in by.items():
        fit_on = [i for s, ix in by.items() if s != held for i in ix]
        options = [("one", {i: oof[i] for i in test})] if "one" in variants else []
        if two:
            second = fit_forest(records, fit_on, STAGE2, ctx)
            options.append(("two", probabilities(second, records, test, ctx)))
        if "mix" in variants:
            net = fits.sequence(set(by) - {held})
            options.append(("mix", {i: mixed(oof[i], net.probability(records[i].x)) for i in test}))
        for variant, probs in options:
            memo: dict[Any, Any] = {}
            for t in choice.thresholds:
                for rule in rules:
                    sent: set[int] = set()
                    rows = page_rows(records, probs, t, rule, memo, sent)
                    f1 = extraction_scores(list(rows.values()))["f1"]
                    margins[variant, t, rule].append(f1 - traf[held])
                    shares[variant, t, rule].append(len(sent) / len(probs) if probs else 0.0)
                    if log:
                        log(f"  inner: held {held}, {variant} stage(s), threshold {t}, {rule}: "
                            f"F1 {f1:.4f} (trafilatura {traf[held]:.4f})")
    allowed = {k: m for k, m in margins.items()
               if float(np.mean(shares[k])) <= choice.max_fallback_share}
    variant, t, rule = select_setting(allowed, lambda key: key[0])
    return variant, t, rule, ctx, {
        setting_name(v, tt, r): [round(m, 5) for m in ms] + [round(float(np.mean(shares[v, tt, r])), 4)]
        for (v, tt, r), ms in margins.items()}


def select_setting(margins: Mapping[K, Sequence[float]], variant_of: Callable[[K], str]) -> K:
    """The setting whose worst held-out source has the best margin over trafilatura; among
    those within 0.001 of it, a one-stage setting first (cheaper, and as good), then the
    best worst margin (the first of equals, in ``margins``' order). ``variant_of`` reads a
    setting's variant from its key (tuple keys in :func:`choose`, :func:`setting_name`
    strings in the selection experiment)."""
    best = max(min(m) for m in margins.values())
    near = {key: m for key, m in margins.items() if min(m) >= best - 0.001}
    return min(near, key=lambda key: (variant_of(key) != "one", -min(near[key])))


def setting_name(variant: str, threshold: float, rule: PageRule) -> str:
    """A setting's name in :func:`choose`'s inner margins (and the model file's meta):
    variant/threshold/fill/lead/fallback/headline/comments (the fallback's word count, then
    ``:resiliparse`` where it is not trafilatura)."""
    fallback = (f"{rule.fallback_words}" if rule.fallback_to == "trafilatura" or rule.fallback_words is None
                else f"{rule.fallback_words}:{rule.fallback_to}")
    return (f"{variant}/{threshold}/{rule.fill_below}/{rule.lead_words}/{fallback}/"
            f"{int(rule.drop_headline)}/{rule.comment_words}")


def fit_model(records: Sequence[PageRecord], idx: Sequence[int], fits: Fits | None = None,
              meta: dict[str, Any] | None = None, choice: Choice | None = None,
              log: Any = None) -> BlockModel:
    """Variant, threshold and page rule (among ``choice``'s) by :func:`choose` on ``idx``,
    then the stages fitted on every page of it (the context stage on the out-of-source
    stage-1 probabilities, as it will see a model's probabilities on pages it was not fitted
    on)."""
    fits = fits or Fits(records, log)
    variant, threshold, rule, ctx, margins = choose(records, idx, fits, choice, log)
    sources = sources_of(records, idx)
    forest = fits.get(sources)
    context = fit_forest(records, idx, STAGE2, ctx) if variant == "two" else None
    sequence = fits.sequence(sources) if variant == "mix" else None
    info = {"stages": 2 if context else 1, "stage1": STAGE1, "stage2": STAGE2 if context else None,
            "sequence": fits.setting if sequence else None, "variant": variant,
            "inner_margins": margins, "sources": sorted(sources), **(meta or {})}
    return BlockModel(forest, threshold, NAMES, info, context, rule, sequence)


def cross_validate(records: Sequence[PageRecord], choice: Choice | None = None,
                   log: Any = None, fits: Fits | None = None) -> dict[str, Any]:
    """Nested leave-one-source-out: per held-out source (and per set inside it) the block
    model's F1 from a model chosen (among ``choice``'s settings) and fitted without it, next
    to the baselines' F1 on the same pages; and every source's pages pooled."""
    by = sources_of(records)
    if len(by) < 3:
        raise UserError("cross-validation by source needs pages of three sources")
    fits = fits or Fits(records, log)
    out: dict[str, Any] = {}
    pooled: dict[str, list] = defaultdict(list)
    for held, test in by.items():
        fit_on = [i for s, ix in by.items() if s != held for i in ix]
        model = fit_model(records, fit_on, fits, choice=choice, log=log)
        probs = {i: model.probability(records[i].table) for i in test}
        sent: set[int] = set()
        rows = page_rows(records, probs, model.threshold, model.rule, sent=sent)
        share = len(sent) / len(probs) if probs else 0.0
        base = {b: baseline_rows(records, b, test) for b in BASELINES}
        pooled["blocks"] += list(rows.values())
        for b in BASELINES:
            pooled[b] += list(base[b].values())
        groups = {held: test}
        names = sorted({records[i].set for i in test})
        if len(names) > 1:
            groups.update({n: [i for i in test if records[i].set == n] for n in names})
        for name, ix in groups.items():
            out[name] = {
                "source": held, "pages": len(ix),
                "blocks": extraction_scores([rows[i] for i in ix]),
                **{b: extraction_scores([base[b][i] for i in ix]) for b in BASELINES},
                "threshold": model.threshold, "model": VARIANT_NAMES[model.meta["variant"]],
                "rule": describe_rule(model.rule), "fallback": round(share, 4),
            }
    out["pooled"] = {"source": "all", "pages": len(records),
                     **{k: extraction_scores(v) for k, v in pooled.items()},
                     "threshold": "", "model": "", "rule": "", "fallback": ""}
    return out


def describe_rule(rule: PageRule) -> str:
    """A page rule in words, as the cross-validation's table and ``train``'s summary show it."""
    parts = [f"fill >= {rule.fill_below}" if rule.fill_below is not None else "",
             f"lead < {rule.lead_words} words" if rule.lead_words is not None else "",
             f"fallback to {rule.fallback_to} < {rule.fallback_words} words" if rule.fallback_words is not None else "",
             "headline dropped" if rule.drop_headline else "",
             f"article comments dropped past {rule.comment_words} words" if rule.comment_words is not None else ""]
    return ", ".join(p for p in parts if p) or "none"


def report_rows(results: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    header = ["set", "pages", "blocks F1", "trafilatura F1", "cascade F1", "vs trafilatura",
              "vs cascade", "threshold", "model", "page rule", "fallback share"]
    rows = []
    for name, r in results.items():
        b, t, c = r["blocks"]["f1"], r["trafilatura"]["f1"], r["cascade"]["f1"]
        rows.append([name, r["pages"], f"{b:.4f}", f"{t:.4f}", f"{c:.4f}", f"{b - t:+.4f}",
                     f"{b - c:+.4f}", r["threshold"], r["model"], r["rule"], r["fallback"]])
    return header, rows
