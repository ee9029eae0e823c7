"""The block extractor: lexbor blocks, their features, the forest, the text it writes,
and the stage's ``method="blocks"``; the training's labels and by-source folds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from afm.errors import UserError
from afm.filters.extract import ExtractConfig, Extractor, follow_language_stage
from afm.filters.extraction.block_features import (
    MAX_OFF,
    NAMES,
    NEAREST_NAMES,
    PROSE_PARENT_NAMES,
    features,
    nearest_signals,
    prose_parent_signals,
    text_stats,
)
from afm.filters.extraction.block_model import (
    MODEL_PATH,
    BlockModel,
    Forest,
    PageRule,
    extract_blocks,
    fill_gaps,
    load_block_model,
    render,
)
from afm.filters.extraction.blocks import CONTEXT, KINDS, container_totals, name_marks, page_blocks
from afm.filters.extraction.gold import GoldPage
from tests.unit.filters.extraction.test_extract import ARTICLE, page

PAGE = """<html><head><title>t</title><style>p{}</style></head><body>
<nav class="menu"><ul><li><a href="/">Home</a></li><li><a href="/x">News</a></li></ul></nav>
<div class="post-content"><h2>A heading</h2>
<p>First paragraph with <a href="/l">a link</a> and more words.</p>
<ul><li>one item</li><li>two <b>items</b></li></ul>
<table><tr><td>a1</td><td>b1</td></tr><tr><td>a2</td><td>b2</td></tr></table>
<pre>def f():
    return 1</pre>
