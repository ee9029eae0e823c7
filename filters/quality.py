"""Heuristic quality rules: Gopher quality + repetition, C4, and FineWeb's extra rules.

These are the published rule sets, with their published thresholds as defaults:

* Gopher (Rae et al. 2021, appendix A.1.1): document length, mean word length,
  symbol-to-word ratios, bullet / ellipsis lines, words with letters, stop words, and the
  repetition rules (duplicate lines / paragraphs, top n-gram and duplicate n-gram character
  fractions).
* C4 (Raffel et al. 2020, section 2.2): line-level cleaning (javascript warnings, policy
  lines, citation markers, over-long words, short lines, optionally lines without terminal
  punctuation) and page-level drops (lorem ipsum, curly brackets, too few sentences).
* FineWeb (Penedo et al. 2024): share of lines ending in punctuation, share of short lines,
  characters in duplicated lines, newlines per word.

The rules run in the order the FineWeb pipeline applied them (Gopher repetition, Gopher
quality, C4, FineWeb). Every rule's signal is computed and reported even when an earlier
rule already failed, so ``afm inspect`` and threshold tuning see the whole picture; the drop
reason is the name of the first failing rule. A rule is switched off by setting its
threshold to ``None`` (or a whole family with ``gopher_quality`` / ``gopher_repetition`` /
``c4`` / ``fineweb`` = ``False``).

Words are whitespace tokens with surrounding punctuation stripped (tokens that are only
punctuation are not words); this is simple to compute by hand and close to the NLTK word
tokenisation the reference implementations use for English. Line ratios are taken over
non-blank lines.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from afm.filters.base import Decision
from afm.schema import Document

GOPHER_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
BULLETS = ("•", "●", "○", "◦", "▪", "‣", "-", "*", "–")
ELLIPSES = ("...", "…")
# Line ends that count as "ends a sentence" (C4's terminal punctuation, plus the ellipsis
# character and a closing single quote as FineWeb's stop characters do).
TERMINAL_PUNCT = (".", "!", "?", '"', "'", "”", "…")
C4_TERMINAL_PUNCT = (".", "!", "?", '"')
C4_POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)
_STRIP = string.punctuation + "“”‘’…«»—–"
_CITATION = re.compile(r"\[\d+\]|\[citation needed\]|\[edit\]", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?]+(?=[\"')\]]*(?:\s|$))")
_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n+")
_HAS_LETTER = re.compile(r"[^\W\d_]")  # a letter of any script


@dataclass
class QualityConfig:
    """Thresholds of every rule (published defaults); ``None`` switches a rule off."""

    # --- Gopher quality (drop when outside the range) ---
    skip_sources: list[str] = field(default_factory=lambda: ["code"])  # prose rules don't fit code
    gopher_quality: bool = True
    min_doc_words: int | None = 50
    max_doc_words: int | None = 100_000
    min_avg_word_length: float | None = 3.0
    max_avg_word_length: float | None = 10.0
    max_hash_word_ratio: float | None = 0.1  # '#' per word
    max_ellipsis_word_ratio: float | None = 0.1  # '...' / '…' per word
    max_bullet_lines_ratio: float | None = 0.9
    max_ellipsis_lines_ratio: float | None = 0.3
    min_alpha_words_ratio: float | None = 0.8  # words with >= 1 letter
    min_stop_words: int | None = 2
    stop_words: list[str] = field(default_factory=lambda: list(GOPHER_STOP_WORDS))
    # --- Gopher repetition ---
    gopher_repetition: bool = True
    max_dup_line_frac: float | None = 0.3
    max_dup_para_frac: float | None = 0.3
    max_dup_line_char_frac: float | None = 0.2
    max_dup_para_char_frac: float | None = 0.2
    # n -> max share of word characters in the most frequent n-gram
    top_ngram_max_frac: dict[int, float] = field(
        default_factory=lambda: {2: 0.20, 3: 0.18, 4: 0.16}
    )
    # n -> max share of word characters covered by n-grams occurring more than once
    dup_ngram_max_frac: dict[int, float] = field(
        default_factory=lambda: {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}
    )
    # --- C4 ---
    c4: bool = True
    c4_edit_lines: bool = True  # keep the C4-cleaned text (lines removed) in the output
    c4_remove_citations: bool = True
    c4_remove_javascript_lines: bool = True
    c4_remove_policy_lines: bool = True
    # Off by default as in FineWeb (it strips headings and list items); C4 had it on.
    c4_require_terminal_punct: bool = False
    c4_min_words_per_line: int | None = 3
    c4_max_word_length: int | None = 1000
    c4_min_sentences: int | None = 5
    c4_lorem_ipsum: bool = True
    c4_curly_bracket: bool = True
    # LaTeX is full of braces: the curly-bracket rule (meant to catch code in web text)
    # does not apply to these sources.
    c4_curly_bracket_exempt_sources: list[str] = field(default_factory=lambda: ["math"])
    # --- FineWeb ---
    fineweb: bool = True
    min_line_punct_ratio: float | None = 0.12
    max_short_line_ratio: float | None = 0.67
    short_line_length: int = 30
    max_dup_line_char_ratio: float | None = 0.01
    max_newline_word_ratio: float | None = 0.3


# --------------------------------------------------------------------------- helpers


def words_of(text: str) -> list[str]:
    """Whitespace tokens with surrounding punctuation stripped; punctuation-only dropped."""
    return [w for w in (tok.strip(_STRIP) for tok in text.split()) if w]


_LINE_WITH_LETTER = re.compile(r"^.*?[^\W\d_]", re.M)


def _count_with_letter(words: list[str]) -> int:
    """How many of ``words`` hold a letter: one regex pass over the words joined by
    newlines (a word never holds whitespace), not one search per word."""
    return len(_LINE_WITH_LETTER.findall("\n".join(words)))


def nonblank_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def duplicate_stats(items: list[str]) -> tuple[int, int]:
    """(number of items that repeat an earlier item, characters in those repeats)."""
    seen: set[str] = set()
    n_dup = chars_dup = 0
    for item in items:
        if item in seen:
            n_dup += 1
            chars_dup += len(item)
        else:
            seen.add(item)
    return n_dup, chars_dup


class NGramStats:
    """Word n-gram repetition statistics of one document, vectorised with numpy.

    Each distinct word gets a random 64-bit value and an n-gram is hashed as a polynomial
    of its words' values (mod 2^64), so every n costs a few array operations instead of a
    dict of tuples; two different n-grams of one document collide with probability about
    L^2 / 2^64 (negligible). Character counts are those of the words (no spaces).
    """

    _BASE = np.uint64(0x100000001B3)

    def __init__(self, words: list[str]) -> None:
        vocab: dict[str, int] = {}
        ids = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), dtype=np.int64,
                          count=len(words))
        table = np.random.default_rng(0).integers(1, 2**63, size=max(len(vocab), 1), dtype=np.uint64)
        self.vals = table[ids]
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        self.lengths = lengths
        self.cum = np.concatenate(([0], np.cumsum(lengths)))
        self.n_words = len(words)
        self.total = int(self.cum[-1])

    def _counts(self, n: int) -> np.ndarray:
        """For each n-gram start position, how often that n-gram occurs in the document."""
        size = self.n_words - n + 1
        h = np.zeros(size, dtype=np.uint64)
        for j in range(n):
            h = h * self._BASE + self.vals[j : j + size]
        _, inverse, counts = np.unique(h, return_inverse=True, return_counts=True)
        return counts[inverse]

    def top_frac(self, n: int) -> float:
        """Characters in all occurrences of the most frequent n-gram (ties: the longest)
        over all word characters; 0 when no n-gram occurs twice."""
        if self.n_words < n or self.total == 0:
            return 0.0
        counts = self._counts(n)
        top = int(counts.max())
        if top < 2:
            return 0.0
        chars = self.cum[n:] - self.cum[:-n]
        return min(1.0, int(chars[counts == top].max()) * top / self.total)

    def dup_frac(self, n: int) -> float:
        """Share of word characters covered by n-grams occurring more than once (a word
        covered by several overlapping duplicate n-grams counts once)."""
        if self.n_words < n or self.total == 0:
            return 0.0
        dup = (self._counts(n) > 1).astype(np.int64)
        size = len(dup)
        delta = np.zeros(self.n_words + 1, dtype=np.int64)
        delta[:size] += dup
        delta[n : n + size] -= dup
        covered = np.cumsum(delta)[: self.n_words] > 0
        return int(self.lengths[covered].sum()) / self.total


def top_ngram_char_frac(words: list[str], n: int) -> float:
    """See :meth:`NGramStats.top_frac`."""
    return NGramStats(words).top_frac(n)


def dup_ngram_char_frac(words: list[str], n: int) -> float:
    """See :meth:`NGramStats.dup_frac`."""
    return NGramStats(words).dup_frac(n)


def count_sentences(text: str) -> int:
    """Sentence ends: runs of . ! ? followed by whitespace / end (closing quotes allowed)."""
    return len(_SENTENCE_END.findall(text))


def c4_clean_lines(text: str, cfg: QualityConfig) -> tuple[str, int, int]:
    """Apply C4's line-level rules; returns (cleaned text, lines before, lines removed)."""
    lines = nonblank_lines(text)
    kept = []
    for line in lines:
        if cfg.c4_remove_citations:
            line = _CITATION.sub("", line).strip()
            if not line:
                continue
        low = line.lower()
        if cfg.c4_remove_javascript_lines and "javascript" in low:
            continue
        if cfg.c4_remove_policy_lines and any(p in low for p in C4_POLICY_SUBSTRINGS):
            continue
        if cfg.c4_require_terminal_punct and (
            not line.endswith(C4_TERMINAL_PUNCT) or line.endswith("...")
        ):
            continue
        toks = line.split()
        if cfg.c4_min_words_per_line is not None and len(toks) < cfg.c4_min_words_per_line:
            continue
        if cfg.c4_max_word_length is not None and len(line) > cfg.c4_max_word_length and any(
            len(t) > cfg.c4_max_word_length for t in toks
        ):
            continue
        kept.append(line)
    return "\n".join(kept), len(lines), len(lines) - len(kept)


