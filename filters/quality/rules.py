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

Where the published rules do not fit every kind of good text, afm scopes them (each
measured in ``docs/quality.md``; every one can be set back to the published behaviour):

* **Code, markup, option lines and quotations are set aside** (``code_aware``): the rules
  were written for prose, and a code tutorial or a manual page fails them on its code
  blocks alone (lines that end in ``;`` or ``{``, closing braces that repeat,
  ``--option`` lines that do not end a sentence), a forum thread on the posts its replies
  quote. Lines inside fenced blocks, lines that look like code or markup
  (:func:`is_code_line`) and quoted passages (:func:`quote_mask`) are left out of what the
  rules read; the text itself keeps them, untouched by C4's line edits.
* **A hard-wrapped sentence is one line** (``unwrap_lines``): plain-text documentation,
  mail and forum posts wrap sentences at ~72 columns, and line rules (FineWeb's share of
  lines ending in punctuation, C4's words per line) read each piece as a line; a line that
  does not end a sentence and is continued in lower case is joined to the next
  (:func:`joins_next`). Menus and lists (short lines, capitals) are never joined.
* **C4's curly-bracket rule is off** (``c4_curly_bracket``): it removes code from web
  text by dropping every page with a ``{``, which removed most documentation and
  tutorials in our measurement; neither DCLM's RefinedWeb rules nor FineWeb-Edu's
  classifier filter keep it for that reason.
* **C4's javascript line rule removes browser warnings only** ("enable JavaScript",
  "JavaScript is disabled"), not every line that names the language.
* **FineWeb's duplicated-line characters at 0.1** (``max_dup_line_char_ratio``), the
  share the FineWeb paper gives; datatrove's class default (0.01) dropped one forum thread
  in three and one article in ten for a repeated byline or "Reply" line.
* **Repetition measured by volume**: Gopher's duplicate n-gram shares at twice its
  thresholds (``dup_ngram_max_frac``: 0.30 for 5-grams ... 0.20 for 10-grams), and its
  counts of duplicated lines and paragraphs off (``max_dup_line_frac``,
  ``max_dup_para_frac``; the character shares of duplicated lines and paragraphs stay):
  reference documentation repeats its phrases and headings by nature, and every templated
  or looping junk text of our development set is far above these.
* **One rule of afm's own, for word salad** (``word_order``): shuffled or spun text keeps
  the words, the punctuation and the stop words of good text and passes every published
  rule. English never follows "the" with "of" or ends a sentence with "their"; shuffled
  words put function words there at random. The share of such places among a text's
  determiners and sentence ends (:func:`misplaced_function_words`) is under 0.08 in
  every English text of our development sets and above it in 85% of word salad; the rule
  drops a text above 0.1 (at least 15 places looked at; English only).
* **Two more of afm's own, for keyword lists and page chrome**: a text whose sentences (at
  least five, of four words or more) hold no function word at all in 70% of cases is a
  keyword list ("Cheap replica watches best price online."), never so in our English
  development texts beyond 1 in 100 (``max_sentences_without_function_words``); and beside
  C4's policy lines, short lines of copyright notices and subscription or sign-in prompts
  are removed (``chrome_max_words``, ``CHROME_SUBSTRINGS``), so a teaser or a notice that is
  only such lines is judged on what is left.
* **A fourth of afm's own, for pages that are mostly site chrome** (``max_chrome_lines``):
  a cookie banner, a footer of legal lines or a teaser under its paywall prompts is a
  page whose lines are mostly consent, legal, copyright or subscription chrome; a line
  counts when it holds such a term once per 25 words or more often (:func:`chrome_lines`:
  a banner line, not an article that names its privacy policy), and a page with more
  than a third of its prose lines so is dropped (above that in 3 of the 2,035
  development texts the other stages keep: two licence files and a product page).
* **A fifth, learned, for a page's own menus** (``max_chrome_model_share``): the share of
  a text's short prose lines that a line classifier of real pages' chrome reads as chrome
  (each line weighted by the root of its words; :mod:`afm.filters.quality.chrome_model`),
  over 0.36 is dropped: a failed extraction that left the menus, breadcrumbs and sign-in
  lines. The threshold keeps 98% of the development good text; English and unknown
  language only.
* **Word-list rules fit the language**: the Gopher stop-word rule applies to the
  languages of its list (``stop_words_languages``, English) and to documents of unknown
  language; in languages written without spaces (``unsegmented_languages``: Chinese,
  Japanese, Thai, ...) a "word" is a whole clause, so word counts and word lengths apply
  to characters there (one character counts as a word).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from afm import fs
from afm.config import check_number
from afm.filters.base import Decision
from afm.filters.quality.chrome_model import ChromeLineModel, load_chrome_model
from afm.filters.quality.chrome_model import resolve_model_path as resolve_chrome_path
from afm.filters.quality.context_gain import ContextGainModel, load_context_gain_model
from afm.filters.quality.context_gain import resolve_model_path as resolve_gain_path
from afm.filters.quality.ngram_lm import NGramLM
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
# Page chrome that C4's policy list misses: short lines of copyright, subscription and
# sign-in prompts (afm's own, `chrome_max_words` words at most).
CHROME_SUBSTRINGS = (
    "all rights reserved", "©", "copyright", "subscribe", "subscriber", "subscription", "sign in", "sign up",
    "log in", "login", "register for free", "continue reading", "read the full", "free articles",
)
# What site chrome says, whatever the site: consent and cookie banners, legal and copyright
# notices, subscription, sign-in and newsletter prompts (afm's own, for the share of a
# page's lines that are such chrome: `max_chrome_lines`).
_CHROME_TERM = re.compile(  # read in lower case; one word-boundary test, then the words
    r"©|rights reserved|\b(?:cookies?|privacy|consent|copyright|terms (?:of (?:use|service|sale)|"
    r"(?:and|&) conditions)|disclaimers?|opt[ -]?(?:out|in)|trademarks?|gdpr|personal (?:data|information)|"
    r"policy|preferences|subscri(?:bes?|bers?|ptions?)|unsubscribe|newsletter|sign (?:in|up)|log ?in|"
    r"register|accept(?: all)?)\b")
_NEWLINE = re.compile("\n")
_STRIP = string.punctuation + "“”‘’…«»—–"
_CITATION = re.compile(r"\[\d+\]|\[citation needed\]|\[edit\]", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?]+(?=[\"')\]]*(?:\s|$))")
_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n+")
_HAS_LETTER = re.compile(r"[^\W\d_]")  # a letter of any script
UNSEGMENTED_LANGUAGES = ("zh", "ja", "th", "lo", "km", "my", "bo", "wuu", "yue", "dz")
JAVASCRIPT_WARNING_WORDS = ("enable", "disabled", "browser", "turn on", "switch on", "requires", "needs",
                            "support")
# What marks a line as code, markup or a command option (see is_code_line).
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_START = re.compile(
    r"^(\$ |>>> |\.\.\. |#include\b|#define\b|#!|#if|#endif|#import\b|import \w|from [\w.]+ import |"
    r"def \w+\(|class \w+[:(]|return\b|const |let |var |function\b|public |private |protected |static |"
    r"package [\w.]+;|using [\w.]+;|@\w+|//|/\*|\*/|<\?|</?[a-zA-Z][\w:-]*(\s[^>]*)?/?>|[{}\[\]()]+[;,]?$|"
    r"(if|for|while|switch|catch)\s*\(|else\b|elif\b|try:|except\b|sudo |pip |npm |apt(-get)? |git |"
    r"docker |make\b|cd |export [A-Z_]+=|[A-Za-z_][\w.]*\s*[-+*/|&]?=\s*\S)")
_CODE_END = re.compile(r"([{};\\]|\)\s*;|=>|->|\)\s*\{|\(\)|,\s*\\)$")
_OPTION = re.compile(r"^-{1,2}[\w?#][\w.-]*([= ]\S+)?(,\s*-{1,2}[\w?#][\w.-]*([= ]\S+)?)*$")
_RULER = re.compile(r"^([=\-~^*+#|:_.\s`]{3,}|\|.*\|)$")
# Markup that is not prose: reStructuredText directives and fields, Markdown images, badges
# and link definitions, a line that is only a URL.
_MARKUP = re.compile(r"^(\.\. [\w|-]*::?|\.\. _|:[\w -]+:(\s|$)|!?\[!\[|!\[[^\]]*\]\(|\[[^\]]+\]:\s|"
                     r"<?(https?|ftp)://\S+>?$)")
# English function words a sentence of four words or more nearly always holds.
FUNCTION_WORDS = frozenset(
    "the a an of to and in is are was were be been for with on at by from that this it as or but not no if "
    "when which who what how can will would should could has have had do does did i you he she we they my "
    "your our their its his her there than then so".split())
_SENTENCE = re.compile(r"[^.!?\n]++[.!?]+")  # possessive: a line without an end fails at once
# A whitespace token that is a function word once its edge punctuation is stripped (as
# words_of reads a token); searched in the lower-cased sentence.
_FUNCTION_WORD = re.compile(r"(?<!\S)[" + re.escape(_STRIP) + "]*(?:"
                            + "|".join(sorted(FUNCTION_WORDS, key=len, reverse=True))
                            + r")[" + re.escape(_STRIP) + r"]*(?!\S)")
# English function words, for the word-order rule: a determiner is never followed by one of
# FOLLOWS_NO_DETERMINER ("the of", "a and"), and a sentence never ends with one of ENDS_NO_SENTENCE.
DETERMINERS = frozenset({"the", "a", "an"})
# Every capitalisation of a determiner, so a token is looked up as it stands.
_DETERMINER_FORMS = frozenset(
    "".join(c.upper() if bit else c for c, bit in zip(word, bits))
    for word in DETERMINERS for bits in itertools.product((0, 1), repeat=len(word)))
FOLLOWS_NO_DETERMINER = frozenset({"the", "a", "an", "of", "and", "or", "to", "in", "is", "was", "are", "were",
                                   "for", "with", "on", "at", "by", "from", "that", "it", "as", "but", "be"})
ENDS_NO_SENTENCE = frozenset({"the", "a", "an", "of", "and", "or", "nor", "my", "your", "our", "their", "its",
                              "than"})
_ATTRIBUTION = re.compile(r"(\b(said|wrote|writes|says)|a écrit|schrieb|escribió|ha scritto|escreveu|написал)\s*:$|"
                          r"^(quote|zitat|citation|cita)\b.{0,60}:?$", re.I)
_CODE_CHARS = frozenset("{}[]()<>=;$\\/|&*_`#@%^~")
_DROP_CODE_CHARS = str.maketrans("", "", "".join(_CODE_CHARS))


@dataclass
class QualityConfig:
    """Thresholds of every rule (published defaults); ``None`` switches a rule off."""

    # --- Gopher quality (drop when outside the range) ---
    skip_sources: list[str] = field(default_factory=lambda: ["code"])  # prose rules don't fit code
    # Code, markup and command-option lines set aside from what the prose rules read.
    code_aware: bool = True
    # Hard-wrapped sentences read as one line by the line rules (joins_next).
    unwrap_lines: bool = True
    # The stop-word rule applies to documents in these languages (and of unknown language;
    # [] = every language, as Gopher).
    stop_words_languages: list[str] = field(default_factory=lambda: ["en"])
    # Written without spaces between words: a character counts as a word.
    unsegmented_languages: list[str] = field(default_factory=lambda: list(UNSEGMENTED_LANGUAGES))
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
    # Off (Gopher: 0.3 each): they count a repeated one-word heading ("Parameters",
    # "Reply") like a repeated paragraph; the character shares below still apply.
    max_dup_line_frac: float | None = None
    max_dup_para_frac: float | None = None
    max_dup_line_char_frac: float | None = 0.2
    max_dup_para_char_frac: float | None = 0.2
    # n -> max share of word characters in the most frequent n-gram
    top_ngram_max_frac: dict[int, float] = field(
        default_factory=lambda: {2: 0.20, 3: 0.18, 4: 0.16}
    )
    # n -> max share of word characters covered by n-grams occurring more than once.
    # Twice Gopher's (0.15 ... 0.10): reference pages and threads repeat their phrases
    # ("can be specified multiple times"); templated and looping junk is far above these.
    dup_ngram_max_frac: dict[int, float] = field(
        default_factory=lambda: {5: 0.30, 6: 0.28, 7: 0.26, 8: 0.24, 9: 0.22, 10: 0.20}
    )
    # --- C4 ---
    c4: bool = True
    c4_edit_lines: bool = True  # keep the C4-cleaned text (lines removed) in the output
    c4_remove_citations: bool = True
    c4_remove_javascript_lines: bool = True
    c4_remove_policy_lines: bool = True
    # afm's own line edit beside C4's: short lines of copyright notices and subscription or
    # sign-in prompts (CHROME_SUBSTRINGS) of at most this many words go. None: off.
    chrome_max_words: int | None = 12
    # Off by default as in FineWeb (it strips headings and list items); C4 had it on.
    c4_require_terminal_punct: bool = False
    c4_min_words_per_line: int | None = 3
    c4_max_word_length: int | None = 1000
    c4_min_sentences: int | None = 5
    # C4's sentence count does not apply to a page whose code, option and markup lines are
    # at least this share of its lines: such a page says much in code, not in sentences.
    # None: it always applies (C4).
    c4_min_sentences_max_aside: float | None = 0.1
    c4_lorem_ipsum: bool = True
    # Off: C4 dropped every page with a '{' to keep code out; it removes most technical
    # writing (docs/quality.md). True restores C4's rule.
    c4_curly_bracket: bool = False
    # C4 removed every line naming javascript; afm removes only browser warnings
    # (a line naming javascript and one of these words). [] restores C4's rule.
    c4_javascript_warning_words: list[str] = field(default_factory=lambda: list(JAVASCRIPT_WARNING_WORDS))
    # LaTeX is full of braces: the curly-bracket rule (meant to catch code in web text)
    # does not apply to these sources.
    c4_curly_bracket_exempt_sources: list[str] = field(default_factory=lambda: ["math"])
    # --- FineWeb ---
    fineweb: bool = True
    min_line_punct_ratio: float | None = 0.12
    max_short_line_ratio: float | None = 0.67
    short_line_length: int = 30
    # The FineWeb paper's 0.1 (datatrove's class default is 0.01).
    max_dup_line_char_ratio: float | None = 0.1
    max_newline_word_ratio: float | None = 0.3
    # --- afm's own ---
    # Word salad: the share of places where English puts no function word that hold one (a
    # determiner followed by a function word, "the of"; a sentence ending in "the", "and",
    # "their" ...), over the text's determiners and sentence ends, at least
    # `word_order_min_events` of them. Applies to `word_order_languages` (and unknown).
    word_order: bool = True
    max_misplaced_function_words: float | None = 0.1
    word_order_min_events: int = 15
    word_order_languages: list[str] = field(default_factory=lambda: ["en"])
    # Keyword lists: the share of sentences (of 4 words or more, at least 5 of them) that
    # hold no function word at all ("Buy cheap watches today!"). English only.
    max_sentences_without_function_words: float | None = 0.7
    # Site chrome: the share of the prose lines that are consent, legal, copyright or
    # subscription chrome (a line holding one such term per `chrome_line_words` words or
    # fewer, :func:`chrome_lines`); a cookie banner, a footer of legal lines or a teaser
    # under its paywall prompts. Any language's text is read (the terms are English).
    max_chrome_lines: float | None = 0.33
    chrome_line_words: int = 25
    # Text that is not language: the perplexity per token of the prose under a word n-gram
    # model of good text (CCNet's signal; :mod:`afm.filters.quality.ngram_lm`). `word_lm`: an ARPA
    # file (`afm quality train-lm` makes one) or None (no model, no signal: the default, as
    # at the scale of reference text afm can ship it does not earn its place, docs/quality.md).
    # Applies to `word_lm_languages` (and unknown) and texts of `word_lm_min_tokens` or more.
    word_lm: str | None = None
    max_word_perplexity: float | None = None
    word_lm_languages: list[str] = field(default_factory=lambda: ["en"])
    word_lm_min_tokens: int = 50
    # A page's own chrome (menus, breadcrumbs, sign-in and share lines, related-article
    # lists) that extraction left: the sqrt-word-weighted share of the prose lines a learned
    # line classifier reads as chrome (:mod:`afm.filters.quality.chrome_model`; `chrome_model`:
    # `builtin`, the shipped model, another fastText file from `afm quality train-chrome`, or
    # None: no signal). The threshold keeps 98% of development good text (chosen on held-out
    # development sites, docs/quality.md). Applies to `chrome_model_languages` (and unknown).
    chrome_model: str | None = fs.BUILTIN
    max_chrome_model_share: float | None = 0.36
    chrome_model_languages: list[str] = field(default_factory=lambda: ["en"])
    # Word chains (spun or machine-made text, each word drawn given the one before): the
    # nats a word a small word model's loss falls when it sees up to 63 words before each
    # word instead of the word alone (:mod:`afm.filters.quality.context_gain`;
    # `context_gain_model`: `builtin`, the shipped model, another from `afm quality
    # train-context-gain`, or None: no signal). Real writing gains ~0.3-0.6, a chain ~0.1.
    # The threshold keeps 98% of development good text (chosen on held-out development
    # sites). Off by default (`context_gain_model: None`): on held-out news it cost 14-25%
    # of the good texts (the model knows the genres it read, and the gain's level differs
    # by genre and topic; docs/quality.md); `context_gain_model=builtin` turns it on here.
    # Applies to `context_gain_languages` (and unknown) and prose of 65 words or more.
    context_gain_model: str | None = None
    min_context_gain: float | None = 0.307
    context_gain_languages: list[str] = field(default_factory=lambda: ["en"])

    def __post_init__(self) -> None:
        if self.max_chrome_model_share is not None:
            check_number("quality.max_chrome_model_share", self.max_chrome_model_share, low=0.0, high=1.0)
        if self.min_context_gain is not None:
            check_number("quality.min_context_gain", self.min_context_gain, low=-10.0, high=10.0)

    @classmethod
    def published(cls) -> QualityConfig:
        """The rules as Gopher, C4 and FineWeb (datatrove's classes) published them, without
        afm's scoping: every line read as prose, C4's curly-bracket and javascript rules,
        FineWeb's duplicated-line characters at 0.01, Gopher's n-gram shares and line and
        paragraph counts, English stop words asked of every text. For comparisons
        (``afm quality audit --rules``) and for reproducing a published pipeline; afm's own
        word-order rule off."""
        return cls(code_aware=False, unwrap_lines=False, stop_words_languages=[], unsegmented_languages=[],
                   word_order=False, chrome_max_words=None, max_chrome_lines=None, word_lm=None,
                   chrome_model=None, context_gain_model=None,
                   max_dup_line_frac=0.3, max_dup_para_frac=0.3,
                   dup_ngram_max_frac={5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10},
                   c4_curly_bracket=True, c4_javascript_warning_words=[], c4_min_sentences_max_aside=None,
                   max_dup_line_char_ratio=0.01)


# --------------------------------------------------------------------------- helpers


def words_of(text: str) -> list[str]:
    """Whitespace tokens with surrounding punctuation stripped; punctuation-only dropped."""
    return list(filter(None, map(str.strip, text.split(), itertools.repeat(_STRIP))))  # C loops, no frames


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

    Each word's value is its string hash, mixed by an odd multiplier (a bijection of 64-bit
    values), and an n-gram is hashed as a polynomial of its words' values (mod 2^64), so
    every n costs a few array operations instead of a dict of tuples, and the words need no
    vocabulary (``map(hash, words)`` runs in C; a vocabulary dict took a Python step per word).
    Two different words or n-grams of one document collide with probability about
    L^2 / 2^64 (negligible). Character counts are those of the words (no spaces).
    """

    _BASE = np.uint64(0x100000001B3)
    _MIX = np.uint64(0x9E3779B97F4A7C15)

    def __init__(self, words: list[str]) -> None:
        hashes = np.fromiter(map(hash, words), dtype=np.int64, count=len(words))
        self.vals = hashes.view(np.uint64) * self._MIX
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        self.lengths = lengths
        self.cum = np.concatenate(([0], np.cumsum(lengths)))
        self.n_words = len(words)
        self.total = int(self.cum[-1])
        self._repeated: dict[int, np.ndarray] = {}  # n -> whether each n-gram start repeats

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
        self._repeated.setdefault(n, counts > 1)  # what repeated(n + 1) narrows from
        top = int(counts.max())
        if top < 2:
            return 0.0
        chars = self.cum[n:] - self.cum[:-n]
        return min(1.0, int(chars[counts == top].max()) * top / self.total)

    def repeated(self, n: int) -> np.ndarray:
        """For each n-gram start position, whether that n-gram occurs more than once. An
        n-gram repeats only where its first n-1 words do, so once the (n-1)-grams are known
        only those positions are hashed and compared (Gopher's 5- to 10-gram checks run in
        that order): the same flags as counting every position, at a fraction of the work."""
        size = self.n_words - n + 1
        shorter = self._repeated.get(n - 1)
        if shorter is None:
            flags = self._counts(n) > 1
        else:
            where = np.flatnonzero(shorter[:size])
            h = np.zeros(len(where), dtype=np.uint64)
            for j in range(n):
                h = h * self._BASE + self.vals[where + j]
            order = np.argsort(h, kind="stable")
            ordered = h[order]
            same = ordered[1:] == ordered[:-1]
            hit = np.zeros(len(where), dtype=bool)
            hit[1:] |= same
            hit[:-1] |= same
            flags = np.zeros(size, dtype=bool)
            flags[where[order[hit]]] = True
        self._repeated[n] = flags
        return flags

    def dup_frac(self, n: int) -> float:
        """Share of word characters covered by n-grams occurring more than once (a word
        covered by several overlapping duplicate n-grams counts once)."""
        if self.n_words < n or self.total == 0:
            return 0.0
        dup = self.repeated(n).astype(np.int64)
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
    """Apply C4's line-level rules to every non-blank line; returns (cleaned text, lines
    before, lines removed). (The filter uses :func:`c4_edit`, which keeps code lines.)"""
    lines = nonblank_lines(text)
    kept = [k for k in (_c4_keep(line, cfg) for line in lines) if k is not None]
    return "\n".join(kept), len(lines), len(lines) - len(kept)


def is_code_line(line: str) -> bool:
    """Whether a line is code, markup or a command option rather than prose: it starts like
    a statement, a shell command, a tag or a comment; it ends like a statement (``;``,
    ``{``, ``}``, ``->``); it is an option term (``-n``, ``--max-size=N``, ``-V,
    --version``); it is a table row or a ruler (``|a|b|``, ``=====``); it is markup (a
    reStructuredText directive or field, a Markdown image, badge or link definition, a
    bare URL); or a quarter of its characters are code punctuation. Prose lines ending in ``:`` or holding a call in
    backquotes stay prose."""
    stripped = line.strip()
    if not stripped:
        return False
    # The end pattern is anchored at the end: the line's tail is all it needs to read.
    if (_CODE_START.match(stripped) or _CODE_END.search(stripped[-8:]) or _RULER.match(stripped)
            or _MARKUP.match(stripped)):
        return True
    if len(stripped) <= 80 and _OPTION.match(stripped):
        return True
    chars = stripped.replace(" ", "")
    symbols = len(chars) - len(chars.translate(_DROP_CODE_CHARS))
    return symbols >= 3 and symbols >= 0.25 * len(chars)


def code_mask(lines: list[str]) -> list[bool]:
    """For each line: inside a fenced block (``` or ~~~, the fences included), or a code
    line by :func:`is_code_line`."""
    out = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            out.append(True)
            fenced = not fenced
        else:
            out.append(fenced or is_code_line(line))
    return out


def quote_mask(lines: list[str]) -> list[bool]:
    """For each line: part of a quotation of an earlier message (a forum reply quoting the
    post it answers, a mail quoting the one before): a line starting with ``>``, or an
    attribution line ("paulb203 said:", "Quote:", "X wrote:") and the lines after it up to
    the next blank line. A thread repeats what it quotes; that is no sign of a bad page."""
    out = []
    quoting = False
    for line in lines:
        stripped = line.strip()
        if not stripped:
            quoting = False
            out.append(False)
        elif (len(stripped) <= 80 and (stripped[-1] == ":" or stripped[:1] in "QqZzCc")
              and _ATTRIBUTION.search(stripped)):
            quoting = True
            out.append(True)
        else:
            out.append(quoting or stripped.startswith(">"))
    return out


def misplaced_function_words(text: str) -> tuple[int, int]:
    """(places holding a function word where English has none, places looked at): each
    determiner (is the next word a function word: "the of"?) and each sentence end (is
    its last word one: "... and their.")? Shuffled words put them there at random."""
    tokens = text.split()  # whitespace tokens, as ``words_of`` reads them
    # a whole token "the" / "a" / "an" (any case), and the token after it
    after = [nxt for tok, nxt in zip(tokens, tokens[1:]) if tok in _DETERMINER_FORMS]
    misplaced = sum(tok.lower().strip(_STRIP) in FOLLOWS_NO_DETERMINER for tok in after)
    looked = len(after)
    # a token of two or more characters ending a sentence
    for tok in tokens:
        if len(tok) < 2 or tok[-1] not in ".!?":
            continue
        word = tok.rstrip(".!?\"'”’)]").lower()
        if word.isalpha():
            looked += 1
            misplaced += word in ENDS_NO_SENTENCE
    return misplaced, looked


def sentences_without_function_words(text: str, min_words: int = 4) -> tuple[int, int]:
    """(sentences of ``min_words`` words or more holding no function word, such
    sentences): a keyword list ("Cheap replica watches best price online.") reads as
    sentences without one."""
    sentences = [s for s in _SENTENCE.findall(text) if len(s.split()) >= min_words]
    bare = sum(1 for s in sentences if not _FUNCTION_WORD.search(s.lower()))
    return bare, len(sentences)


def chrome_lines(lines: list[str], words_per_term: int = 25) -> int:
    """How many of ``lines`` are site chrome: a line holding a consent, legal, copyright or
    subscription term (``_CHROME_TERM``) at least once per ``words_per_term`` words. A
    cookie banner or a footer line is short and dense in such terms; an article that
    mentions privacy or its terms of use once a paragraph is not."""
    if not lines:
        return 0
    low = "\n".join(lines).lower()  # one pass over the text; lower() keeps every line break
    breaks = [m.start() for m in _NEWLINE.finditer(low)]
    terms: dict[int, int] = {}
    for m in _CHROME_TERM.finditer(low):
        line = bisect.bisect_right(breaks, m.start())
        terms[line] = terms.get(line, 0) + 1
    return sum(1 for i, n in terms.items() if n * words_per_term >= len(lines[i].split()))


def _is_js_warning(low: str, words: list[str]) -> bool:
    return "javascript" in low and (not words or any(w in low for w in words))


def joins_next(line: str, following: str, min_chars: int = 30) -> bool:
    """Whether ``following`` continues ``line``'s sentence on a new line (hard-wrapped
    text: a README, a plain-text manual, a mail): ``line`` is at least ``min_chars``
    long, does not end a sentence or a clause (``.!?:;``), and the next line starts in
    lower case or the line ends with a comma. Menus and lists (short lines, capitals) are
    never joined."""
    line = line.rstrip()
    nxt = following.lstrip()
    if len(line) < min_chars or not nxt or line.endswith(TERMINAL_PUNCT + (":", ";")):
        return False
    return nxt[0].islower() or line.endswith(",")


def layout(text: str, code_aware: bool = True, unwrap: bool = True) -> tuple[list[str], list[list[int]], list[str]]:
    """The text's physical lines; its logical lines, each a list of physical line indices
    (a hard-wrapped sentence joined, :func:`joins_next`; a blank line is a logical line of
    its own); and what each logical line is: ``prose``, or set aside from the prose rules
    as ``code`` (code or markup, :func:`code_mask`) or ``quote`` (:func:`quote_mask`)."""
    lines = text.splitlines()
    if code_aware:
        kinds_of = ["code" if c else "quote" if q else "prose"
                    for c, q in zip(code_mask(lines), quote_mask(lines))]
    else:
        kinds_of = ["prose"] * len(lines)
    groups: list[list[int]] = []
    kinds: list[str] = []
    for i, (line, kind) in enumerate(zip(lines, kinds_of)):
        prev = groups[-1] if groups else None
        if (unwrap and prev is not None and kind == "prose" and kinds[-1] == "prose" and line.strip()
                and lines[prev[-1]].strip() and joins_next(lines[prev[-1]], line)):
            prev.append(i)
            continue
        groups.append([i])
        kinds.append(kind)
    return lines, groups, kinds


def _joined(lines: list[str], group: list[int]) -> str:
    return " ".join(lines[i].strip() for i in group) if len(group) > 1 else lines[group[0]]


def c4_edit(text: str, cfg: QualityConfig, layout_: tuple[list[str], list[list[int]], list[str]] | None = None
            ) -> tuple[str, str, int, int]:
    """C4's line edits on the prose of ``text``, one logical line at a time (a dropped
    wrapped sentence drops all its physical lines); code lines and blank lines (paragraph
    breaks, folded to one) are kept as they are, and kept lines keep their line breaks.
    Returns (edited text, the prose C4 keeps one logical line a line as its checks read
    it, prose lines before, prose lines removed)."""
    lines, groups, kinds = layout_ or layout(text, code_aware=False, unwrap=False)
    out: list[str] = []
    cleaned: list[str] = []
    n_prose = n_removed = 0
    for group, kind in zip(groups, kinds):
        if kind != "prose":
            out.extend(lines[i] for i in group)
            continue
        if not lines[group[0]].strip():
            if out and out[-1].strip():
                out.append("")
            continue
        n_prose += 1
        kept = _c4_keep(_joined(lines, group).strip(), cfg)
        if kept is None:
            n_removed += 1
            continue
        cleaned.append(kept)
        if len(group) == 1:
            out.append(kept)
        else:
            out.extend(_CITATION.sub("", lines[i]).rstrip() if cfg.c4_remove_citations else lines[i]
                       for i in group)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out), "\n".join(cleaned), n_prose, n_removed


def _c4_keep(line: str, cfg: QualityConfig) -> str | None:
    """One prose line after C4's line rules (citations removed), or None when C4 drops it."""
    if cfg.c4_remove_citations:
        line = _CITATION.sub("", line).strip()
        if not line:
            return None
    low = line.lower()
    if cfg.c4_remove_javascript_lines and _is_js_warning(low, cfg.c4_javascript_warning_words):
        return None
    if cfg.c4_remove_policy_lines and any(p in low for p in C4_POLICY_SUBSTRINGS):
        return None
    if (cfg.chrome_max_words is not None and len(line.split()) <= cfg.chrome_max_words
            and any(p in low for p in CHROME_SUBSTRINGS)):
        return None
    if cfg.c4_require_terminal_punct and (not line.endswith(C4_TERMINAL_PUNCT) or line.endswith("...")):
        return None
    toks = line.split()
    if cfg.c4_min_words_per_line is not None and len(toks) < cfg.c4_min_words_per_line:
        return None
    if cfg.c4_max_word_length is not None and len(line) > cfg.c4_max_word_length and any(
            len(t) > cfg.c4_max_word_length for t in toks):
        return None
    return line


# --------------------------------------------------------------------------- the filter

@functools.lru_cache(maxsize=4)
def word_lm(path: str) -> NGramLM:
    """The word n-gram model at ``path`` (ARPA, plain or gzip), read once per process (the
    filter is built once per worker)."""
    if not fs.isfile(path):
        raise FileNotFoundError(f"quality.word_lm: {path} is not a file (an ARPA model, plain or .gz; "
                                "afm quality train-lm makes one)")
    return NGramLM.load(path)


def chrome_line_model(path: str) -> ChromeLineModel:
    """The chrome line classifier at ``path`` (``builtin``: the shipped one), loaded once
    per process."""
    return _rule_model("chrome_model", path, resolve_chrome_path(path), load_chrome_model,
                       "a fastText model; afm quality train-chrome makes one")


def context_gain_model(path: str) -> ContextGainModel:
    """The context-gain word model at ``path`` (``builtin``: the shipped one), loaded once
    per process."""
    return _rule_model("context_gain_model", path, resolve_gain_path(path), load_context_gain_model,
                       "a .npz word model; afm quality train-context-gain makes one")


def _rule_model(setting: str, path: str, real: str, load: Callable[[str], Any], what: str) -> Any:
    """A learned rule's model file, read by ``load`` (cached there), or a one-line error
    naming the setting (``real``: ``path`` with ``builtin`` resolved to the shipped file)."""
    if not fs.isfile(real):
        raise FileNotFoundError(f"quality.{setting}: {path} is not a file ({what}, builtin is the shipped one)")
    return load(real)


@dataclass(frozen=True)
class Bound:
    """What a rule's signal must be to pass: at least ``low``, at most ``high`` (None: no
    bound on that side; neither: the rule is off). Printed as the threshold that decided.
    ``judged`` False: the rule does not read this text at all (a language it does not
    read, too few words or sentences, code): it passes, and its value is no measurement,
    which a threshold chosen from the values must leave out (``audit.signal_values`` gives
    NaN for it). A rule whose threshold is unset still judges: its values are what a
    threshold is chosen from."""

    low: float | None = None
    high: float | None = None
    judged: bool = True

    def __call__(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def __str__(self) -> str:
        if not self.judged:
            return "not judged"
        if self.low is not None and self.high is not None:
            return f"in [{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f">= {self.low:g}"
        return "off" if self.high is None else f"<= {self.high:g}"


OFF = Bound()
NOT_JUDGED = Bound(judged=False)
Check = tuple[str, float, Bound]  # (rule name, signal value, its Bound)


def _lo(limit: float | None) -> Bound:
    return Bound(low=limit)


def _hi(limit: float | None) -> Bound:
    return Bound(high=limit)


def _range(low: float | None, high: float | None) -> Bound:
    return Bound(low, high)


class QualityHeuristicsFilter:
    """Gopher + C4 + FineWeb heuristics; signals for every rule, reason = first failure,
    and what decided it (the value and the threshold) in the decision's details."""

    name = "quality"

    def __init__(self, cfg: QualityConfig | None = None) -> None:
        self.cfg = cfg or QualityConfig()
        self._stop = {w.lower() for w in self.cfg.stop_words}
        self._stop_langs = {x.lower() for x in self.cfg.stop_words_languages}
        self._unsegmented = {x.lower() for x in self.cfg.unsegmented_languages}
        # the languages each language-scoped rule reads, made once (not per text)
        self._word_order_langs = {x.lower() for x in self.cfg.word_order_languages}
        self._chrome_langs = {x.lower() for x in self.cfg.chrome_model_languages}
        self._gain_langs = {x.lower() for x in self.cfg.context_gain_languages}
        self._lm_langs = {x.lower() for x in self.cfg.word_lm_languages}
        self._lm = word_lm(self.cfg.word_lm) if self.cfg.word_lm else None
        self._chrome = chrome_line_model(self.cfg.chrome_model) if self.cfg.chrome_model else None
        self._gain = context_gain_model(self.cfg.context_gain_model) if self.cfg.context_gain_model else None

    # Each family returns its checks in order; signals are computed whether or not
    # an earlier check failed.

    def _gopher_repetition(self, text: str, lowered: list[str]) -> list[Check]:
        cfg = self.cfg
        lines = nonblank_lines(text)
        paras = [p.strip() for p in _PARAGRAPH_SPLIT.split(text.strip()) if p.strip()]
        line_dup, line_dup_chars = duplicate_stats(lines)
        para_dup, para_dup_chars = duplicate_stats(paras)
        line_chars = sum(map(len, lines)) or 1
        para_chars = sum(map(len, paras)) or 1
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

    def _gopher_quality(self, text: str, words: list[str], lowered: list[str],
                        language: str | None = None) -> list[Check]:
        cfg = self.cfg
        lines = nonblank_lines(text)
        n_lines = max(len(lines), 1)
        unsegmented = language in self._unsegmented
        if unsegmented:  # a "word" is a clause: count letters instead
            n = len(_HAS_LETTER.findall(text))
            avg_len = 1.0
        else:
            n = len(words)
            avg_len = sum(map(len, words)) / max(n, 1)
        denom = max(n, 1)
        stop_rule = not language or not self._stop_langs or language in self._stop_langs
        return [
            ("gopher_word_count", float(n), _range(cfg.min_doc_words, cfg.max_doc_words)),
            ("gopher_avg_word_length", avg_len, NOT_JUDGED if unsegmented else
             _range(cfg.min_avg_word_length, cfg.max_avg_word_length)),
            ("gopher_hash_ratio", text.count("#") / denom, _hi(cfg.max_hash_word_ratio)),
            ("gopher_ellipsis_ratio", sum(text.count(e) for e in ELLIPSES) / denom,
             _hi(cfg.max_ellipsis_word_ratio)),
            ("gopher_bullet_lines", sum(x.startswith(BULLETS) for x in lines) / n_lines,
             _hi(cfg.max_bullet_lines_ratio)),
            ("gopher_ellipsis_lines", sum(x.endswith(ELLIPSES) for x in lines) / n_lines,
             _hi(cfg.max_ellipsis_lines_ratio)),
            ("gopher_alpha_words", _count_with_letter(words) / max(len(words), 1),
             _lo(cfg.min_alpha_words_ratio)),
            ("gopher_stop_words", float(sum(1 for w in lowered if w in self._stop)),
             _lo(cfg.min_stop_words) if stop_rule else NOT_JUDGED),
        ]

    def _c4(self, prose: str, source: str | None = None, has_brace: bool | None = None,
            code_share: float = 0.0, edited: tuple[str, int, int] | None = None) -> tuple[list[Check], str]:
        """C4's checks on the prose, and the prose after C4's line edits (what FineWeb's
        rules read, as in FineWeb's pipeline). ``has_brace``: whether the whole text has a
        ``{`` (default: the prose); ``code_share``: the share of its lines that are code
        (the sentence count does not apply from ``c4_min_sentences_max_aside`` on);
        ``edited``: (cleaned prose, lines, lines removed) when :func:`c4_edit` made them."""
        cfg = self.cfg
        limit = cfg.c4_min_sentences_max_aside
        sentences = NOT_JUDGED if limit is not None and code_share >= limit else _lo(cfg.c4_min_sentences)
        curly = cfg.c4_curly_bracket and source not in cfg.c4_curly_bracket_exempt_sources
        cleaned, n_lines, n_removed = edited or c4_clean_lines(prose, cfg)
        low = prose.lower()
        brace = ("{" in prose) if has_brace is None else has_brace
        checks: list[Check] = [
            ("c4_lorem_ipsum", float("lorem ipsum" in low), Bound(high=0) if cfg.c4_lorem_ipsum else OFF),
            ("c4_curly_bracket", float(brace), Bound(high=0) if curly else OFF),
            ("c4_min_sentences", float(count_sentences(cleaned)), sentences),
            # Informational: how much of the page the line rules removed.
            ("c4_removed_lines_frac", n_removed / max(n_lines, 1), OFF),
        ]
        return checks, cleaned

    def _fineweb(self, text: str, n_words: int | None = None) -> list[Check]:
        cfg = self.cfg
        lines = nonblank_lines(text)
        n_lines = max(len(lines), 1)
        _n_dup, dup_chars = duplicate_stats(lines)
        line_chars = max(sum(map(len, lines)), 1)
        n_words = max(len(words_of(text)) if n_words is None else n_words, 1)
        return [
            ("fineweb_line_punct", sum(x.endswith(TERMINAL_PUNCT) for x in lines) / n_lines,
             _lo(cfg.min_line_punct_ratio)),
            ("fineweb_short_lines", sum(len(x) <= cfg.short_line_length for x in lines) / n_lines,
             _hi(cfg.max_short_line_ratio)),
            ("fineweb_dup_line_chars", dup_chars / line_chars, _hi(cfg.max_dup_line_char_ratio)),
            ("fineweb_newline_ratio", text.count("\n") / n_words, _hi(cfg.max_newline_word_ratio)),
        ]

    def signals(self, text: str, source: str | None = None, language: str | None = None
                ) -> tuple[list[Check], str]:
        """All checks in rule order, and the text after C4's line edits (if enabled). With
        ``code_aware`` the checks read the prose lines only (code, markup and quotations
        left out) and the edits leave those lines as they are; the share of non-blank lines
        set aside is the informational ``code_lines_frac``. ``language``: the document's, from the
        language stage (None: unknown)."""
        cfg = self.cfg
        shape = None
        prose = text
        checks: list[Check] = []
        code_share = 0.0
        if cfg.code_aware or cfg.unwrap_lines:
            shape = layout(text, cfg.code_aware, cfg.unwrap_lines)
            lines, groups, kinds = shape
            nonblank = [bool(line.strip()) for line in lines]
            n_lines = max(sum(nonblank), 1)
            aside = {"code": 0, "quote": 0, "prose": 0}
            for g, kind in zip(groups, kinds):
                aside[kind] += sum(nonblank[i] for i in g)
            if aside["code"] or aside["quote"] or len(groups) < len(lines):
                prose = "\n".join(_joined(lines, g) for g, k in zip(groups, kinds) if k == "prose")
            code_share = aside["code"] / n_lines
            if cfg.code_aware:
                checks.append(("code_lines_frac", code_share, OFF))
                checks.append(("quoted_lines_frac", aside["quote"] / n_lines, OFF))
        language = (language or "").lower() or None
        words = words_of(prose)
        lowered = list(map(str.lower, words))
        if cfg.gopher_repetition:
            checks += self._gopher_repetition(prose, lowered)
        if cfg.gopher_quality:
            checks += self._gopher_quality(prose, words, lowered, language)
        out_text = text
        fineweb_text = prose
        if cfg.c4:
            # One pass of C4's line rules: the edited text (code lines and line and paragraph
            # breaks kept) and the cleaned prose its checks read; C4's own edit otherwise.
            edited = c4_edit(text, cfg, shape) if shape is not None else None
            c4_checks, fineweb_text = self._c4(prose, source, "{" in text, code_share,
                                               edited[1:] if edited is not None else None)
            checks += c4_checks
            if cfg.c4_edit_lines:
                out_text = edited[0] if edited is not None else fineweb_text
        if cfg.fineweb:
            checks += self._fineweb(fineweb_text, len(words) if fineweb_text == prose else None)
        prose_lines = nonblank_lines(prose)
        checks.append(("afm_chrome_lines", chrome_lines(prose_lines, cfg.chrome_line_words)
                       / max(len(prose_lines), 1), _hi(cfg.max_chrome_lines)))
        if cfg.word_order:
            english = not language or language in self._word_order_langs
            misplaced, looked = misplaced_function_words(prose)
            applies = english and looked >= cfg.word_order_min_events
            checks.append(("afm_misplaced_function_words", misplaced / max(looked, 1),
                           _hi(cfg.max_misplaced_function_words) if applies else NOT_JUDGED))
            bare, sentences = sentences_without_function_words(prose)
            checks.append(("afm_sentences_without_function_words", bare / max(sentences, 1),
                           _hi(cfg.max_sentences_without_function_words) if english and sentences >= 5
                           else NOT_JUDGED))
        if self._chrome is not None:
            applies = not language or language in self._chrome_langs
            checks.append(("afm_chrome_model_share", self._chrome.share(prose_lines) if applies else 0.0,
                           _hi(cfg.max_chrome_model_share) if applies else NOT_JUDGED))
        if self._gain is not None:  # ~17 ms a text: only where the rule applies
            applies = not language or language in self._gain_langs
            gain, scored = self._gain.gain(prose) if applies else (0.0, 0)
            checks.append(("afm_context_gain", gain, _lo(cfg.min_context_gain) if scored else NOT_JUDGED))
        if self._lm is not None:
            log10, n_tokens = self._lm.log10_and_tokens(prose)
            applies = n_tokens >= cfg.word_lm_min_tokens and (
                not language or language in self._lm_langs)
            checks.append(("afm_word_perplexity", 10.0 ** (-log10 / n_tokens) if n_tokens else 0.0,
                           _hi(cfg.max_word_perplexity) if applies else NOT_JUDGED))
        return checks, out_text

    def __call__(self, doc: Document) -> Decision:
        if doc.get("source") in self.cfg.skip_sources:
            return Decision(keep=True)
        text = doc.get("text") or ""
        checks, out_text = self.signals(text, doc.get("source"), doc.get("language"))
        signals = {name: float(value) for name, value, _ in checks}
        failed = [(name, value, bound) for name, value, bound in checks if not bound(value)]
        if not text.strip():
            return Decision(keep=False, reason="empty_text", signals=signals,
                            details={"failed_rules": ["empty_text"] + [f[0] for f in failed]})
        if failed:
            name, value, bound = failed[0]
            return Decision(keep=False, reason=name, signals=signals, details={
                "rule": name, "value": round(float(value), 4), "threshold": str(bound),
                "failed_rules": [f[0] for f in failed],
                "failed": {f[0]: f"{float(f[1]):.4g} (needs {f[2]})" for f in failed}})
        modified = None
        if out_text != text:
            modified = dict(doc)
            modified["text"] = out_text
        return Decision(keep=True, signals=signals, document=modified)  # type: ignore[arg-type]