<div style="display:none">hidden text</div><p hidden>also hidden</p>
<script>var x = "script text";</script>
</div><footer>Copyright (c) 2020</footer></body></html>"""


def test_blocks_cut_the_page_at_block_elements_and_skip_what_is_not_shown() -> None:
    t = page_blocks(PAGE)
    folded = [" ".join(x.split()) for x in t.texts]
    assert folded == ["Home", "News", "A heading", "First paragraph with a link and more words.",
                      "one item", "two items", "a1", "b1", "a2", "b2", "def f(): return 1",
                      "Copyright (c) 2020"]
    kinds = [KINDS[k] for k in t.kind]
    assert kinds[:4] == ["li", "li", "h2", "p"] and kinds[6] == "td" and kinds[10] == "pre"
    assert t.link_chars[0] == 4 and t.link_chars[3] == len("a link")
    nav, footer, neg = CONTEXT.index("nav"), CONTEXT.index("footer"), CONTEXT.index("neg_class")
    assert t.context[0, nav] == 1 and t.context[0, neg] >= 1
    assert t.context[3, CONTEXT.index("pos_class")] == 1 and t.context[3, nav] == 0
    assert t.context[-1, footer] == 1
    assert t.pre[10] and "\n" in t.texts[10]
    # Containers hold contiguous runs of blocks; their totals are sums over the run.
    words = np.array([len(x.split()) for x in t.texts], dtype=float)
    totals = container_totals(t, words)
    root = int(np.argmin(t.el_depth))
    assert totals[root] == words[t.el_first[root]:t.el_last[root]].sum()


def test_comment_sections_are_marked_by_their_names_not_by_lookalikes() -> None:
    """WordPress's ``comments`` / ``respond`` / ``commentlist``, Disqus's thread and reply
    lists are reader comments; a ``responsive`` layout, an image ``preview`` and a music
    ``reviews`` section are not."""
    comment = CONTEXT.index("comment_class")
    for names in ("comments", "respond", "comment-respond", "commentlist", "disqus_thread",
                  "replies", "quick-reply"):
        assert comment in name_marks(names), names
    for names in ("img-responsive", "table-responsive", "response", "preview", "musicreviews",
                  "correspondent"):
        assert comment not in name_marks(names), names


def test_text_a_crawler_is_served_is_read() -> None:
    """What a page shows a client without scripts is main text: a ``<noscript>`` body (a
    Discourse forum's posts), a segment React streams in hidden (``<div hidden
    id="S:0">``), and a page hiding its whole body until a script runs; a hidden popup
    on a page that shows its text stays out."""
    words = " ".join(f"word{i}" for i in range(40))
    forum = f"<html><body><noscript><div id='main-outlet'><p>{words}.</p></div></noscript></body></html>"
    assert [" ".join(x.split()) for x in page_blocks(forum).texts] == [f"{words}."]
    streamed = (f"<html><body><div id='x'><p>Loading</p></div><div hidden id='S:0'><p>{words}.</p>"
                "</div><div hidden id='menu'><p>secret menu</p></div></body></html>")
    assert [" ".join(x.split()) for x in page_blocks(streamed).texts] == ["Loading", f"{words}."]
    cloaked = f"<html><body><div style='visibility:hidden'><p>{words}.</p></div></body></html>"
    assert [" ".join(x.split()) for x in page_blocks(cloaked).texts] == [f"{words}."]
    shown = (f"<html><body><p>{words}.</p><div style='display: none'><p>Subscribe now</p></div>"
             "</body></html>")
    assert [" ".join(x.split()) for x in page_blocks(shown).texts] == [f"{words}."]


def test_ruby_readings_are_not_text() -> None:
    """Furigana (``<rt>``) and its fallback parentheses (``<rp>``) annotate characters; the
    text is the base characters alone."""
    page = ("<html><body><p><ruby>子<rp>(</rp><rt>こ</rt><rp>)</rp></ruby>どもへの"
            "<ruby>虐待<rt>ぎゃくたい</rt></ruby>をなくすための法律</p></body></html>")
    assert page_blocks(page).texts == ["子どもへの虐待をなくすための法律"]


@pytest.mark.parametrize("compiled", [True, False])
def test_block_text_is_what_a_reader_sees(compiled: bool) -> None:
    # soft hyphens (entity and raw), a zero-width space and a decomposed umlaut: shown,
    # the words are whole; the text the corpus gets must be too (trafilatura's is)
    html = ("<html><body><p>Wäh&shy;rend Sie u\u0308ber den Markt schlen\u00addern, "
            "stau\u200bnen und kaufen.</p></body></html>")
    (text,) = page_blocks(html, compiled=compiled).texts
    assert " ".join(text.split()) == "Während Sie über den Markt schlendern, staunen und kaufen."


def test_text_stats_match_plain_python() -> None:
    texts = ["Hello, world. Second sentence!", "  \u00a0 lower case 123 | x  ", "© 2020", "x"]
    st = text_stats(texts)
    assert st[:, 0].tolist() == [len(t.split()) for t in texts]
    assert st[:, 1].tolist() == [len("".join(t.split())) for t in texts]
    assert st[0, 2] == 2 and st[0, 3] == 1 and st[0, 4] == 1 and st[0, 5] == 1
    assert st[1, 5] == 0 and st[1, 7] == 1 and st[1, 8] == 3 and st[2, 6] == 1


def test_features_have_one_row_per_block_and_a_name_per_column() -> None:
    t = page_blocks(PAGE)
    x = features(t)
    assert x.shape == (len(t), len(NAMES)) and np.isfinite(x).all()
    assert features(page_blocks("")).shape == (0, len(NAMES))


@pytest.mark.parametrize("compiled", [True, False])
def test_the_nearest_signal_tells_a_box_inside_the_article_from_an_article_inside_a_box(compiled: bool) -> None:
    """The counters alone read the two alike (a negative name and a content one on the
    path); which is innermost is what differs: a newsletter box set inside the article is
    boilerplate, an article inside a wrapper named ``promo-page`` is the text."""
    box_in_article = page_blocks("<body><article class=story><p>The text of the story goes on here.</p>"
                                 "<div class=newsletter><p>Sign up for our newsletter</p></div>"
                                 "<figure><figcaption class=photo-credit>Photo by a agency</figcaption>"
                                 "</figure></article></body>", compiled=compiled)
    article_in_box = page_blocks("<body><div class=promo-page><article><p>The text of the story goes on "
                                 "here.</p></article></div></body>", compiled=compiled)
    col = {name: j for j, name in enumerate(NEAREST_NAMES)}
    inside = nearest_signals(box_in_article)
    assert inside[:, col["neg_in_content"]].tolist() == [0, 1, 0]
    assert inside[:, col["meta_in_content"]].tolist() == [0, 0, 1]
    assert inside[:, col["steps_to_neg"]].tolist() == [10, 1, 10]  # none: MAX_STEPS
    same_element = nearest_signals(page_blocks("<body><article><p>The text of the story goes on here.</p>"
                                               "<div class=article__related><p>Another story</p></div>"
                                               "</article></body>", compiled=compiled))
    assert same_element[:, col["neg_in_content"]].tolist() == [0, 1]  # BEM: a part of the article
    wrapped = nearest_signals(article_in_box)
    assert wrapped[:, col["neg_in_content"]].tolist() == [0]
    assert wrapped[:, col["content_in_neg"]].tolist() == [1]
    at = NAMES.index(NEAREST_NAMES[0])
    assert features(box_in_article)[:, at: at + len(NEAREST_NAMES)].tolist() == inside.tolist()


@pytest.mark.parametrize("compiled", [True, False])
def test_the_prose_parent_tells_the_articles_paragraphs_from_what_is_set_inside_it(compiled: bool) -> None:
    """The paragraphs are siblings under one element; a caption and a boxed promotion set
    inside the same article sit deeper (or are another kind of block); a footer lies outside."""
    sentence = "The text of the story goes on here with more words than ten of them. "
    table = page_blocks("<body><article><div class=body>"
                        f"<p>{sentence}</p><p>{sentence * 2}</p>"
                        "<figure><figcaption>A photo of the scene, by an agency</figcaption></figure>"
                        "<div class=box><p>Sign up for our newsletter to get the news each day.</p></div>"
                        "</div></article><footer><p>All rights reserved.</p></footer></body>", compiled=compiled)
    col = {name: j for j, name in enumerate(PROSE_PARENT_NAMES)}
    pp = features(table)[:, -len(PROSE_PARENT_NAMES):]
    # prose: the two paragraphs (15 + 30 words) and the promotion (11 words, a sentence)
    assert np.allclose(pp[:, col["pp_share"]], 45 / 56)
    assert pp[:, col["pp_member"]].tolist() == [1, 1, 0, 0, 0]
    assert pp[:, col["pp_inside"]].tolist() == [0, 0, 1, 1, 0]
    assert pp[:, col["pp_steps_off"]].tolist() == [0, 0, 1, 1, 6]  # outside: MAX_OFF + 1
    assert pp[:, col["pp_kind_match"]].tolist() == [1, 1, 0, 1, 1]  # the caption is another kind
    assert prose_parent_signals(page_blocks(""), np.zeros(0)).shape == (0, len(PROSE_PARENT_NAMES))
    # the prose straight in the page, in no element: no prose parent, and no block is its member
    loose = features(page_blocks(f"<html>{sentence}<p>two words</p></html>", compiled=compiled))
    assert loose[:, -len(PROSE_PARENT_NAMES):].tolist() == [[0, 0, 0, MAX_OFF + 1, 0]] * 2


def test_forest_matches_sklearn() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 6)).astype(np.float32)
    y = x[:, 0] + x[:, 1] * x[:, 2] + 0.3 * rng.normal(size=3000) > 0
    model = HistGradientBoostingClassifier(max_iter=30, max_depth=4, early_stopping=False,
                                           random_state=0).fit(x, y)
    forest = Forest.from_sklearn(model)
    assert np.abs(forest.probability(x) - model.predict_proba(x)[:, 1]).max() < 1e-9
    again = Forest.from_json(forest.to_json())
    assert np.array_equal(again.decision(x), forest.decision(x))


def test_render_writes_lists_tables_and_code() -> None:
    t = page_blocks(PAGE)
    text = render(t, np.ones(len(t), dtype=bool))
    assert "- one item" in text.split("\n")
    assert "| a1 | b1 |" in text.split("\n") and "| a2 | b2 |" in text.split("\n")
    assert "def f():\n    return 1" in text


def test_shipped_model_loads_and_extracts_the_article() -> None:
    model = load_block_model(str(MODEL_PATH))
    assert set(model.names) <= set(NAMES) and 0 < model.threshold < 1
    assert len(model.forest.feature) <= 400
    ex = Extractor(ExtractConfig(method="blocks"))
    d = ex(page(ARTICLE))
    assert d.keep
    text = d.document["text"]
    assert "sleeper service will link Zurich" in text and "tickets will go on sale" in text
    assert "Privacy" not in text and "Why cats purr" not in text


def test_methods_are_selectable_and_checked() -> None:
    from afm.errors import UserError

    d = Extractor(ExtractConfig(method="trafilatura"))(page(ARTICLE))
    assert d.keep and "sleeper service" in d.document["text"]
    with pytest.raises(UserError):
        Extractor(ExtractConfig(method="nope"))
    cfg = ExtractConfig(method="blocks")
    follow_language_stage(cfg, {})
    assert cfg.early_language == []  # extraction is cheaper than the check


def test_model_file_refuses_other_features(tmp_path) -> None:
    import json

    from afm.errors import UserError

    model = load_block_model(str(MODEL_PATH))
    path = tmp_path / "m.json"
    model.save(path)
    assert BlockModel.load(path).threshold == model.threshold
    data = json.loads(path.read_text())
    for names in (data["features"][:-1],  # fewer names than the trees and nets read
                  [*data["features"][:-1], "no_such_feature"]):
        path.write_text(json.dumps({**data, "features": names}))
        with pytest.raises(UserError):
            BlockModel.load(path)


def test_a_model_fitted_before_newer_columns_reads_its_own_by_name(tmp_path) -> None:
    """The feature list grows (the nearest-signal columns came after the 2026-12-06 file was
    fitted): a file naming a subset of today's features reads those columns, in its own
    order, and scores as it did on the rows it was fitted on."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    table = page_blocks(PAGE)
    x = features(table)
    older = [n for n in reversed(NAMES) if n not in NEAREST_NAMES]  # its own order
    x_older = x[:, [NAMES.index(n) for n in older]]
    y = np.arange(len(table)) % 2 == 0
    forest = Forest.from_sklearn(HistGradientBoostingClassifier(max_iter=5, min_samples_leaf=1).fit(x_older, y))
    path = tmp_path / "m.json"
    BlockModel(forest, 0.5, tuple(older)).save(path)
    model = BlockModel.load(path)
    assert np.array_equal(model.own_columns(x), x_older)
    assert np.allclose(model.probability(table), forest.probability(x_older))


