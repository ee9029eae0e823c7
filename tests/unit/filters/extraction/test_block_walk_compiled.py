"""The block extractor's DOM walk in C (``filters/extraction/_blockwalk.c``) gives the same
blocks as the Python walk, which stays the fallback and the reference."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from selectolax.lexbor import LexborHTMLParser

from afm.filters.extraction import blocks
from afm.filters.extraction.blocks import MAX_DEPTH, compiled_walk_available, page_blocks

ARRAYS = ("pre", "kind", "depth", "link_chars", "context", "nearest", "parent", "el_parent", "el_depth",
          "el_first", "el_last")

needs_compiled = pytest.mark.skipif(not compiled_walk_available(),
                                    reason="the C walk is not built in this install (no C compiler?)")


def assert_same_blocks(html: str) -> None:
    python, compiled = page_blocks(html, compiled=False), page_blocks(html, compiled=True)
    # the walks' own texts, before the table shows them as a reader sees them (so a
    # difference in invisible characters is not hidden by their removal)
    parser = LexborHTMLParser(html)
    document = parser.root.parent.mem_id if parser.root is not None and parser.root.parent is not None else 0
    if parser.body is not None:
        raw = [blocks._walk_lists(parser.body, document, False, compiled)[0] for compiled in (False, True)]
        assert raw[0] == raw[1]
    assert compiled.texts == python.texts
    assert compiled.title == python.title
    for name in ARRAYS:
        a, b = getattr(python, name), getattr(compiled, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


def _body(inner: str, head: str = "<title>A page</title>") -> str:
    return f"<!DOCTYPE html><html><head>{head}</head><body>{inner}</body></html>"


PAGES = {
    "blocks, links, lists, tables": _body(
        "<header class='site-header'><nav><ul><li><a href='/'>Home</a></li><li><a href=/b>Blog</a></li></ul></nav>"
        "</header><main><article class='post entry'><h1>Title</h1><p>First <b>bold</b> and <a href=x>a link"
        "</a> in prose.</p><table><tr><th>a</th><td>1</td></tr></table><blockquote>Quoted.</blockquote>"
        "</article></main><footer id='footer'>(c) 2024</footer>"),
    "hidden in every way": _body(
        "<div hidden>gone</div><div aria-hidden='true'>gone too</div><p style='display: none'>no</p>"
        "<p style='color: none'>a style naming none that shows</p><p style='VISIBILITY:HIDDEN'>upper</p>"
        "<div hidden id='S:12'>streamed segment, shown</div><div hidden id='S:'>not a segment</div>"
        "<div hidden id='S:\u0663'>Arabic-Indic digit</div><p>shown</p>"),
    "whitespace, breaks and code": _body(
        "\n   <p>  spaced\u00a0text \u200b and\ttabs </p>\n<pre>line one\n   line two</pre>"
        "<p>one<br>two<br/>three</p><div>\u3000</div><p> </p>"),
    "comments, processing instructions, ruby": _body(
        "<div class='side-text'><?php posts('sort:date'); ?><a class='btn' href='/c'>more</a></div>"
        "<!-- a comment --><p><ruby>子<rt>こ</rt></ruby>ども <rp>(</rp>news</p>"),
    "non-ASCII names and text": _body(
        "<div class='Kommentar-Bereich ΣΧΟΛΙΑ' id='über'>Grüße aus Köln, «très» bien — 中文 текст.</div>"
        "<div class='\u212aomment'>Kelvin sign in a class name</div><section class='related-posts'>x</section>"),
    "skipped subtrees": _body(
        "<script>var x = '<p>not text</p>';</script><style>p{}</style><svg><text>no</text></svg>"
        "<noscript><p>read as a crawler is served it</p></noscript><template><p>no</p></template>"
        "<form><label>Name</label><input value='x'><button>Send</button><select><option>a</option></select></form>"),
    "a body hidden until a script runs": _body(
        "<div style='visibility:hidden' class='wrapper'><article><p>" + "word " * 60 + "</p></article></div>"),
    "custom and unknown tags": _body(
        "<my-widget class='menu'>custom element</my-widget><fb:like>namespaced</fb:like><blink>old</blink>"
        "<center>centred</center>"),
    "class and id names the C walk matches itself": _body(
        "<div class='AD-Slot'>upper-case token</div><div class='head-line'>head is not ad</div>"
        "<div id='respond'>a token id</div><div class='responsive'>not respond</div>"
        "<div class='' id='Sidebar'>an id alone</div><div class='post_content x-ad'>both</div>"
        "<div class='" + "wide-" * 120 + "comment'>a name past the C buffer</div>"
        "<div class='tags'><p class='x'>nested <span class='ad'>inline, not read</span></p></div>"),
    "pathological nesting": _body("<div>" * (MAX_DEPTH + 20) + "deep text" + "</div>" * (MAX_DEPTH + 20)),
    "nesting just under the limit": _body("<span>" * (MAX_DEPTH - 3) + "deep" + "</span>" * (MAX_DEPTH - 3)),
    "empty": "",
    "no body text": "<html><head><title>t</title></head><body></body></html>",
    "text only": "plain text, no markup at all",
}


@needs_compiled
@pytest.mark.parametrize("name", sorted(PAGES))
def test_compiled_walk_gives_the_python_walks_blocks(name: str) -> None:
    assert_same_blocks(PAGES[name])


@needs_compiled
def test_compiled_walk_on_real_pages(shared_eval: Path) -> None:
    """Every page of ScrapingHub's benchmark (181 real article pages) walks the same."""
    from afm.filters.extraction.decode import decode_html
    from afm.filters.extraction.gold import load_scrapinghub

    pages = load_scrapinghub(shared_eval)
    assert len(pages) > 100
    for page in pages:
        html = decode_html(page.body)[0] if isinstance(page.body, bytes) else page.body
        assert_same_blocks(html)


