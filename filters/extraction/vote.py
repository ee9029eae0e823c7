"""Block-level voting: the reference extractor's text plus the lines most extractors found.

Picking one candidate per page cannot beat the best candidate on a page; merging their
*blocks* can. Bevendorff et al. (SIGIR 2023, "An Empirical Comparison of Web Content
Extraction Algorithms") report that a majority vote of extractors beats every single
one; this is that vote on lines (one paragraph each), so the merged text keeps whole
paragraphs in page order:

1. :func:`pool` is the union of the candidates' lines in document order: the
   reference's lines, then every other candidate's lines the pool does not already cover
   (half or more of their 4-token shingles), each run of new lines placed after the pool
   line its candidate's previous line matched, so the order is the page's wherever some
   candidate kept it.
2. :func:`containment` says how much of each pooled line every candidate holds.
3. :func:`vote_text` keeps every line of the reference and adds a line the reference
   lacks when at least ``min_votes`` of the other voters hold it (a strict majority of
   all the extractors when ``min_votes`` is :func:`majority`).

Why the reference is never out-voted: on WCXB's listing and collection pages trafilatura's
default mode alone keeps content the other families drop, and a symmetric vote (or a
learned per-line model) lost there and on ScrapingHub when held out by set
(``experiments/extraction-selector/README.md``); additions by majority held up on all three.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

_TOKEN = re.compile(r"\w+")
# A later candidate's line is already in the pool when this share of its shingles is
# (a paragraph two extractors split differently is not new).
COVERED = 0.5
# A candidate holds a line when it holds this share of the line's shingles.
HOLDS = 0.5


def _tokens(line: str) -> list[str]:
    return _TOKEN.findall(line.lower())


def _shingles(tokens: list[str], n: int = 4) -> list[int]:
    """Hashed n-token shingles of one line (a line under n tokens is one shingle)."""
    if len(tokens) < n:
        return [hash(tuple(tokens))] if tokens else []
    return list(map(hash, zip(*(tokens[i:] for i in range(n)))))


def majority(n_voters: int) -> int:
    """Votes a line the reference lacks needs: a strict majority of all ``n_voters + 1``
    extractors (the reference, which lacks it, counts against)."""
    return n_voters // 2 + 1


def pool(texts: dict[str, str], order: Sequence[str]) -> list[str]:
    """The union of the candidates' lines (``order[0]``'s first, in full), in document
    order as far as the candidates agree on it, without near-duplicates.

    Each line gets a sort key: the first candidate's line ``i`` is ``(i,)``; a later
    candidate's new line goes after the pool line its predecessor matched (the anchor),
    as ``anchor + (rank, q)`` for the ``q``-th line of a run of new lines, so keys sort
    in page order and a later candidate's run follows an earlier one's at one anchor."""
    lines: dict[tuple[int, ...], str] = {}
    where: dict[int, tuple[int, ...]] = {}  # shingle -> key of the first line holding it
    for rank, name in enumerate(order):
        cursor: tuple[int, ...] = (-1,)  # key after which the next new line goes
        run: tuple[tuple[int, ...], int] | None = None  # (anchor, index) in a run of new lines
        for line in (texts.get(name) or "").split("\n"):
            toks = _tokens(line)
            if not toks:
                continue
            sh = _shingles(toks)
            hits = [where[s] for s in sh if s in where]
            if rank and len(hits) >= COVERED * len(sh):
                cursor, run = max(hits, key=hits.count), None
                continue
            if rank == 0:
                key: tuple[int, ...] = (len(lines),)
                cursor = key
            else:
                run = (cursor, 0) if run is None else (run[0], run[1] + 1)
                key = (*run[0], rank, run[1])
            lines[key] = line
            for s in sh:
                where.setdefault(s, key)
    return [lines[k] for k in sorted(lines)]


class _LinePool:
    """One text's 4-token shingles taken within its lines, and its lines under four tokens:
    what "holds a line" is measured against (:func:`containment`, :func:`trim_edges`)."""

    def __init__(self, text: str) -> None:
        per_line = [t for t in map(_tokens, text.split("\n")) if t]
        self.shingles = {s for t in per_line for s in _shingles(t)}
        self.short = {tuple(t) for t in per_line if len(t) < 4}

    def share(self, tokens: list[str], shingles: list[int]) -> float:
        """The share of a line's shingles held; a line under four tokens only as that very line."""
        if len(tokens) < 4:
            return float(tuple(tokens) in self.short)
        return sum(s in self.shingles for s in shingles) / len(shingles)