def test_labels_from_text_gold_and_snippets() -> None:
    from afm.filters.extraction.block_train import block_labels

    t = page_blocks(PAGE)
    gold = GoldPage("x", "1", None, b"", truth="A heading\nFirst paragraph with a link and more words.")
    label, tokens = block_labels(t, gold)
    assert label[2] == 1.0 and label[3] == 1.0 and label[0] == 0.0 and label[-1] == 0.0
    assert tokens[3] == 8
    snip = GoldPage("y", "2", None, b"", with_=["one item"], without=["Copyright (c) 2020"])
    label, _ = block_labels(t, snip)
    assert label[4] == 1.0 and label[-1] == 0.0 and np.isnan(label[0])


def test_pathological_nesting_is_read_flat_not_a_crash() -> None:
    html = "<body>" + "<div>" * 5000 + "<p>deep text here</p>" + "</div>" * 5000 + "<p>after</p></body>"
    t = page_blocks(html)
    assert any("deep text here" in x for x in t.texts) and "after" in t.texts[-1]


def test_fill_keeps_a_likely_block_between_kept_neighbours_only() -> None:
    keep = np.array([True, False, True, False, False, False, False, False, True])
    p = np.array([0.9, 0.3, 0.9, 0.3, 0.3, 0.3, 0.3, 0.1, 0.9])
    out = fill_gaps(keep, p, 0.2)
    # block 1 sits between kept 0 and 2; blocks 3-7 lie in a gap of 6 (> FILL_SPAN)
    assert out.tolist() == [True, True, True, False, False, False, False, False, True]
    assert fill_gaps(keep, p, 0.5).tolist() == keep.tolist()
    edge = np.array([False, True, False])
    assert fill_gaps(edge, np.ones(3), 0.0).tolist() == edge.tolist()  # no kept block on one side