def _names(rng: random.Random) -> str:
    """A class/id string made of the rules' words, parts of them, case changes and the
    separators around tokens, so boundaries and overlaps are met often."""
    words = [w for _, ws, ts in blocks.NAME_RULES for w in (*ws, *ts)]
    parts = []
    for _ in range(rng.randint(1, 6)):
        w = rng.choice(words + ["x", "9", "content", "head", "load", "badge", "grad"])
        w = w[: rng.randint(1, len(w))] if rng.random() < 0.2 else w
        parts.append(w.upper() if rng.random() < 0.2 else w)
        parts.append(rng.choice(["", " ", "-", "_", "9", "a", "  "]))
    return "".join(parts)


@needs_compiled
def test_the_c_matcher_marks_names_as_name_marks_does() -> None:
    """The C walk matches ASCII class/id names itself (``set_name_rules``); on every name it
    gives ``name_marks``' counters, in its order."""
    from afm.filters.extraction import _blockwalk  # type: ignore[attr-defined]

    rng = random.Random(0)
    names = [_names(rng) for _ in range(20_000)] + ["ad", "AD", "head", "x-ad-y", "xad", "ad9", "respond",
                                                    "responsive", "tag cloud", "Tags", " ", "-", "a" * 600]
    for names_ in names:
        c = _blockwalk.marks(names_)
        if len(names_) <= 512:
            assert c == blocks.name_marks(names_), names_
        else:
            assert c is None  # past the C buffer: name_marks reads it
    assert _blockwalk.marks("Kommentar-Bereich ΣΧΟΛΙΑ") is None  # not ASCII: name_marks reads it


def test_the_python_walk_is_used_when_the_compiled_one_is_off(monkeypatch) -> None:
    monkeypatch.setattr(blocks, "_compiled", lambda: None)
    assert not compiled_walk_available()
    table = page_blocks(PAGES["blocks, links, lists, tables"])
    assert "First bold and a link in prose." in table.texts


def test_the_install_builds_the_compiled_walk_where_a_compiler_is(can_build_c) -> None:
    """The extension is optional in setup.py, so a broken build would pass silently: where
    this machine has the C compiler Python was built with and Python's headers, the walk
    must be there."""
    assert compiled_walk_available()
