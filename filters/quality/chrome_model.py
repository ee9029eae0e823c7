"""A learned line classifier for page chrome, and the share of a text it reads as chrome.

A failed extraction leaves a page's chrome: menus, breadcrumbs, "Skip to content", sign-in
forms, share bars, "Related articles" with their teasers, footers. The hand-written rules
see some of it (C4's policy lines, afm's consent and legal chrome, keyword lists), but a
page's own menus are words like any other, one or two to a line, and a layout rule that
catches them ("short lines not ending like a sentence") also removes manual pages and
READMEs, which are made of such lines (docs/quality.md). What tells a menu line from a line
of text is what it *says*, so a fastText line classifier learns it from real pages
(:mod:`afm.filters.quality.chrome_train` says how the shipped one is made).

Only short lines (:data:`MAX_LINE_WORDS` words or fewer) are read: menus, breadcrumbs,
buttons and "Related articles" headings are short, while a long line of chrome (a teaser,
a reader's comment) reads like text, and a line model that learned it as chrome also gave
half the sentences of unseen news articles 0.5-0.7 (measured on WCXB's test split's unseen
sites: it cost 8-12% of their good texts; docs/quality.md). A text's chrome share
(:meth:`ChromeLineModel.share`): each prose line a vote of weight sqrt(its words), chrome
when it is short and the model gives it ``chrome`` over 0.5. The square root keeps a page of
forty one-word menu items above one long paragraph (by words the paragraph wins), and a
paragraph of prose above a stray one-word line (by lines the stray line counts as much). The quality rule ``afm_chrome_model_share`` rejects a text whose share is over
``quality.max_chrome_model_share``.

The model reads lines **delexicalised** (:func:`delexicalise`): a word many sites use (in
the training data, :data:`~afm.filters.quality.chrome_train.VOCABULARY_MIN_SITES`) stays,
every other word becomes ``_w_`` and every number ``_n_``. Chrome speaks the words every site
uses ("home", "sign in", "share", "privacy", "posted by"); a site's own words ("butter",
"council", "election") are its topic, and a model that read them learned a food site's
sidebar as chrome and then read the ingredients of a recipe as chrome too.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from afm import fs
from afm.filters.classifier import MAX_CHARS, FastTextClassifier, preprocess, preprocess_joined

DATA_DIR = Path(__file__).parent.parent / "data" / "quality"
DEFAULT_MODEL = DATA_DIR / "chrome_lines.ftz"
CHROME = "chrome"
CONTENT = "content"
MAX_LINE_WORDS = 12  # longer lines are read as text, never as chrome
WORD = "_w_"  # a word not in the model's vocabulary
NUMBER = "_n_"  # a number


def delexicalise(line: str, vocabulary: frozenset[str]) -> str:
    """``line`` as the model reads it: prepared as every fastText text of afm
    (:func:`~afm.filters.classifier.preprocess`), then each word outside ``vocabulary``
    replaced by :data:`WORD`, each number by :data:`NUMBER` (punctuation kept)."""
    return " ".join(token_form(token, vocabulary) for token in preprocess(line).split())


def token_form(token: str, vocabulary: frozenset[str]) -> str:
    """One prepared token as the model reads it (see :func:`delexicalise`)."""
    if token in vocabulary:
        return token
    if any(c.isdigit() for c in token) and not any(c.isalpha() for c in token):
        return NUMBER
    if any(c.isalnum() for c in token):
        return WORD
    return token


MAX_FORMS = 50_000  # tokens whose form a model remembers (a few MB a process)


def delexicalise_lines(lines: Sequence[str], vocabulary: frozenset[str], forms: dict[str, str]) -> list[str]:
    """:func:`delexicalise` of each of ``lines``, the same strings at a fraction of the
    cost: the lines are lower-cased and their punctuation split off in one pass (joined by
    newlines, which neither step crosses and which end a word for the final sigma as a
    line's end does), and each token's form is looked up in ``forms`` (filled as met)."""
    if any(len(line) > MAX_CHARS or "\n" in line for line in lines):
        return [delexicalise(line, vocabulary) for line in lines]
    prepared = preprocess_joined(lines)
    out = []
    for line in prepared:
        words = []
        for token in line.split():
            form = forms.get(token)
            if form is None:
                form = token_form(token, vocabulary)
                if len(forms) < MAX_FORMS:
                    forms[token] = form
            words.append(form)
        out.append(" ".join(words))
    return out


def resolve_model_path(path: str) -> str:
    """``builtin``: the chrome model shipped inside this process's installation of afm."""
    return fs.shipped_or(path, DEFAULT_MODEL)


class ChromeLineModel:
    """The line classifier and the chrome share of a text's lines."""

    def __init__(self, path: str | Path) -> None:
        self.classifier = FastTextClassifier(resolve_model_path(str(path)))
        vocabulary = self.classifier.metadata.get("vocabulary")
        if self.classifier.label_pos != CHROME or not isinstance(vocabulary, list):
            raise ValueError(f"{path}: not a chrome line model (its sidecar names no vocabulary, or its "
                             f"positive label is {self.classifier.label_pos!r}, not {CHROME!r}); "
                             "afm quality train-chrome makes one")
        self.vocabulary = frozenset(vocabulary)
        self.forms: dict[str, str] = {}  # token -> its form (delexicalise_lines)

    def line_scores(self, lines: Sequence[str]) -> np.ndarray:
        """P(chrome) of each line."""
        return self.classifier.score(delexicalise_lines(lines, self.vocabulary, self.forms), preprocessed=True)

    def share(self, lines: Sequence[str]) -> float:
        """The sqrt-word-weighted share of ``lines`` read as chrome (0 for no lines): short
        lines the model gives ``chrome`` over 0.5."""
        lines = [line for line in lines if line.strip()]
        if not lines:
            return 0.0
        words = np.array([len(line.split()) for line in lines])
        short = np.flatnonzero(words <= MAX_LINE_WORDS)
        weight = np.sqrt(words.astype(float))
        if not len(short):
            return 0.0
        chrome = short[self.line_scores([lines[i] for i in short]) > 0.5]
        return float(weight[chrome].sum() / weight.sum())


@lru_cache(maxsize=4)
def load_chrome_model(path: str) -> ChromeLineModel:
    """The model at ``path`` (``builtin``: the shipped one), loaded once per process."""
    return ChromeLineModel(path)