def _model_keeping_all(rule: PageRule) -> BlockModel:
    """A model whose forest says 0.9 for every block (one leaf, no split)."""
    one = np.zeros((1, 1))
    forest = Forest(float(np.log(9.0)), one.astype(np.int64), one, np.full((1, 1), -1),
                    np.full((1, 1), -1), one, 0)
    return BlockModel(forest, 0.5, NAMES, {}, None, rule)


def test_lead_rule_drops_kept_lines_before_the_first_prose_block() -> None:
    html = ("<html><body><h1>Big Headline</h1><p>By A. Writer</p>"
            "<p>The first real paragraph has more than ten words in it, so it counts.</p>"
            "<p>Short tail.</p></body></html>")
    table = page_blocks(html)
    text = render(table, _model_keeping_all(PageRule(lead_words=10)).keep(table))
    assert text.split("\n") == [
        "The first real paragraph has more than ten words in it, so it counts.", "Short tail."]
    assert "Big Headline" in render(table, _model_keeping_all(PageRule()).keep(table))


def test_headline_rule_drops_the_h1_above_the_text_only() -> None:
    body = "The first real paragraph has well over twenty words in it, so the page's text starts here and the rule stops."
    html = (f"<html><body><h1>Big Headline</h1><p>By A. Writer</p><p>{body}</p>"
            "<h1>A later section title</h1><p>Short tail.</p></body></html>")
    table = page_blocks(html)
    text = render(table, _model_keeping_all(PageRule(drop_headline=True)).keep(table))
    assert text.split("\n") == ["By A. Writer", body, "A later section title", "Short tail."]
    assert "Big Headline" in render(table, _model_keeping_all(PageRule()).keep(table))
    assert PageRule.from_json(PageRule(drop_headline=True).to_json()).drop_headline
    assert PageRule.from_json({"fill_below": 0.2}) == PageRule(0.2)  # a model file from before


