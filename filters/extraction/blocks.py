"""A page cut into text blocks on lexbor's DOM, with the raw counts the block model reads.

The block extractor (``block_model.py``) decides per block, so the page must first become
blocks: maximal runs of text between block-level element boundaries (a paragraph, a
heading, a list item, a table cell, a code block), in document order, as Boilerpipe,
jusText and Web2Text cut pages. The DOM is lexbor's (selectolax: an HTML5 parser in C,
~1 ms a page); one walk over it records, per block:

* its text (whitespace folded; ``<br>`` and ``<pre>`` line breaks kept) and its kind
  (the block element it sits in: ``p``, ``h2``, ``li``, ``td``, ``pre``, ...);
* how much of it is link text, and its depth in the tree;
* what its ancestors say: how many are navigation-like (``nav``, ``header``, ``footer``,
  ``aside``, ``form``, or a ``class`` / ``id`` naming a menu, sidebar, comment, share
  bar, ...), content-like (``article``, ``main``, or a class naming the post, entry or
  body), lists and tables; and for each such signal the depth of the innermost ancestor
  raising it, so a promotion box inside the article and an article inside a
  promotion-named wrapper (the same counters) are told apart;
* the block-level element that holds it (its *container*), whose totals (text, link
  text, blocks) are known when the element closes: the text density of the
  surroundings, Web2Text's and Boilernet's strongest signal.

Everything numeric goes into numpy arrays (``BlockTable``); the features are computed
from them vectorised (``block_features.py``), so the work per node is the walk alone. The
walk runs in C (``_blockwalk.c``, built by the package's install: lexbor's own functions,
the rules below handed in) and gives the same blocks as :class:`_Walk`, the Python walk,
which is the reference and the fallback where no compiler built it (~1.1 µs a node in
Python, 1,600 nodes on an average page; ~0.7 in C, most of it the Python strings made).

Invisible subtrees (``script``, ``style``, ``template``, ``svg``, form controls,
``hidden`` elements) are never entered. The page is read as a client without scripts (a
crawler) is shown it: ``<noscript>`` is entered (a Discourse forum's posts live there), a
segment React streams in hidden (``id="S:0"``) is text, and a page that hides its whole
body until a script runs is read with its hidden elements shown. A block's text is what a
reader sees: soft hyphens and the other invisible format characters removed, composed to NFC
(``afm.filters.invisible``; a site that hyphenates every long word with ``&shy;`` would
otherwise reach the corpus with its words cut in two).
"""

from __future__ import annotations

import functools
import re
from array import array
from dataclasses import dataclass
from typing import Any

import numpy as np

from afm.filters.invisible import visible_text

# Elements whose subtree never holds visible main text.
SKIP = frozenset((
    "script", "style", "template", "svg", "math", "iframe", "head", "select",
    "option", "textarea", "button", "object", "embed", "canvas", "video", "audio", "map",
    "input", "img", "picture", "source", "link", "meta", "title", "-comment", "dialog",
    # Ruby annotations: the readings printed above the characters (furigana), not the text;
    # read inline they would split every annotated word ("子こども" for "子ども").
    "rt", "rp",
))
# Elements that start and end a block. The kinds the model tells apart (``KINDS``) are
# a subset; every other block element is "div".
BLOCK = frozenset((
    "p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "tr", "td",
    "th", "table", "ul", "ol", "dl", "dt", "dd", "section", "article", "header", "footer",
    "nav", "aside", "main", "figure", "figcaption", "form", "address", "details", "summary",
    "caption", "center", "fieldset", "legend", "hr", "body", "html", "tbody", "thead",
    "tfoot", "menu", "hgroup", "search", "label",
))
KINDS = ("div", "p", "h1", "h2", "h3", "li", "td", "pre", "blockquote", "dd", "figcaption",
         "caption", "address")
