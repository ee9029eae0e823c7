"""What the selector sees of each candidate's output on one page: the fast path's
agreement (used by the shipped cascade) and the older switch model's features (used only
by a selector file without a vote).

Everything is computed from the candidates' texts and two page-level counts, so it
costs a fraction of one extractor: lengths (absolute, relative to the longest candidate
and to every word on the page), shape (lines, words per line, share of prose lines,
lines that end a sentence) and, most telling, agreement: how much of a candidate's text
the other candidates also found (``support``, a precision proxy) and how much of theirs
it covers (``cover``, a recall proxy), on the metric's own 4-token shingles. Two
extractors from different families agreeing on a block is evidence the block is content.
"""

from __future__ import annotations

import math
import re

import numpy as np

_TOKEN = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"[.!?:;\"'\u201d)]\s*$")

PER_CANDIDATE = ("log_words", "rel_longest", "rel_page", "log_lines", "words_per_line",
                 "prose_share", "sentence_end_share", "support", "cover", "max_cover",
                 "empty")
PER_PAGE = ("log_page_words", "page_agreement")


def feature_names(candidates: tuple[str, ...]) -> list[str]:
    return [*PER_CANDIDATE, *PER_PAGE, *(f"is_{c}" for c in candidates)]


def shingle_set(text: str, n: int = 4) -> set[int]:
    toks = _TOKEN.findall(text)
    if len(toks) < n:
        return {hash(tuple(toks))} if toks else set()
    return set(map(hash, zip(*(toks[i:] for i in range(n)))))  # no per-shingle slicing


def _shape(text: str) -> tuple[int, int, float, float]:
    """(words, lines, share of words in lines of >= 10 words, share of lines ending a sentence)."""
    lines = [line for line in text.split("\n") if line.strip()]
    counts = [len(_TOKEN.findall(line)) for line in lines]
    words = sum(counts)
    prose = sum(c for c in counts if c >= 10)
    ends = sum(1 for line in lines if _SENTENCE_END.search(line))
    return words, len(lines), prose / words if words else 0.0, ends / len(lines) if lines else 0.0


def page_features(texts: dict[str, str], candidates: tuple[str, ...], page_words: int
                  ) -> np.ndarray:
    """One row per candidate (in ``candidates`` order) of :func:`feature_names` columns."""
    k = len(candidates)
    shapes = [_shape(texts.get(c, "")) for c in candidates]
    sets = [shingle_set(texts.get(c, "")) for c in candidates]
    longest = max((s[0] for s in shapes), default=0)
    overlap = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            overlap[i, j] = overlap[j, i] = len(sets[i] & sets[j])
    sizes = np.array([len(s) for s in sets], dtype=float)
    # Agreement of the two cheapest families (trafilatura's heuristics and Resiliparse's),
    # the fast path's own signal; 1.0 where one of them is missing from ``candidates``.
    agreement = 1.0
    if "traf_recall" in candidates and "resiliparse" in candidates:
        a, b = candidates.index("traf_recall"), candidates.index("resiliparse")
        agreement = 2 * overlap[a, b] / max(sizes[a] + sizes[b], 1.0)
    rows = np.zeros((k, len(PER_CANDIDATE) + len(PER_PAGE) + k), dtype=np.float32)
    for i, (words, lines, prose, ends) in enumerate(shapes):
        others = [j for j in range(k) if j != i and sizes[j] > 0]
        support = (float(np.mean([overlap[i, j] / sizes[i] for j in others]))
                   if others and sizes[i] else 0.0)
        covers = [overlap[i, j] / sizes[j] for j in others]
        rows[i, :len(PER_CANDIDATE)] = (
            math.log1p(words), words / longest if longest else 0.0,
            min(words / page_words, 2.0) if page_words else 0.0, math.log1p(lines),
            math.log1p(words / lines) if lines else 0.0, prose, ends, support,
            float(np.mean(covers)) if covers else 0.0, max(covers, default=0.0),
            float(words == 0))
        rows[i, len(PER_CANDIDATE):len(PER_CANDIDATE) + len(PER_PAGE)] = (
            math.log1p(page_words), agreement)
        rows[i, len(PER_CANDIDATE) + len(PER_PAGE) + i] = 1.0
    return rows


SWITCH_EXTRA = ("rel_shingles_ref", "share_in_ref", "ref_covered", "empty", "ref_empty")


def switch_feature_names(candidates: tuple[str, ...]) -> list[str]:
    """Columns of :func:`switch_features`: the candidate's own row, the reference's row,
    then how the two relate."""
    own = feature_names(candidates)
    return [*own, *(f"ref_{n}" for n in own), *SWITCH_EXTRA]


def agreement(a: str, b: str) -> float:
    """Dice overlap of two texts' 4-token shingles: the fast path's test (1.0 when both
    are empty: nothing to disagree about)."""
    x, y = shingle_set(a), shingle_set(b)
    return 2 * len(x & y) / (len(x) + len(y)) if x or y else 1.0


def switch_features(texts: dict[str, str], reference: str, others: tuple[str, ...],
                    page_words: int) -> np.ndarray:
    """One row per candidate of ``others``: what the switch model reads to predict how
    much better (or worse) than ``reference`` that candidate is on this page. Relative
    columns matter because the question is "switch or not", never "how good in absolute"."""
    cands = (reference, *others)
    base = page_features(texts, cands, page_words)
    ref = shingle_set(texts.get(reference, ""))
    n_ref = max(len(ref), 1)
    rows = []
    for k, name in enumerate(others, 1):
        own = shingle_set(texts.get(name, ""))
        inter = len(own & ref)
        rel = np.array([len(own) / n_ref, inter / max(len(own), 1), inter / n_ref,
                        float(not own), float(not ref)], dtype=np.float32)
        rows.append(np.concatenate([base[k], base[0], rel]))
    return np.array(rows, dtype=np.float32)