_ARTICLE_HEAD = '<head><meta property="og:type" content="article"></head>'
_FORUM_HEAD = ('<head><meta property="og:type" content="article"><script type="application/ld+json">'
               '{"@context": "https://schema.org", "@type": "DiscussionForumPosting"}</script></head>')
_FAQ_HEAD = ('<head><script type="application/ld+json">{"@type": "FAQPage", "mainEntity": '
             '[{"@type": "Question", "name": "q"}]}</script></head>')


def test_the_page_declares_its_genre() -> None:
    body = "<body><p>x</p></body>"
    assert page_blocks(f"<html>{_ARTICLE_HEAD}{body}</html>").genre == "article"
    news = '<head><script type="application/ld+json">{"@type": ["NewsArticle"]}</script></head>'
    assert page_blocks(f"<html>{news}{body}</html>").genre == "article"
    assert page_blocks(f"<html>{_FORUM_HEAD}{body}</html>").genre == "forum"
    assert page_blocks(f"<html>{_FAQ_HEAD}{body}</html>").genre == ""  # FAQ questions: no forum
    assert page_blocks(f"<html>{body}</html>").genre == ""


def test_comment_rule_drops_reader_comments_of_declared_articles_only() -> None:
    """An article's reader comments go when its own text is long enough; a forum's
    replies, under the same class names, stay; a page whose text is all under a
    comment-named container is left whole."""
    story = " ".join(f"story{i}" for i in range(60)) + "."
    body = (f"<body><div class='entry'><p>{story}</p></div><div id='comments'>"
            "<p>First reader comment here.</p><p>Second one.</p></div></body>")
    rule = PageRule(comment_words=50)
    in_body = ('<script type="application/ld+json">{"@type": "DiscussionForumPosting"}</script>'
               + body.removeprefix("<body>"))
    for head, page_body, kept in ((_ARTICLE_HEAD, body, [story]),
                                  (_FORUM_HEAD, body, [story, "First reader comment here.", "Second one."]),
                                  (_ARTICLE_HEAD, "<body>" + in_body, [story, "First reader comment here.",
                                                                       "Second one."]),
                                  ("", body, [story, "First reader comment here.", "Second one."])):
        table = page_blocks(f"<html>{head}{page_body}</html>")
        assert render(table, _model_keeping_all(rule).keep(table)).split("\n") == kept
    short = page_blocks(f"<html>{_ARTICLE_HEAD}<body><p>Short post.</p><div id='comments'>"
                        "<p>A reply.</p></div></body></html>")
    assert render(short, _model_keeping_all(rule).keep(short)).split("\n") == ["Short post.", "A reply."]
    assert PageRule.from_json(rule.to_json()) == rule


