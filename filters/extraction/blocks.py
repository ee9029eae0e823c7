"""The union of the candidates' blocks, each with who found it: what the block model
keeps or drops.

Candidates split a page into lines (blocks) differently, so blocks are matched by their
content, on the metric's own tokens: a block of one candidate is *in* another when most
of its 4-token shingles are there (a block of fewer than 6 tokens: when its folded text
is a substring of the other's). The union starts from the first candidate's blocks in
order; each other candidate's new blocks are inserted after the last block of theirs
that was already in the union, so the merged text keeps the page's reading order.

Per block the model sees: the share of it each candidate found (``-1`` for a candidate
that did not run), its length and shape, and page-level context (how much the
candidates agree, their lengths relative to the first, the page's words).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

_TOKEN = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"[.!?:;\"'\u201d)]\s*$")
SHORT = 6  # blocks of fewer tokens are matched as folded substrings

BLOCK_FEATURES = ("log_words", "sentence_end", "digit_share", "upper_start", "position",
                  "in_first_run", "log_page_words", "page_agreement", "log_first_words")


def block_feature_names(candidates: tuple[str, ...]) -> list[str]:
    return [*(f"in_{c}" for c in candidates), *(f"rel_words_{c}" for c in candidates[1:]),
            *BLOCK_FEATURES]


@dataclass
class Block:
    text: str
    tokens: list[str]
    shingles: list[int]
    pos: float
    source: int  # index of the candidate it was first taken from
    support: list[float] = field(default_factory=list)


def _shingles(tokens: list[str]) -> list[int]:
    return [hash(tuple(tokens[i: i + 4])) for i in range(len(tokens) - 3)]


def _fold(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


class _Text:
    """One candidate's text, indexed for membership tests."""

    def __init__(self, text: str) -> None:
        self.lines = [line for line in text.split("\n") if line.strip()]
        self.tokens = [_TOKEN.findall(line) for line in self.lines]
        self.shingles = [_shingles(t) for t in self.tokens]
        self.all = set().union(*self.shingles) if self.shingles else set()
        self.folded = " " + _fold(text) + " "
        self.words = sum(len(t) for t in self.tokens)

    def share(self, tokens: list[str], shingles: list[int], text: str) -> float:
        if len(tokens) < SHORT or not shingles:
            return float(bool(tokens) and f" {_fold(text)} " in self.folded)
        return sum(s in self.all for s in shingles) / len(shingles)


def merge_blocks(texts: list[str]) -> tuple[list[Block], list[_Text]]:
    """The union of the candidates' blocks in reading order, with each block's
    ``support`` (the share of it every candidate found)."""
    indexed = [_Text(t) for t in texts]
    blocks: list[Block] = []
    owner: dict[int, int] = {}  # shingle -> index in ``blocks`` (first holder)
    for c, cand in enumerate(indexed):
        anchor, inserted = -1.0, 0
        for line, tokens, shingles in zip(cand.lines, cand.tokens, cand.shingles):
            if c == 0:
                present = False
            elif len(tokens) < SHORT or not shingles:
                present = any(b.text == line for b in blocks)
            else:
                present = sum(s in owner for s in shingles) >= 0.5 * len(shingles)
            if present:
                if shingles:
                    holders = [owner[s] for s in shingles if s in owner]
                    if holders:
                        anchor, inserted = blocks[max(set(holders), key=holders.count)].pos, 0
                continue
            inserted += 1
            pos = float(len(blocks)) if c == 0 else anchor + inserted * 1e-3 / (c + 1)
            blocks.append(Block(line, tokens, shingles, pos, c))
            for s in shingles:
                owner.setdefault(s, len(blocks) - 1)
            if c:
                anchor, inserted = pos, 0
    blocks.sort(key=lambda b: b.pos)
    for b in blocks:
        b.support = [cand.share(b.tokens, b.shingles, b.text) for cand in indexed]
    return blocks, indexed


def block_features(blocks: list[Block], indexed: list[_Text], n_candidates: int,
                   page_words: int) -> np.ndarray:
    """One row per block (:func:`block_feature_names` for ``n_candidates`` candidates;
    candidates beyond ``len(indexed)`` did not run and read -1)."""
    first = max(indexed[0].words, 1)
    ran = len(indexed)
    rel = [(indexed[c].words / first) if c < ran else -1.0 for c in range(1, n_candidates)]
    a, b = (indexed[0].all, indexed[1].all) if ran > 1 else (indexed[0].all, indexed[0].all)
    agreement = 2 * len(a & b) / max(len(a) + len(b), 1)
    n = len(blocks)
    rows = np.full((n, n_candidates + (n_candidates - 1) + len(BLOCK_FEATURES)), -1.0,
                   dtype=np.float32)
    for i, blk in enumerate(blocks):
        words = len(blk.tokens)
        digits = sum(ch.isdigit() for ch in blk.text)
        rows[i, :ran] = blk.support
        rows[i, n_candidates:2 * n_candidates - 1] = rel
        rows[i, 2 * n_candidates - 1:] = (
            math.log1p(words), float(bool(_SENTENCE_END.search(blk.text))),
            digits / max(len(blk.text), 1), float(blk.text[:1].isupper()), i / max(n - 1, 1),
            float(blk.source == 0), math.log1p(page_words), agreement, math.log1p(first))
    return rows


def join(blocks: list[Block], keep: np.ndarray) -> str:
    return "\n".join(b.text for b, k in zip(blocks, keep) if k)
