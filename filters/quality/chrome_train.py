"""How the shipped chrome line model (``quality.chrome_model: builtin``) is made, and how
the threshold of its rule is chosen, without looking at any set it is reported on.

* **Lines**: the visible lines of WCXB's pages (both its splits, article, forum,
  documentation and service pages; CC-BY-4.0) that hold none of the page's main text are ``chrome``
  (:func:`~afm.filters.quality.junk.boilerplate_lines`, the lines the junk generator builds
  boilerplate from); the lines of the main texts, and of this machine's package docs,
  READMEs and manual pages, are ``content``. Sites and documents are split by a seeded
  hash: 70% train the model, the other 30% choose the threshold.
  Only lines of :data:`~afm.filters.quality.chrome_model.MAX_LINE_WORDS` words or fewer are
  taken (the rule reads no longer line as chrome).
* **The vocabulary**: the words of those lines that :data:`VOCABULARY_MIN_SITES` or more of
  the training units use; the model reads every other word as ``_w_`` (a site's topic is
  not chrome; :func:`~afm.filters.quality.chrome_model.delexicalise`).
* **The model**: fastText, word bigrams, a 16-wide embedding, quantised (under 1 MB).
* **The threshold** (``quality.max_chrome_model_share``): the share that keeps
  :data:`KEEP_TARGET` of the development good text the other document stages keep (the
  held-out sites' main texts and the held-out technical documents), fixed before any junk
  is scored; the development junk (every kind, made from the held-out sites' pages) is
  then reported at it, never used to move it. Held-out figures (ScrapingHub, Utomo & Leu,
  manual pages and the standard library's reference: sets the model never read) are in
  docs/quality.md.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from afm.filters.classifier import preprocess, train_classifier
from afm.filters.quality.audit import (
    keep_threshold,
    rule_development_report,
    signal_values,
    write_sidecar,
)
from afm.filters.quality.chrome_model import CHROME, CONTENT, MAX_LINE_WORDS, delexicalise
from afm.filters.quality.junk import boilerplate_lines
from afm.filters.quality.rules import QualityConfig, QualityHeuristicsFilter
from afm.filters.quality.texts import KindText

KEEP_TARGET = 0.98  # share of development good text (that the other stages keep) the threshold keeps
SHARE_DECIMALS = 2  # the threshold rounded up to a hundredth of the text
SEED = 0
VOCABULARY_MIN_SITES = 20  # a word is kept when this many training units use it
TECHNICAL_LINES = 60  # lines taken from each technical document (a manual page is thousands)
# The fastText settings: word bigrams, a small embedding, quantised to ship (~0.9 MB).
SETTINGS: dict[str, Any] = {"epoch": 10, "lr": 0.3, "wordNgrams": 2, "dim": 16, "min_count": 2,
                            "bucket": 200_000, "quantize_cutoff": 50_000}


def training_lines(pages: Sequence[KindText], boilerplate: dict[str, str],
                   technical: Sequence[KindText] = (), *, seed: int = SEED
                   ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(chrome lines, content lines) of :data:`MAX_LINE_WORDS` words or fewer, each with its
    unit (site, package, manual page): each page's boilerplate lines that hold none of its
    main text, and the lines of the main texts and of ``technical`` documents (at most
    :data:`TECHNICAL_LINES` of each, sampled)."""
    rng = random.Random(seed)
    chrome: list[tuple[str, str]] = []
    content: list[tuple[str, str]] = []
    for t in pages:
        content += [(t.unit, line.strip()) for line in t.text.splitlines() if _short(line)]
        chrome += [(t.unit, line) for line in boilerplate_lines(boilerplate.get(t.id, ""), t.text) if _short(line)]
    for t in technical:
        lines = [line.strip() for line in t.text.splitlines() if _short(line)]
        rng.shuffle(lines)
        content += [(t.unit, line) for line in lines[:TECHNICAL_LINES]]
    return chrome, content


def _short(line: str) -> bool:
    return 0 < len(line.split()) <= MAX_LINE_WORDS


def site_vocabulary(lines: Sequence[tuple[str, str]], min_units: int = VOCABULARY_MIN_SITES) -> list[str]:
    """The words (as :func:`~afm.filters.classifier.preprocess` splits them) that at least
    ``min_units`` units use in ``lines`` ((unit, line) pairs), sorted."""
    units: dict[str, set[str]] = defaultdict(set)
    for unit, line in lines:
        for word in set(preprocess(line).split()):
            units[word].add(unit)
    return sorted(w for w, u in units.items() if len(u) >= min_units)


def train_chrome_model(pages: Sequence[KindText], boilerplate: dict[str, str],
                       technical: Sequence[KindText], out: str | Path) -> dict[str, Any]:
    """Fit the line classifier on the delexicalised lines of ``pages`` and ``technical``
    (``.ftz``; the vocabulary goes into its sidecar)."""
    chrome, content = training_lines(pages, boilerplate, technical)
    vocabulary = site_vocabulary(chrome + content)
    kept = frozenset(vocabulary)
    report = train_classifier([delexicalise(line, kept) for _, line in chrome],
                              [delexicalise(line, kept) for _, line in content], out,
                              label_pos=CHROME, label_neg=CONTENT, held_out=0.05, seed=SEED,
                              verbose=False, **SETTINGS)
    write_sidecar(out, {"vocabulary": vocabulary, "vocabulary_min_sites": VOCABULARY_MIN_SITES})
    return {"chrome_lines": len(chrome), "content_lines": len(content), "pages": len(pages),
            "technical_documents": len(technical), "vocabulary_words": len(vocabulary), "line_metrics": {
                k: round(float(report[k]), 4) for k in ("precision", "recall", "accuracy", "f1")},
            "settings": SETTINGS, "bytes": Path(out).stat().st_size}


def choose_threshold(shares: Sequence[float], keep: float = KEEP_TARGET) -> float:
    """The share that keeps ``keep`` of ``shares`` (rounded up to two decimals)."""
    return keep_threshold(shares, keep, decimals=SHARE_DECIMALS)


def rule_shares(model_path: str | Path, texts: Sequence[str]) -> list[float]:
    """Each text's ``afm_chrome_model_share`` as the quality rule computes it (on the
    prose lines: code, markup and quotations set aside, wrapped lines joined; the texts'
    language is not given, so every text is read)."""
    rule = QualityHeuristicsFilter(QualityConfig(chrome_model=str(model_path), max_chrome_model_share=None))
    return signal_values(rule, "afm_chrome_model_share", texts)


def development_report(model_path: str | Path, good: Sequence[KindText], web: Sequence[KindText],
                       boilerplate: dict[str, str], passes: Callable[[list[str]], list[bool]], *,
                       per_kind: int = 300, seed: int = 11, keep: float = KEEP_TARGET) -> dict[str, Any]:
    """The share threshold chosen on the development good text the other stages keep,
    then the development junk made from the pages of ``web`` reported at it
    (:func:`~afm.filters.quality.audit.rule_development_report`)."""
    return rule_development_report(lambda texts: rule_shares(model_path, texts), good, web, boilerplate, passes,
                                   keep=keep, decimals=SHARE_DECIMALS, quantile_key="good_share_quantiles",
                                   per_kind=per_kind, seed=seed, ndigits=3, quantiles=(0.5, 0.9, 0.95, 0.98, 0.99))