def test_fallback_takes_pages_with_too_few_kept_words(tmp_path) -> None:
    short = "<html><body><p>Only four words here.</p></body></html>"
    model = _model_keeping_all(PageRule(fallback_words=5))
    text, signals = extract_blocks(model, short, lambda html: "fallback text")
    assert text == "fallback text" and signals["fallback"] == 1.0
    long = "<html><body><p>Five words are here now.</p></body></html>"
    text, signals = extract_blocks(model, long, lambda html: "fallback text")
    assert text == "Five words are here now." and signals["fallback"] == 0.0
    assert extract_blocks(model, short)[0] == "Only four words here."  # no fallback given
    path = tmp_path / "m.json"
    model.save(path)
    assert BlockModel.load(path).rule == PageRule(fallback_words=5)
    # the extractor it hands on to is in the file; a file without the field means trafilatura
    to_resili = PageRule(fallback_words=5, fallback_to="resiliparse")
    assert PageRule.from_json(to_resili.to_json()) == to_resili
    assert PageRule.from_json({"fallback_words": 5}).fallback_to == "trafilatura"
    assert PageRule.from_json({"fallback_words": 5, "fallback_to": None}).fallback_to == "trafilatura"
    with pytest.raises(UserError, match="fallback extractor 'readability'"):
        PageRule.from_json({"fallback_words": 5, "fallback_to": "readability"})


def test_the_extract_stage_runs_the_fallback_its_rule_names(tmp_path) -> None:
    """A page the rule hands on gets the named extractor's text: Resiliparse's main-content
    text for a rule that names it, not trafilatura's (what the choice scored)."""
    from afm.filters.extraction.candidates import Page, run_candidate

    html = ("<html><body><nav><a href='/'>Home</a></nav><article><h1>Title</h1><p>"
            + "A long paragraph of the article's own words, one sentence after another. " * 6
            + "</p><ul><li>First point of the list</li><li>Second point of the list</li></ul>"
            "<p>Closing words of the piece.</p></article></body></html>")
    texts: dict[str, str] = {}
    for to in ("resiliparse", "trafilatura"):
        path = tmp_path / f"{to}.json"
        _model_keeping_all(PageRule(fallback_words=10_000, fallback_to=to)).save(path)
        stage = Extractor(ExtractConfig(method="blocks", block_model_path=str(path), early_language=[]))
        text, signals = stage.extract_text(html, "https://example.org/a")
        assert signals["fallback"] == 1.0
        expected = (run_candidate("resiliparse", Page(html, "https://example.org/a")) if to == "resiliparse"
                    else stage._trafilatura(html, "https://example.org/a", precision=None))
        assert text == expected.strip() and text
        texts[to] = text
    assert texts["resiliparse"] != texts["trafilatura"]  # so the test tells the two apart


def test_page_rule_choice_keeps_fallback_within_its_share() -> None:
    from afm.filters.extraction.block_train import (
        COMMENTS,
        FALLBACKS,
        FILLS,
        HEADLINES,
        LEADS,
        MAX_FALLBACK_SHARE,
        page_rules,
    )

    rules = page_rules(("trafilatura",))
    # the grid's order decides ties in the choice: trafilatura's alone is the order before
    # rules named their extractor, so earlier runs repeat
    assert rules == [PageRule(f, lead, fb, head, c) for c in COMMENTS for head in HEADLINES for f in FILLS
                     for lead in LEADS for fb in FALLBACKS]
    assert PageRule() in rules and len(set(rules)) == len(rules)
    assert {r.fallback_to for r in rules} == {"trafilatura"}
    assert 0 < MAX_FALLBACK_SHARE <= 0.05
    # --fallback none: the same grid less every rule that could hand a page on
    kept = page_rules(())
    assert kept == [r for r in rules if r.fallback_words is None] and PageRule() in kept
    assert 0 < len(kept) < len(rules)
    # --fallback resiliparse: the same grid, each fallback word count naming Resiliparse
    resili = page_rules(("resiliparse",))
    assert [replace(r, fallback_to="trafilatura") for r in resili] == rules
    assert page_rules() == resili  # the default since 2026-12-07
    assert {r.fallback_to for r in resili if r.fallback_words is not None} == {"resiliparse"}
    both = page_rules(("trafilatura", "resiliparse"))
    assert set(both) == set(rules) | set(resili) and len(both) == len(set(both))
    assert page_rules(("resiliparse", "trafilatura")) == both  # however the flags were typed
    with pytest.raises(UserError, match="boilerpipe"):
        page_rules(("boilerpipe",))
    # without the lead rule: the same grid and order, less the rules that drop lead blocks
    assert page_rules(leads=(None,)) == [r for r in resili if r.lead_words is None]
    assert any(r.lead_words for r in resili)
    for leads in ((), (0,)):
        with pytest.raises(UserError, match="lead rule"):
            page_rules(leads=leads)
    assert page_rules(leads=(10, None, 10)) == resili  # one grid order, however given
    # the headline always dropped: the same grid and order, less the rules that keep it
    assert page_rules(headlines=(True,)) == [r for r in resili if r.drop_headline]
    assert page_rules(headlines=(False,)) == [r for r in resili if not r.drop_headline]
    with pytest.raises(UserError, match="headline"):
        page_rules(headlines=())


