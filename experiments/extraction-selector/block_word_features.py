"""First look at two word-based block features for the block extractor (issue 57), on the
cached block records of ``afm extraction blocks table``: trees only (the shipped tree
setting), one fit per held-out source on the other three, the shipped page rule, F1 minus
trafilatura's at each threshold. The block features themselves know no words: text shape,
markup, containers and position only.

* ``function-words``: the block's share of function words (jusText's stoplist of the page's
  language, the list that covers most of the page's words), that share against the page's,
  their count, the page's share, and the previous and next blocks' share (jusText's signal).
* ``word-scores``: a learned score per word, the log-odds of a word appearing in content
  blocks against other blocks of the training sources (each source weighing the same;
  a training source's blocks are scored from the other training sources only, so the trees
  do not learn to trust a score fitted on their own rows), the block's mean and minimum
  over its first 40 words, the share of its words scored, and its neighbours' mean.

    python experiments/extraction-selector/block_word_features.py CACHE {base,function-words,word-scores}
"""

from __future__ import annotations

import collections
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from figures_rule import FIGURES_RULE

from afm.filters.extraction import block_train as bt
from afm.filters.extraction.block_features import shift
from afm.filters.extraction.gold import extraction_scores

WORD = re.compile(r"[^\W\d_]+")
LANGUAGES = ("English", "German", "French", "Spanish", "Italian", "Portuguese", "Dutch", "Russian", "Polish",
             "Czech", "Swedish", "Danish", "Norwegian_Bokmal", "Finnish", "Turkish", "Indonesian", "Hungarian",
             "Romanian")
MAX_WORDS = 40  # a block's first words scored by ``word-scores``


def with_neighbours(f: np.ndarray) -> np.ndarray:
    """``f`` with its first column of the previous and the next block appended."""
    first = f[:, :1]
    return np.hstack([f, shift(first, 1), shift(first, -1)])


def function_word_features(texts: Sequence[str], stoplists: dict[str, frozenset[str]]) -> np.ndarray:
    words = [WORD.findall(t.lower()) for t in texts]
    every = [w for ws in words for w in ws]
    out = np.zeros((len(texts), 4), np.float32)
    if not every:
        return with_neighbours(out)
    stop = max(stoplists.values(), key=lambda s: sum(w in s for w in every))
    page = sum(w in stop for w in every) / len(every)
    for i, ws in enumerate(words):
        if ws:
            n = sum(w in stop for w in ws)
            out[i] = (n / len(ws), n / len(ws) - page, math.log1p(n), page)
    return with_neighbours(out)


def word_counts(records: Sequence[bt.PageRecord], words: list[list[list[str]]],
                source: dict[int, str]) -> dict[str, tuple[collections.Counter, collections.Counter]]:
    """Per source: in how many content and other labelled blocks each word appears."""
    out: dict[str, tuple[collections.Counter, collections.Counter]] = {}
    for i, r in enumerate(records):
        content, other = out.setdefault(source[i], (collections.Counter(), collections.Counter()))
        for ws, label in zip(words[i], r.label):
            if ws and not np.isnan(label):
                (content if label >= bt.COVERED else other).update(set(ws))
    return out


def word_scores(counts: dict[str, tuple[collections.Counter, collections.Counter]], sources: Sequence[str],
                min_rate: float = 5e-5) -> dict[str, float]:
    """Each word's log-odds of content over other blocks, the sources weighing the same
    (words rarer than ``min_rate`` of a source's blocks on average: no score)."""
    content, other = collections.Counter(), collections.Counter()
    for s in sources:
        c, o = counts[s]
        nc, no = max(sum(c.values()), 1), max(sum(o.values()), 1)
        for w, n in c.items():
            content[w] += n / nc
        for w, n in o.items():
            other[w] += n / no
    return {w: math.log((content[w] + 1e-5) / (other[w] + 1e-5)) for w in set(content) | set(other)
            if (content[w] + other[w]) / len(sources) >= min_rate}


def word_score_features(words: list[list[str]], scores: dict[str, float]) -> np.ndarray:
    out = np.zeros((len(words), 4), np.float32)
    for b, ws in enumerate(words):
        values = [scores[w] for w in ws if w in scores]
        if values:
            out[b] = (np.mean(values), min(values), len(values) / len(ws), 1.0)
    return with_neighbours(out)


def first_look(records: Sequence[bt.PageRecord], extra: Callable[[str], dict[int, np.ndarray]] | None) -> None:
    """Per held-out source, F1 minus trafilatura's at each threshold, the features extended
    by ``extra(held)`` (page index -> columns) when given."""
    base = [r.x for r in records]
    by = bt.sources_of(records)
    for held, test in by.items():
        start = time.time()
        columns = extra(held) if extra else {}
        for i, r in enumerate(records):
            r.x = np.hstack([base[i], columns[i]]) if columns else base[i]
        forest = bt.fit_forest(records, [i for s, ix in by.items() if s != held for i in ix], bt.STAGE1)
        probs = bt.probabilities(forest, records, test)
        traf = extraction_scores(list(bt.baseline_rows(records, "trafilatura", test).values()))["f1"]
        memo: dict = {}
        margins = [extraction_scores(list(bt.page_rows(records, probs, t, FIGURES_RULE, memo).values()))["f1"] - traf
                   for t in bt.THRESHOLDS]
        print(f"held out {held:12s} " + " / ".join(f"{t}: {m:+.4f}" for t, m in zip(bt.THRESHOLDS, margins))
              + f"  ({time.time() - start:.0f} s)", flush=True)


def main() -> None:
    cache, variant = Path(sys.argv[1]), sys.argv[2]
    records = bt.load_records(cache)
    if variant == "base":
        first_look(records, None)
    elif variant == "function-words":
        import justext

        stoplists = {lang: frozenset(justext.get_stoplist(lang)) for lang in LANGUAGES}
        columns = {i: function_word_features(r.table.texts, stoplists) for i, r in enumerate(records)}
        first_look(records, lambda held: columns)
    elif variant == "word-scores":
        words = [[WORD.findall(t.lower())[:MAX_WORDS] for t in r.table.texts] for r in records]
        source = {i: s for s, ix in bt.sources_of(records).items() for i in ix}
        counts = word_counts(records, words, source)

        def columns(held: str) -> dict[int, np.ndarray]:
            training = [s for s in counts if s != held]
            tables = {s: word_scores(counts, [x for x in training if x != s]) for s in training}
            tables[held] = word_scores(counts, training)
            return {i: word_score_features(words[i], tables[source[i]]) for i in range(len(records))}

        first_look(records, columns)
    else:
        raise SystemExit(f"unknown variant {variant!r}: base, function-words or word-scores")


if __name__ == "__main__":
    main()
