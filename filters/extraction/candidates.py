"""The candidate extractors the selector chooses among: one plain function each.

Every candidate takes a :class:`Page` (the decoded HTML, parsed once by lxml and shared)
and returns plain text, one paragraph a line, "" when it finds nothing. They never
raise: a candidate that fails on a page is an empty candidate (the page is not lost).
Each comes from a different family, so their mistakes differ, which is what a per-page
choice needs. Costs are CPU ms/page on the 181 ScrapingHub pages (2-core box, loaded):

* ``traf_recall`` (~8): trafilatura's main-content heuristics, recall focus, no fallbacks.
* ``traf_fast`` (~11): the same, balanced focus.
* ``traf_precision`` (~9): the same, precision focus.
* ``traf_fallback`` (~17): trafilatura's default mode (its own readability / jusText
  comparison after its heuristics); plain trafilatura less the comments.
* ``traf_precision_fb`` (~19): the same with precision focus (afm's earlier primary pass).
* ``readability`` (~4): the readability-lxml algorithm (the reader-mode family, as Safari's
  reader in the AFM report) in the port trafilatura ships, run on the shared tree (the
  readability-lxml package scores 0.921 there at 18 ms; this port 0.925 at 4 ms).
* ``boilerpipe`` (~10): boilerpy3's ArticleExtractor (Boilerpipe, the report's second).
* ``justext`` (~15): jusText with every language's stop-words.
* ``resiliparse`` (~2): Resiliparse's main-content text (C++, its own parser).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property
from typing import Any

_BLOCK_TAGS = ("p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote",
               "tr", "br", "section", "article", "dd", "dt", "table", "ul", "ol", "td", "th")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0\u200b]+")


class Page:
    """One decoded page. Readability modifies the lxml tree it reads, so each tree user
    gets a tree of its own: the first gets the one parsed here, later ones a fresh parse
    (parsing costs less than ``copy.deepcopy`` of an lxml tree: ~4 vs ~5 ms per
    ScrapingHub page). The trafilatura passes parse the HTML themselves (see
    ``_trafilatura``) and Resiliparse has its own parser, so the fast path parses no tree
    here at all."""

    def __init__(self, html: str, url: str | None = None) -> None:
        self.html = html
        self.url = url
        self._handed = False

    @cached_property
    def tree(self) -> Any:
        from trafilatura.utils import load_html

        return load_html(self.html)

    def tree_copy(self) -> Any:
        """A tree this caller may modify."""
        if not self._handed:
            self._handed = True
            return self.tree
        from trafilatura.utils import load_html

        return None if self.tree is None else load_html(self.html)


def normalise(text: str) -> str:
    """One line per paragraph: whitespace folded inside lines, empty lines dropped."""
    # One substitution over the whole text (the pattern never matches a newline), then
    # per-line stripping: the same text as folding line by line, at a third of the cost.
    lines = (line.strip() for line in _SPACES.sub(" ", text or "").split("\n"))
    return "\n".join(line for line in lines if line)


def _trafilatura(page: Page, **kwargs: Any) -> str:
    """Trafilatura gets the HTML string, not a parsed tree: handed a tree, it copies it
    before modifying it (``copy(tree)`` in ``bare_extraction``), which costs more than
    its own parse (12.3 vs 11.9 ms/page for ``traf_fast`` on ScrapingHub, same output)."""
    import trafilatura

    if not page.html:
        return ""
    return trafilatura.extract(page.html, url=page.url, include_comments=False,
                               include_tables=True, deduplicate=False, **kwargs) or ""


def traf_recall(page: Page) -> str:
    return _trafilatura(page, fast=True, favor_recall=True)


def traf_fast(page: Page) -> str:
    return _trafilatura(page, fast=True)


def traf_precision(page: Page) -> str:
    return _trafilatura(page, fast=True, favor_precision=True)


def traf_fallback(page: Page) -> str:
    return _trafilatura(page)


def traf_precision_fb(page: Page) -> str:
    return _trafilatura(page, favor_precision=True)


def html_to_text(root: Any) -> str:
    """Text of an lxml element with a line break after every block element."""
    for el in root.iter(*_BLOCK_TAGS):
        el.tail = "\n" + (el.tail or "")
    return root.text_content()


def readability(page: Page) -> str:
    import lxml.html
    from trafilatura.readability_lxml import Document

    tree = page.tree_copy()
    if tree is None:
        return ""
    summary = Document(tree, min_text_length=25).summary()
    return html_to_text(lxml.html.fromstring(summary)) if summary.strip() else ""


def boilerpipe(page: Page) -> str:
    from boilerpy3 import extractors

    return extractors.ArticleExtractor(raise_on_failure=False).get_content(page.html)


_JT_STOPLIST: frozenset[str] | None = None


def justext(page: Page) -> str:
    import justext as jt

    global _JT_STOPLIST
    if _JT_STOPLIST is None:
        words: set[str] = set()
        for language in jt.get_stoplists():
            words.update(jt.get_stoplist(language))
        _JT_STOPLIST = frozenset(words)
    paragraphs = jt.justext(page.html.encode("utf-8", "replace"), _JT_STOPLIST, encoding="utf-8")
    return "\n".join(p.text for p in paragraphs if not p.is_boilerplate)


def resiliparse(page: Page) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    return extract_plain_text(HTMLTree.parse(page.html), main_content=True, alt_texts=False,
                              list_bullets=False, preserve_formatting=True)


CANDIDATES: dict[str, Callable[[Page], str]] = {
    "traf_recall": traf_recall,
    "traf_fast": traf_fast,
    "traf_precision": traf_precision,
    "traf_fallback": traf_fallback,
    "traf_precision_fb": traf_precision_fb,
    "readability": readability,
    "boilerpipe": boilerpipe,
    "justext": justext,
    "resiliparse": resiliparse,
}


def run_candidate(name: str, page: Page) -> str:
    """One candidate's normalised text; "" when it fails (never raises)."""
    try:
        return normalise(CANDIDATES[name](page))
    except Exception:  # noqa: BLE001 - a failing candidate is an empty one, by design
        return ""
