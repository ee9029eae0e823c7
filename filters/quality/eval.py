"""Labelled real pages for quality models, and the one way quality models are compared.

A page with a human-made gold text (the extraction gold sets of
:mod:`afm.filters.extraction.gold`) gives two real documents with known labels: its
**content** (the gold main text, what a careful extractor keeps) and its **boilerplate**
(the page's visible lines that are not part of the content: menus, teasers, link lists,
footers, cookie notices; what a failed extraction or a thin page leaves). A quality model
should score the first above the second; how well it ranks them is its AUC (the
probability that a random content text outscores a random boilerplate text), which needs
no threshold and so compares models whose scores live on different scales (a fastText
probability, a regression head's 0-5).

Which pages a model may be evaluated on is decided by the caller: a set is only a clean
test of a model that was neither trained nor tuned on it (``data/quality/README.md``
records which sets each shipped model saw).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from afm.errors import UserError
from afm.filters.extraction import gold
from afm.filters.extraction.gold import GoldPage, visible_lines

_WS = re.compile(r"\s+")
MIN_WORDS = 50  # a text shorter than this is no document of either kind
MAX_CHARS = 20_000  # as the classifiers see it (afm.filters.classifier.MAX_CHARS)


@dataclass(frozen=True)
class LabelledText:
    """One real document with its label: 1 content, 0 boilerplate or low-value page."""

    text: str
    label: int
    set: str  # the gold set and page type, e.g. ``wcxb-article``
    page: str  # the page's id in its set
    part: str  # ``content`` or ``boilerplate``
    domain: str  # the page's host (splits keep a site on one side)


def content_and_boilerplate(page: GoldPage) -> tuple[str, str]:
    """The page's gold content, and its visible lines that do not occur in it (in page
    order, one a line), each cut at :data:`MAX_CHARS`."""
    content = (page.truth or "").strip()
    flat = _WS.sub(" ", content)
    rest = [line for line in visible_lines(page.body) if line not in flat]
    return content[:MAX_CHARS], "\n".join(rest)[:MAX_CHARS]


def _domain(url: str | None, fallback: str) -> str:
    host = urlsplit(url).hostname if url else None
    return (host or fallback).removeprefix("www.")


def labelled_texts(
    pages: Iterable[GoldPage],
    *,
    positive_sets: Sequence[str] | None = None,
    negative_content_sets: Sequence[str] = (),
    boilerplate: bool = True,
    min_words: int = MIN_WORDS,
    progress: Callable[[Iterable[GoldPage]], Iterable[GoldPage]] | None = None,
) -> list[LabelledText]:
    """Documents with labels from gold pages: the content of pages of
    ``positive_sets`` (None: every set) is 1, the content of pages of
    ``negative_content_sets`` is 0, and (``boilerplate``) every page's boilerplate is 0.
    Texts under ``min_words`` words are left out. A set name matches a page's set or
    its prefix before the page type (``wcxb`` matches ``wcxb-article``)."""

    def matches(name: str, sets: Sequence[str] | None) -> bool:
        return sets is None or any(name == s or name.startswith(f"{s}-") for s in sets)

    out: list[LabelledText] = []
    for page in progress(pages) if progress else pages:
        pos = matches(page.set, positive_sets)
        neg = bool(negative_content_sets) and matches(page.set, negative_content_sets)
        if not (pos or neg or boilerplate) or page.truth is None:
            continue
        content, rest = content_and_boilerplate(page)
        domain = _domain(page.url, f"{page.set}/{page.id}")
        if (pos or neg) and len(content.split()) >= min_words:
            out.append(LabelledText(content, int(pos and not neg), page.set, page.id, "content", domain))
        if boilerplate and len(rest.split()) >= min_words:
            out.append(LabelledText(rest, 0, page.set, page.id, "boilerplate", domain))
    return out


def split_by_domain(items: Sequence[LabelledText], held_out: float, seed: int = 0
                    ) -> tuple[list[LabelledText], list[LabelledText]]:
    """(train, held-out): whole sites go to one side (``held_out`` of the domains,
    chosen by a seeded hash), so a site's template cannot be learned on one side and
    recognised on the other."""
    import hashlib

    def side(domain: str) -> bool:
        digest = hashlib.sha256(f"{seed}:{domain}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < held_out

    train = [x for x in items if not side(x.domain)]
    test = [x for x in items if side(x.domain)]
    return train, test


def auc(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray) -> float:
    """Area under the ROC curve: P(a random positive outscores a random negative), ties
    counting half (the Mann-Whitney statistic, as ``sklearn.metrics.roc_auc_score``)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"AUC needs both classes; got {n_pos} positive and {n_neg} negative")
    # Ranks with ties averaged (scipy's rankdata), as one vectorised pass.
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    starts = np.flatnonzero(np.r_[True, sorted_s[1:] != sorted_s[:-1]])
    ends = np.r_[starts[1:], len(s)]
    mean_rank = (starts + ends + 1) / 2  # 1-based ranks starts+1 .. ends, averaged
    ranks = np.empty(len(s), dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def paired_auc_difference(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                          labels: Sequence[int] | np.ndarray, *, n_boot: int = 2000, seed: int = 0
                          ) -> tuple[float, float]:
    """AUC(a) - AUC(b) on the same items, and its standard error by a paired bootstrap
    (items resampled with replacement within each class, both models scored on the same
    resample), so the spread the two models share cancels."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    y = np.asarray(labels).astype(int)
    delta = auc(a, y) - auc(b, y)
    rng = np.random.default_rng(seed)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    diffs = np.empty(n_boot)
    for i in range(n_boot):
        idx = np.concatenate([rng.choice(pos, len(pos)), rng.choice(neg, len(neg))])
        diffs[i] = auc(a[idx], y[idx]) - auc(b[idx], y[idx])
    return float(delta), float(diffs.std(ddof=1))


@dataclass
class ModelScore:
    """One model on one labelled set."""

    model: str
    set: str
    n_pos: int
    n_neg: int
    auc: float
    accuracy: float  # at the model's threshold
    threshold: float
    # Against the first model of a comparison: AUC(first) - AUC(this), paired bootstrap SE.
    delta_vs_first: float | None = None
    delta_se: float | None = None


def evaluate(score: Callable[[list[str]], np.ndarray], items: Sequence[LabelledText], *,
             model: str, set_name: str, threshold: float = 0.5) -> ModelScore:
    """AUC and accuracy at ``threshold`` of ``score`` on ``items``."""
    return compare_models({model: score}, items, set_name=set_name, threshold=threshold)[0]


def compare_models(scorers: dict[str, Callable[[list[str]], np.ndarray]], items: Sequence[LabelledText], *,
                   set_name: str, threshold: float | dict[str, float] = 0.5, n_boot: int = 2000
                   ) -> list[ModelScore]:
    """Every model of ``scorers`` on ``items``: AUC, accuracy at its threshold (one for
    all, or one per model name), and for every model after the first, the first one's
    AUC minus its own with a paired bootstrap standard error."""
    texts = [x.text for x in items]
    labels = np.array([x.label for x in items])
    rows: list[ModelScore] = []
    first: np.ndarray | None = None
    for name, score in scorers.items():
        scores = np.asarray(score(texts), dtype=np.float64)
        cut = threshold.get(name, 0.5) if isinstance(threshold, dict) else threshold
        acc = float(np.mean((scores >= cut) == labels.astype(bool))) if len(items) else float("nan")
        row = ModelScore(name, set_name, int(labels.sum()), int((1 - labels).sum()), auc(scores, labels),
                         acc, cut)
        if first is None:
            first = scores
        else:
            row.delta_vs_first, row.delta_se = paired_auc_difference(first, scores, labels, n_boot=n_boot)
        rows.append(row)
    return rows


def by_set(items: Sequence[LabelledText], group: Callable[[str], str] = lambda s: s.split("-")[0]
           ) -> dict[str, list[LabelledText]]:
    """Items grouped by their set family (``wcxb-article`` -> ``wcxb``, ``utomo-chaos``
    -> ``utomo``; pass ``group=str`` to keep page types apart)."""
    out: dict[str, list[LabelledText]] = {}
    for x in items:
        out.setdefault(group(x.set), []).append(x)
    return out


def real_page_sets(*, scrapinghub: str | None = None, utomo: str | None = None, wcxb: str | None = None,
                   progress: Callable[[Iterable[GoldPage]], Iterable[GoldPage]] | None = None
                   ) -> dict[str, list[LabelledText]]:
    """The labelled sets (content 1 vs boilerplate 0 of every page) of the gold sets
    given: ``scrapinghub`` (the ``eval`` folder holding ``extraction/``), ``utomo`` (its
    ``Extraction`` folder: two sets, ``utomo-big5`` and ``utomo-chaos``), ``wcxb`` (the
    development split; every page type)."""

    out: dict[str, list[LabelledText]] = {}
    for path, loader in ((scrapinghub, gold.load_scrapinghub), (utomo, gold.load_utomo),
                         (wcxb, gold.load_wcxb)):
        if path is None:
            continue
        if not Path(path).is_dir():
            raise UserError(f"{path}: no such folder (a gold set of real pages)")
        items = labelled_texts(loader(Path(path)), progress=progress)
        group = (lambda s: s) if loader is gold.load_utomo else (lambda s: s.split("-")[0])
        for name, part in by_set(items, group).items():
            out[name] = part
    return out


__all__ = ["LabelledText", "ModelScore", "auc", "by_set", "content_and_boilerplate", "evaluate",
           "compare_models", "labelled_texts", "paired_auc_difference", "real_page_sets", "split_by_domain", "visible_lines"]