def test_a_page_rule_in_words_names_every_part_it_sets() -> None:
    from afm.filters.extraction.block_train import describe_rule

    assert describe_rule(PageRule()) == "none"
    rule = PageRule(0.3, 10, 20, True, 50, "resiliparse")
    assert describe_rule(rule) == ("fill >= 0.3, lead < 10 words, fallback to resiliparse < 20 words, "
                                   "headline dropped, article comments dropped past 50 words")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"variants": ("three",)}, "model variants three"),
    ({"variants": ()}, "model variants"),
    ({"thresholds": (0.5, 1.0)}, "keep thresholds"),
    ({"thresholds": ()}, "keep thresholds"),
    ({"rules": ()}, "at least one page rule"),
    ({"max_fallback_share": 1.5}, "max fallback share 1.5"),
])
def test_a_choice_refuses_what_it_cannot_search_in_one_line(kwargs, message) -> None:
    """The choice's settings are checked when made, before any fit or score."""
    from afm.filters.extraction.block_train import Choice, page_rules

    assert Choice().rules == tuple(page_rules()) and Choice().variants == ("one", "two")
    with pytest.raises(UserError, match=message):
        Choice(**kwargs)


def test_page_rows_score_the_fallback_text_even_after_the_same_kept_blocks() -> None:
    from afm.filters.extraction.block_train import (
        Choice,
        PageRecord,
        block_labels,
        check_fallback_texts,
        choose,
        page_rows,
    )
    from afm.filters.extraction.gold import counts

    table = page_blocks("<html><body><p>Only four words here.</p></body></html>")
    gold = GoldPage("s", "1", None, b"", "the gold text of this page is here", [], [])
    label, tokens = block_labels(table, gold)
    rec = PageRecord("s", "1", table, features(table), label, tokens, gold,
                     {"trafilatura": "the gold text of this page is here", "resiliparse": "page is here"}, {})
    probs = {0: np.array([0.9])}
    memo: dict = {}
    plain = page_rows([rec], probs, 0.5, PageRule(), memo)[0]
    assert plain == counts(gold, "Only four words here.")
    sent = page_rows([rec], probs, 0.5, PageRule(fallback_words=5), memo)[0]
    assert sent == counts(gold, "the gold text of this page is here") != plain
    # the rule's own extractor's text in the record's baselines, even after the same page in the memo
    other = page_rows([rec], probs, 0.5, PageRule(fallback_words=5, fallback_to="resiliparse"), memo)[0]
    assert other == counts(gold, "page is here")
    rec.texts = {"trafilatura": "the gold text of this page is here"}  # a cache from before Resiliparse
    with pytest.raises(UserError, match="no resiliparse text"):
        page_rows([rec], probs, 0.5, PageRule(fallback_words=5, fallback_to="resiliparse"))
    # the choice says so before any fit (no Fits given: it never gets that far)
    with pytest.raises(UserError, match="no resiliparse text"):
        choose([rec], [0], None, Choice(rules=(PageRule(), PageRule(fallback_words=5, fallback_to="resiliparse"))))
    choose_rules_without_it = Choice(rules=(PageRule(), PageRule(fallback_words=5)))
    check_fallback_texts([rec], [0], choose_rules_without_it.rules)  # trafilatura's text is there