_KIND_OF = {k: i for i, k in enumerate(KINDS)}
_KIND_OF.update({"h4": _KIND_OF["h3"], "h5": _KIND_OF["h3"], "h6": _KIND_OF["h3"],
                 "th": _KIND_OF["td"], "dt": _KIND_OF["dd"], "summary": _KIND_OF["h3"],
                 "legend": _KIND_OF["caption"]})
# A page showing fewer words than this without its scripts is walked again with its hidden
# elements shown, and read so when that shows three times as many (``page_blocks``).
MIN_SHOWN_WORDS = 30
# Deeper elements are not walked one by one (Python's recursion; real pages nest < 100).
MAX_DEPTH = 200
HEADINGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))

# Ancestor signals, one counter each (``CONTEXT``): structural tags, and words in an
# element's class or id.
CONTEXT = ("nav", "header", "footer", "aside", "form", "article", "main", "list", "table",
           "neg_class", "pos_class", "comment_class", "meta_class")
_C = {name: i for i, name in enumerate(CONTEXT)}
_TAG_CONTEXT = {"nav": _C["nav"], "menu": _C["nav"], "header": _C["header"],
                "footer": _C["footer"], "aside": _C["aside"], "form": _C["form"],
                "article": _C["article"], "main": _C["main"], "ul": _C["list"],
                "ol": _C["list"], "dl": _C["list"], "table": _C["table"]}
# Words looked for in block elements' class and id (inline elements: no attribute read),
# lower-cased: as substrings, or (``_*_TOKENS``) as whole tokens.
_NEG = ("nav", "menu", "foot", "header", "masthead", "sidebar", "side-bar", "widget",
        "breadcrumb", "share", "social", "related", "recommend", "promo", "banner", "advert",
        "sponsor", "cookie", "consent", "subscri", "newsletter", "signup", "sign-up", "login",
        "popup", "modal", "overlay", "toolbar", "paginat", "pager", "tagcloud", "categor",
        "archive", "trending", "popular", "most-", "outbrain", "taboola", "skip", "teaser",
        "read-more", "readmore", "copyright", "disclaimer", "legal", "print")
_NEG_TOKENS = frozenset(("ad", "ads", "tag", "tags", "toc", "rail", "more", "aside"))
_POS = ("article", "content", "main", "post", "entry", "story", "body", "text", "blog",
        "prose", "markdown", "documentation", "answer", "question", "description", "abstract")
# Reader comments, as comment sections are named (WordPress ``comments``, ``commentlist``,
# ``respond``; Disqus ``disqus_thread``; ``reply``, ``replies``): not "respon" (it names
# "responsive" layouts) nor "review" ("preview", and reviews are an article genre).
_COMMENT = ("comment", "reply", "replies", "discuss", "disqus")
_COMMENT_TOKENS = frozenset(("respond",))
_META = ("author", "byline", "date", "time", "meta", "caption", "credit", "contributor",
         "publish", "updated")