# --------------------------------------------------------------------------- the filter

Check = tuple[str, float, Callable[[float], bool]]  # (rule name, signal value, passes?)


def _lo(limit: float | None) -> Callable[[float], bool]:
    return lambda v: limit is None or v >= limit


def _hi(limit: float | None) -> Callable[[float], bool]:
    return lambda v: limit is None or v <= limit


class QualityHeuristicsFilter:
    """Gopher + C4 + FineWeb heuristics; signals for every rule, reason = first failure."""

    name = "quality"

    def __init__(self, cfg: QualityConfig | None = None) -> None:
        self.cfg = cfg or QualityConfig()
        self._stop = {w.lower() for w in self.cfg.stop_words}

    # Each family returns its checks in order; signals are computed whether or not
    # an earlier check failed.

    def _gopher_repetition(self, text: str, lowered: list[str]) -> list[Check]:
        cfg = self.cfg
        lines = nonblank_lines(text)
        paras = [p.strip() for p in _PARAGRAPH_SPLIT.split(text.strip()) if p.strip()]
        line_dup, line_dup_chars = duplicate_stats(lines)
        para_dup, para_dup_chars = duplicate_stats(paras)
        line_chars = sum(len(x) for x in lines) or 1
        para_chars = sum(len(x) for x in paras) or 1
        checks: list[Check] = [
            ("gopher_dup_line_frac", line_dup / max(len(lines), 1), _hi(cfg.max_dup_line_frac)),
            ("gopher_dup_para_frac", para_dup / max(len(paras), 1), _hi(cfg.max_dup_para_frac)),
            ("gopher_dup_line_char_frac", line_dup_chars / line_chars, _hi(cfg.max_dup_line_char_frac)),
            ("gopher_dup_para_char_frac", para_dup_chars / para_chars, _hi(cfg.max_dup_para_char_frac)),
        ]
        grams = NGramStats(lowered)
        for n, limit in sorted(cfg.top_ngram_max_frac.items()):
            checks.append((f"gopher_top_{n}gram", grams.top_frac(n), _hi(limit)))
        for n, limit in sorted(cfg.dup_ngram_max_frac.items()):
            checks.append((f"gopher_dup_{n}gram", grams.dup_frac(n), _hi(limit)))
        return checks

    def _gopher_quality(self, text: str, words: list[str], lowered: list[str]) -> list[Check]:
        cfg = self.cfg
        n = len(words)
        denom = max(n, 1)
        lines = nonblank_lines(text)
        n_lines = max(len(lines), 1)
        avg_len = sum(len(w) for w in words) / denom
        return [
            ("gopher_word_count", float(n), lambda v: (cfg.min_doc_words is None or v >= cfg.min_doc_words)
             and (cfg.max_doc_words is None or v <= cfg.max_doc_words)),
            ("gopher_avg_word_length", avg_len, lambda v: (cfg.min_avg_word_length is None
             or v >= cfg.min_avg_word_length) and (cfg.max_avg_word_length is None
             or v <= cfg.max_avg_word_length)),
            ("gopher_hash_ratio", text.count("#") / denom, _hi(cfg.max_hash_word_ratio)),
            ("gopher_ellipsis_ratio", sum(text.count(e) for e in ELLIPSES) / denom,
             _hi(cfg.max_ellipsis_word_ratio)),
            ("gopher_bullet_lines", sum(x.startswith(BULLETS) for x in lines) / n_lines,
             _hi(cfg.max_bullet_lines_ratio)),
            ("gopher_ellipsis_lines", sum(x.endswith(ELLIPSES) for x in lines) / n_lines,
             _hi(cfg.max_ellipsis_lines_ratio)),
            ("gopher_alpha_words", _count_with_letter(words) / denom,
             _lo(cfg.min_alpha_words_ratio)),
            ("gopher_stop_words", float(sum(1 for w in lowered if w in self._stop)),
             _lo(cfg.min_stop_words)),
        ]

    def _c4(self, text: str, source: str | None = None) -> tuple[list[Check], str]:
        cfg = self.cfg
        curly = cfg.c4_curly_bracket and source not in cfg.c4_curly_bracket_exempt_sources
        cleaned, n_lines, n_removed = c4_clean_lines(text, cfg)
        low = text.lower()
        checks: list[Check] = [
            ("c4_lorem_ipsum", float("lorem ipsum" in low), lambda v: not cfg.c4_lorem_ipsum or v == 0),
            ("c4_curly_bracket", float("{" in text), lambda v: not curly or v == 0),
            ("c4_min_sentences", float(count_sentences(cleaned)), _lo(cfg.c4_min_sentences)),
            # Informational: how much of the page the line rules removed.
            ("c4_removed_lines_frac", n_removed / max(n_lines, 1), lambda v: True),
        ]
        return checks, cleaned

    def _fineweb(self, text: str, n_words: int | None = None) -> list[Check]:
        cfg = self.cfg
        lines = nonblank_lines(text)
        n_lines = max(len(lines), 1)
        _n_dup, dup_chars = duplicate_stats(lines)
        line_chars = max(sum(len(x) for x in lines), 1)
        n_words = max(len(words_of(text)) if n_words is None else n_words, 1)
        return [
            ("fineweb_line_punct", sum(x.endswith(TERMINAL_PUNCT) for x in lines) / n_lines,
             _lo(cfg.min_line_punct_ratio)),
            ("fineweb_short_lines", sum(len(x) <= cfg.short_line_length for x in lines) / n_lines,
             _hi(cfg.max_short_line_ratio)),
            ("fineweb_dup_line_chars", dup_chars / line_chars, _hi(cfg.max_dup_line_char_ratio)),
            ("fineweb_newline_ratio", text.count("\n") / n_words, _hi(cfg.max_newline_word_ratio)),
        ]

    def signals(self, text: str, source: str | None = None) -> tuple[list[Check], str]:
        """All checks in rule order, and the text after C4's line edits (if enabled)."""
        cfg = self.cfg
        words = words_of(text)
        lowered = [w.lower() for w in words]
        checks: list[Check] = []
        if cfg.gopher_repetition:
            checks += self._gopher_repetition(text, lowered)
        if cfg.gopher_quality:
            checks += self._gopher_quality(text, words, lowered)
        out_text = text
        if cfg.c4:
            c4_checks, cleaned = self._c4(text, source)
            checks += c4_checks
            if cfg.c4_edit_lines:
                out_text = cleaned
        if cfg.fineweb:
            checks += self._fineweb(out_text, len(words) if out_text == text else None)
        return checks, out_text

    def __call__(self, doc: Document) -> Decision:
        if doc.get("source") in self.cfg.skip_sources:
            return Decision(keep=True)
        text = doc.get("text") or ""
        checks, out_text = self.signals(text, doc.get("source"))
        signals = {name: float(value) for name, value, _ in checks}
        failed = [name for name, value, ok in checks if not ok(value)]
        if not text.strip():
            failed.insert(0, "empty_text")
        if failed:
            return Decision(keep=False, reason=failed[0], signals=signals,
                            details={"failed_rules": failed})
        modified = None
        if out_text != text:
            modified = dict(doc)
            modified["text"] = out_text
        return Decision(keep=True, signals=signals, document=modified)  # type: ignore[arg-type]