def test_page_rows_name_the_pages_they_hand_on_as_fallback_share_counts_them() -> None:
    """The choice takes the fallback's share from the scoring pass (``sent``) instead of
    applying the rule a second time: the same pages as :func:`fallback_share`."""
    from afm.filters.extraction.block_train import (
        PageRecord,
        block_labels,
        fallback_share,
        page_rows,
    )

    records = []
    for i, body in enumerate(("<p>Only four words here.</p>",
                              "<p>" + " ".join(f"word{k}" for k in range(40)) + ".</p>")):
        table = page_blocks(f"<html><body>{body}</body></html>")
        gold = GoldPage("s", str(i), None, b"", "word1 word2 word3 word4 word5", [], [])
        label, tokens = block_labels(table, gold)
        records.append(PageRecord("s", str(i), table, features(table), label, tokens, gold,
                                  {"trafilatura": "word1 word2", "resiliparse": ""}, {}))
    probs = {0: np.array([0.9]), 1: np.array([0.9])}
    for rule in (PageRule(), PageRule(fallback_words=5), PageRule(fallback_words=50)):
        sent: set[int] = set()
        page_rows(records, probs, 0.5, rule, sent=sent)
        assert len(sent) / len(probs) == fallback_share(records, probs, 0.5, rule)
    sent = set()
    page_rows(records, probs, 0.5, PageRule(fallback_words=5), sent=sent)
    assert sent == {0}


def test_title_overlap_is_each_short_blocks_share_of_title_words() -> None:
    """One pass over the short blocks gives what each block's own words give, whatever the
    text holds (a NUL, the separator of that pass, sends the page block by block)."""
    from afm.filters.extraction.block_features import title_overlap

    def by_block(texts: list[str], words: np.ndarray, title: str) -> np.ndarray:
        out = np.zeros(len(texts))
        title_words = set(title.lower().split())
        for i, text in enumerate(texts):
            mine = text.lower().split()
            if title_words and 0 < words[i] <= 30 and mine:
                out[i] = sum(w in title_words for w in mine) / len(mine)
        return out

    long = " ".join(["storm"] * 31)
    cases = [
        (["Storm Hits Coast", "the storm hits", long, "", "\x1c\x1d", "ΟΔΟΣ Σ", "x"], "Storm hits the coast ΟΔΟΣ"),
        (["a \x00 b", "storm \x00", "\x00"], "Storm \x00 b"),
        (["no", "title"], "   "),
        (["only long"], "Only"),
    ]
    for texts, title in cases:
        words = np.array([max(len(t.split()), 1 if t else 0) if t != long else 31 for t in texts], float)
        assert np.array_equal(title_overlap(texts, words, title), by_block(texts, words, title)), texts
    got = title_overlap(["Storm Hits Coast", "the storm hits", "x"], np.array([3.0, 3.0, 1.0]), "storm hits")
    assert got.tolist() == [2 / 3, 2 / 3, 0.0]


def _cascade_stand_in(html: str, url: str | None) -> str:
    """The cascade's place in a cache test (its own tests are elsewhere): the page's text."""
    return "cascade: " + html[:20]


def test_a_cache_from_before_a_fallback_text_gets_only_that_text(tmp_path) -> None:
    """``build_cache`` keeps a baselines file that covers its pages and adds the texts it
    lacks (Resiliparse's, for a cache made before rules could name it) without re-running
    the extractors it has; the records then carry every text a rule may score."""
    import gzip
    import json
    import pickle
    from functools import partial

    from afm.filters.extraction.block_train import (
        RECORD_TEXTS,
        _baseline_of,
        build_cache,
        load_records,
    )

    truth = "For the first time in a decade, a sleeper service will link Zurich with the ski towns"
    pages = [GoldPage("s", str(i), None, ARTICLE.encode(), truth, [], []) for i in range(2)]
    assert build_cache(pages, tmp_path, "s", _cascade_stand_in) == 2
    path = tmp_path / "baselines-s.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    for row in rows:  # as a cache made before Resiliparse was a fallback, trafilatura's marked
        del row["texts"]["resiliparse"], row["cpu"]["resiliparse"]
        row["texts"]["trafilatura"] = "kept from the old cache"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    # one process: a worker pool forked from a test process that holds JAX's threads may hang;
    # the pool's step must pickle, which is what the pool adds
    pickle.loads(pickle.dumps(partial(_baseline_of, cascade=_cascade_stand_in)))
    build_cache(pages, tmp_path, "s", _cascade_stand_in)
    assert not list(tmp_path.glob("*.part"))
    records = load_records(tmp_path)
    assert [set(r.texts) for r in records] == [set(RECORD_TEXTS)] * 2
    assert {r.texts["trafilatura"] for r in records} == {"kept from the old cache"}
    assert all("first time in a decade" in r.texts["resiliparse"] for r in records)