def _any_of(words: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern finding any of ``words`` as a substring (one C scan of a class string,
    where a Python loop of ``in`` tests cost a third of the walk on unseen class names)."""
    return re.compile("|".join(map(re.escape, words)))


def _any_of_or_token(words: tuple[str, ...], tokens: frozenset[str]) -> re.Pattern[str]:
    """``words`` anywhere, or a ``tokens`` word between non-alphanumerics (``ad``, not
    ``head``; ``respond``, not ``responsive``)."""
    return re.compile(_any_of(words).pattern + "|(?<![a-z0-9])(?:" + "|".join(sorted(tokens))
                      + ")(?![a-z0-9])")


# Per context counter, the words and whole tokens of a class or id that raise it, in the
# order ``name_marks`` gives them; the C walk matches ASCII names with the same table.
NAME_RULES: tuple[tuple[int, tuple[str, ...], frozenset[str]], ...] = (
    (_C["neg_class"], _NEG, _NEG_TOKENS),
    (_C["pos_class"], _POS, frozenset()),
    (_C["comment_class"], _COMMENT, _COMMENT_TOKENS),
    (_C["meta_class"], _META, frozenset()),
)
_NAME_PATTERNS = tuple((context, _any_of_or_token(words, tokens) if tokens else _any_of(words))
                       for context, words, tokens in NAME_RULES)
_HIDDEN = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_HAS_WORD = re.compile(r"\w")


# What a page declares itself to be: Open Graph's ``og:type`` and the schema.org types of its
# JSON-LD (what publishers write for search engines and link previews).
_LD_TYPE = re.compile(r'"@type"\s*:\s*(\[[^\]]*\]|"[^"]*")')
_FORUM_TYPES = ("DiscussionForumPosting", "QAPage")  # not Question: a FAQPage has it
_ARTICLE_TYPES = re.compile(r"\w*Article|BlogPosting|Report")
_DECLARATIONS = 'meta[property="og:type"], meta[name="og:type"], script[type="application/ld+json"]'


def declared_genre(parser: Any, whole: bool = True) -> str:
    """``forum`` when the page declares a discussion (schema.org ``DiscussionForumPosting``,
    ``QAPage`` in its JSON-LD; ``og:type`` forum or qa), else ``article`` when it declares
    an article (``og:type`` article; schema.org ``*Article``, ``BlogPosting``, ``Report``),
    else ``""``. A declared article's reader comments are not its text
    (``PageRule.comment_words``); a forum's replies are. ``whole``: read the whole page's
    declarations, else the head's (a tenth of the cost)."""
    scope = parser.root if whole else parser.head
    article = False
    for node in scope.css(_DECLARATIONS) if scope is not None else ():
        if node.tag == "meta":
            kind = (node.attributes.get("content") or "").strip().lower()
            if kind in ("forum", "qa"):
                return "forum"
            article = article or kind == "article"
            continue
        for found in _LD_TYPE.findall(node.text(deep=True)):
            types = re.findall(r'"([^"]*)"', found)
            if any(t in _FORUM_TYPES for t in types):
                return "forum"
            article = article or any(_ARTICLE_TYPES.fullmatch(t) for t in types)
    return "article" if article else ""


@dataclass
class BlockTable:
    """One page's blocks: texts and the raw per-block counts (numpy, one row a block), and
    the block elements (containers) with their totals."""

    texts: list[str]  # raw: whitespace as in the page (see ``fold``)
    pre: np.ndarray  # bool, inside <pre> (line breaks and spaces are the text)
    kind: np.ndarray  # int, index into KINDS
    depth: np.ndarray  # int
    link_chars: np.ndarray  # int
    context: np.ndarray  # (blocks, len(CONTEXT)) ancestor counters
    nearest: np.ndarray  # (blocks, len(CONTEXT)) depth of the innermost ancestor raising each (0: none)
    parent: np.ndarray  # index of the block's container in the element arrays (-1: none)
    el_parent: np.ndarray  # each container's own container (-1: none)
    el_depth: np.ndarray  # each container's depth
    el_first: np.ndarray  # the blocks under container e are el_first[e]:el_last[e]
    el_last: np.ndarray
    title: str = ""  # the page's <title>
    genre: str = ""  # what the page declares itself: "article", "forum" or "" (``declared_genre``)

    def __len__(self) -> int:
        return len(self.texts)


class _Walk:
    """The state of one walk over a page (see :func:`page_blocks`)."""

    __slots__ = ("texts", "kinds", "depths", "links", "contexts", "nearests", "parents", "parts",
                 "part_links", "ctx", "near", "el_parent", "el_depth", "open", "kind", "link_depth",
                 "pre", "pres", "el_first", "el_last", "show_hidden")

    def __init__(self, show_hidden: bool = False) -> None:
        self.show_hidden = show_hidden  # enter elements marked hidden (see ``page_blocks``)
        self.texts: list[str] = []
        self.kinds: list[int] = []
        self.depths: list[int] = []
        self.links: list[int] = []
        self.contexts = array("h")  # per block, the CONTEXT counters (flat, as the C walk gives them)
        self.nearests = array("h")  # per block, each counter's innermost depth
        self.parents: list[int] = []
        self.pres: list[bool] = []
        self.parts: list[str] = []
        self.part_links = 0
        self.ctx = [0] * len(CONTEXT)
        self.near = [0] * len(CONTEXT)  # per counter, the depth of the innermost element raising it
        self.el_parent: list[int] = []
        self.el_depth: list[int] = []
        self.el_first: list[int] = []  # the first block under each container
        self.el_last: list[int] = []  # one past the last block under it
        self.open = -1  # the innermost open container
        self.kind = 0
        self.link_depth = 0
        self.pre = 0

    def flush(self, depth: int) -> None:
        """The text gathered since the last block boundary becomes a block (unless blank)."""
        raw = "".join(self.parts)
        self.parts.clear()
        links = self.part_links
        self.part_links = 0
        if raw.isspace() or not raw:
            return
        self.texts.append(raw)
        self.kinds.append(self.kind)
        self.depths.append(depth)
        self.links.append(links)
        self.contexts.extend(self.ctx)
        self.nearests.extend(self.near)
        self.parents.append(self.open)
        self.pres.append(self.pre > 0)

    def walk(self, node: object, depth: int) -> None:
        parts = self.parts
        for child in node.iter(include_text=True):  # type: ignore[attr-defined]
            tag = child.tag
            if tag == "-text":
                text = child.text_content
                # Blank text before any text of the block (indentation between tags) is
                # dropped here: it would only make a blank block to flush.
                if text and (parts or not text.isspace()):
                    parts.append(text)
                    if self.link_depth:
                        self.part_links += len(text.strip())
            elif tag in SKIP:
                continue
            elif tag == "br":
                parts.append("\n")
            elif depth >= MAX_DEPTH:  # pathological nesting: the subtree's text, flat
                parts.append(child.text(deep=True, separator=" "))
            elif tag in BLOCK:
                self.block(child, tag, depth + 1)
            elif tag == "a":
                self.link_depth += 1
                self.walk(child, depth + 1)
                self.link_depth -= 1
            else:
                self.walk(child, depth + 1)

    def block(self, node: object, tag: str, depth: int) -> None:
        attrs = node.attributes  # type: ignore[attr-defined]
        marks: tuple[int, ...] = ()
        if attrs:
            if not self.show_hidden:
                if ("hidden" in attrs and not _streamed_segment(attrs.get("id"))) \
                        or attrs.get("aria-hidden") == "true":
                    return  # not shown: never main text
                style = attrs.get("style")
                if style and ("none" in style or "hidden" in style) and _HIDDEN.search(style):
                    return
            names = attrs.get("class") or ""
            ident = attrs.get("id")
            if ident:
                names = f"{names} {ident}"
            if names:
                marks = name_marks(names)
        ctx_tag = _TAG_CONTEXT.get(tag)
        if ctx_tag is not None:
            marks = (*marks, ctx_tag)
        if self.parts:
            self.flush(depth)
        ctx, near = self.ctx, self.near
        outer_near = [near[m] for m in marks] if marks else ()  # most block elements mark nothing
        for m in marks:
            ctx[m] += 1
            near[m] = depth
        outer, outer_kind = self.open, self.kind
        self.open = len(self.el_parent)
        self.el_parent.append(outer)
        self.el_depth.append(depth)
        self.el_first.append(len(self.texts))
        self.el_last.append(-1)
        kind = _KIND_OF.get(tag)
        if kind is not None:
            self.kind = kind
        pre = tag == "pre"
        self.pre += pre
        self.walk(node, depth)
        if self.parts:
            self.flush(depth)
        self.pre -= pre
        self.el_last[self.open] = len(self.texts)
        self.open, self.kind = outer, outer_kind
        for m, was in zip(reversed(marks), reversed(outer_near)):
            ctx[m] -= 1
            near[m] = was


def _streamed_segment(ident: str | None) -> bool:
    """Whether a ``hidden`` element is a segment React streams in (``<div hidden
    id="S:0">``): server rendering sends a suspended part of the page last, hidden, and a
    script moves it into its place, so it is the page's text, shown."""
    return bool(ident) and ident.startswith("S:") and ident[2:].isdigit()


def _words_up_to(texts: list[str], limit: int) -> int:
    """The words of ``texts``, counted until ``limit`` is reached (a page's first blocks
    settle it: the count runs on every page)."""
    count = 0
    for text in texts:
        count += len(text.split())
        if count >= limit:
            break
    return count


_MARKS: dict[str, tuple[int, ...]] = {}


def name_marks(names: str) -> tuple[int, ...]:
    """The context counters a block element's ``class`` and ``id`` words raise (cached:
    a site's class names repeat on every page)."""
    marks = _MARKS.get(names)
    if marks is None:
        low = names.lower()
        marks = tuple(context for context, pattern in _NAME_PATTERNS if pattern.search(low))
        if len(_MARKS) > 50_000:
            _MARKS.clear()
        _MARKS[names] = marks
    return marks


def container_totals(table: BlockTable, values: np.ndarray) -> np.ndarray:
    """Per container, the sum of ``values`` (one per block, or one row per block) over
    the blocks under it: they are the contiguous run ``el_first:el_last``, so a difference
    of cumulative sums (vectorised, whatever the depth)."""
    cum = np.concatenate([np.zeros((1, *values.shape[1:])), np.cumsum(values, axis=0)])
    return cum[table.el_last] - cum[table.el_first]


# Node ids lexbor gives text, comment and doctype nodes (``LXB_TAG__TEXT``, ...), as
# selectolax reports them (``Node.tag_id``).
_TEXT_ID, _COMMENT_ID, _DOCTYPE_ID = 2, 4, 5


def tag_categories() -> dict[str, int]:
    """What the compiled walk (``_blockwalk.c``) needs to know of each tag, from the sets
    above: skipped, a line break, a link, or a block with its kind, context counter and
    ``pre`` flag packed in one number (``4 | (kind + 1) << 4 | (context + 1) << 10 | pre << 16``)."""
    table = {tag: 1 for tag in SKIP}
    table["br"], table["a"] = 2, 3
    for tag in BLOCK:
        kind, ctx = _KIND_OF.get(tag, -1), _TAG_CONTEXT.get(tag, -1)
        table[tag] = 4 | (kind + 1) << 4 | (ctx + 1) << 10 | (tag == "pre") << 16
    return table


def _hidden_style(style: str) -> bool:
    return _HIDDEN.search(style) is not None


@functools.cache
def _compiled() -> tuple[object, dict[str, int]] | None:
    """The compiled walk bound to selectolax's lexbor, with its tag table, on first use
    (None when the extension was not built or the library lacks what it needs)."""
    try:
        import selectolax.lexbor

        from afm.filters.extraction import _blockwalk  # type: ignore[attr-defined]

        _blockwalk.bind(selectolax.lexbor.__file__)
        _blockwalk.set_name_rules(tuple((c, words, tuple(sorted(tokens))) for c, words, tokens in NAME_RULES))
    except (ImportError, OSError, AttributeError):  # AttributeError: a build older than this file
        return None
    return _blockwalk, tag_categories()


def compiled_walk_available() -> bool:
    """Whether the C walk (``_blockwalk.c``, built by the package's install) is in use."""
    return _compiled() is not None


# The lists one walk gives, in this order (``_Walk``'s attributes; the C walk returns the
# same, the context counters and nearest depths as flat int16 buffers, as ``_Walk`` keeps them).
_LISTS = ("texts", "kinds", "depths", "links", "contexts", "nearests", "parents", "pres",
          "el_parent", "el_depth", "el_first", "el_last")


def _walk_lists(root: object, document: int, show_hidden: bool, compiled: bool) -> tuple:
    """The walk's lists under ``root``: by the C walk when ``compiled`` and built (and the
    page nests no deeper than ``MAX_DEPTH``), else by :class:`_Walk`."""
    bound = _compiled() if compiled else None
    if bound is not None:
        module, categories = bound
        out = module.walk(root.mem_id, document, _TEXT_ID, _COMMENT_ID, _DOCTYPE_ID,  # type: ignore[attr-defined]
                          categories, name_marks, _hidden_style, len(CONTEXT),
                          show_hidden, MAX_DEPTH)
        if out is not None:
            return out
    walk = _Walk(show_hidden=show_hidden)
    walk.walk(root, 0)
    walk.flush(0)
    return tuple(getattr(walk, name) for name in _LISTS)


def _per_block(values: Any, n: int) -> np.ndarray:
    """(n, len(CONTEXT)) int16 rows from the walk's flat buffer of them (``array("h")`` or the
    C walk's bytearray; read in place, no Python int per value)."""
    if not len(values):
        return np.zeros((n, len(CONTEXT)), dtype=np.int16)
    return np.frombuffer(values, dtype=np.int16).reshape(n, len(CONTEXT))


def page_blocks(html: str, compiled: bool = True) -> BlockTable:
    """The blocks of a decoded page, in document order. ``compiled``: walk the DOM in C
    when the extension is built (``_blockwalk.c``; the same blocks as the Python walk,
    which is the fallback and the reference)."""
    from selectolax.lexbor import LexborHTMLParser

    parser = LexborHTMLParser(html) if html else None
    root = parser.body if parser is not None else None
    title = genre = ""
    lists: tuple = ([],) * len(_LISTS)
    if root is not None:
        top = parser.root  # type: ignore[union-attr]
        document = top.parent.mem_id if top is not None and top.parent is not None else 0
        lists = _walk_lists(root, document, False, compiled)
        shown = _words_up_to(lists[0], MIN_SHOWN_WORDS)
        if shown < MIN_SHOWN_WORDS:
            # Nearly nothing is shown without a script: a page that hides its body until
            # a script runs (an anti-flicker ``visibility:hidden`` on the root, a deferred
            # ``display:none`` wrapper) hides what it will show. When the hidden text is
            # most of the page, it is the page: walk it all.
            every = _walk_lists(root, document, True, compiled)
            enough = max(MIN_SHOWN_WORDS, 3 * shown)
            if _words_up_to(every[0], enough) >= enough:
                lists = every
        node = parser.css_first("title")  # type: ignore[union-attr]
        title = node.text() if node is not None else ""
    (texts, kinds, depths, links, contexts, nearests, parents, pres, el_parent, el_depth, el_first,
     el_last) = lists
    n = len(texts)
    # A block of invisible characters alone (a zero-width space in a <p>) keeps its row with
    # an empty text: the rows and the containers' block runs stay as the walk made them;
    # ``render`` skips it, and its link characters (counted on the raw text) are clipped to
    # its length by the features. The title stays as the page has it (the shipped model was
    # fitted so).
    context = _per_block(contexts, n)
    if parser is not None:
        # The genre decides only where blocks sit under comment-named containers: there
        # the whole page's declarations are read, elsewhere the head's.
        genre = declared_genre(parser, whole=bool(context[:, _C["comment_class"]].any()))
    return BlockTable(
        texts=[t if t.isascii() else visible_text(t) for t in texts],  # most blocks: no call
        pre=np.asarray(pres, dtype=bool),
        kind=np.asarray(kinds, dtype=np.int16),
        depth=np.asarray(depths, dtype=np.int16),
        link_chars=np.asarray(links, dtype=np.int32),
        context=context,
        nearest=_per_block(nearests, n),
        parent=np.asarray(parents, dtype=np.int32),
        el_parent=np.asarray(el_parent, dtype=np.int32),
        el_depth=np.asarray(el_depth, dtype=np.int16),
        el_first=np.asarray(el_first, dtype=np.int32),
        el_last=np.asarray(el_last, dtype=np.int32),
        title=title,
        genre=genre,
    )