def containment(lines: Sequence[str], texts: dict[str, str], names: Sequence[str]
                ) -> np.ndarray:
    """(lines, names): the share of each line's shingles each candidate holds (shingles
    taken within the candidate's lines, as the pool's); a line under four tokens is held
    only by a candidate with that very line ("at" is inside every text)."""
    pools = [_LinePool(texts.get(n) or "") for n in names]
    out = np.zeros((len(lines), len(names)), dtype=np.float32)
    for i, line in enumerate(lines):
        toks = _tokens(line)
        if not toks:
            continue
        sh = _shingles(toks)
        for j, held in enumerate(pools):
            out[i, j] = held.share(toks, sh)
    return out


def vote_text(texts: dict[str, str], reference: str, voters: Sequence[str],
              min_votes: int) -> str:
    """The reference's lines and, in page order among them, every line at least
    ``min_votes`` of ``voters`` hold."""
    voters = [v for v in voters if v != reference]
    lines = pool(texts, (reference, *voters))
    if not lines:
        return ""
    held = containment(lines, texts, (reference, *voters)) >= HOLDS
    keep = held[:, 0] | (held[:, 1:].sum(axis=1) >= min_votes)
    return "\n".join(line for line, k in zip(lines, keep) if k)


def trim_edges(text: str, other: str) -> str:
    """``text`` without its leading and trailing lines ``other`` does not hold (as
    :func:`containment` and ``HOLDS`` say: the fast path's answer, trafilatura's fast pass
    less the edge lines Resiliparse lacks, mostly bylines, related-story lists and table
    debris); ``text`` itself when ``other`` holds none of its lines or both end lines.
    Only the edge lines are looked at (most pages: the first and the last), and a line
    found word for word inside one of ``other``'s lines is held without tokenising
    ``other`` (the fast path runs on most pages; this keeps the trim at a few
    microseconds there)."""
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return text
    lowered = other.lower()
    lazy: dict[str, Any] = {}  # built on first need: most pages never need them

    def held(line: str) -> bool:
        toks = _tokens(line)
        if not toks:
            return False
        needle = line.lower().strip()
        if len(toks) >= 4 and _inside_a_line(needle, lowered):
            return True  # every shingle of the line is in that line of ``other``
        if len(toks) < 4:
            if "lines" not in lazy:
                lazy["lines"] = {x.strip() for x in lowered.split("\n")}
            if needle in lazy["lines"]:
                return True  # that very line
        if "pool" not in lazy:
            lazy["pool"] = _LinePool(other)
        return lazy["pool"].share(toks, _shingles(toks)) >= HOLDS

    first = next((i for i, line in enumerate(lines) if held(line)), None)
    if first is None:
        return text
    last = next(i for i in range(len(lines) - 1, first - 1, -1) if held(lines[i]))
    if first == 0 and last == len(lines) - 1:
        return text
    return "\n".join(lines[first:last + 1])


def _inside_a_line(needle: str, haystack: str) -> bool:
    """``needle`` occurs in ``haystack`` within one line and not inside a longer word, so
    its ``\\w+`` tokens are a contiguous run of that line's tokens."""
    start = haystack.find(needle)
    while start >= 0 and needle:
        end = start + len(needle)
        before = haystack[start - 1] if start else " "
        after = haystack[end] if end < len(haystack) else " "
        if "\n" not in needle and not _TOKEN.match(before) and not _TOKEN.match(after):
            return True
        start = haystack.find(needle, start + 1)
    return False
