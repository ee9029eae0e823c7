"""Junk of each kind made from real text: every kind made, from the text's own words (its
topic), seeded, and real boilerplate lines that hold main text left out."""

from __future__ import annotations

import random

import pytest

from afm.filters.quality.junk import (
    KINDS,
    MAKERS,
    Material,
    boilerplate_lines,
    make_junk,
    materials_for,
)
from afm.filters.quality.rules import QualityHeuristicsFilter
from afm.filters.quality.texts import KindText
from afm.filters.quality.topics import topic_of
from afm.schema import make_document

ARTICLE = (
    "The city council voted on Tuesday to approve the budget for the new library, which will open next "
    "spring in the old railway station. Construction begins in January and will take six months, the mayor "
    "said. The library will stay open late on weekday evenings and on Sunday afternoons. A room will be set "
    "aside for children, with reading workshops every Wednesday. Residents will also be able to borrow tools "
    "and games, as in several nearby towns where the idea has been a great success for two years. The mayor "
    "hopes to win back readers who stopped visiting the old library, which was too small and badly heated. "
    "Opposition councillors voted against the plan, saying the election promises on taxes come first.")
BOILERPLATE = "\n".join([
    "Home", "News", "Politics", "Sport", "Weather", "Sign in", "Subscribe for one pound a week",
    "Copyright 2026 The Riverside Gazette. All rights reserved.", "Privacy policy | Terms of use | Cookies",
    "We use cookies to improve your experience. By continuing you agree to our cookie policy.",
    "Most read", "Council approves new library budget", "Police appeal after bridge crash",
    # a paragraph of the article itself, slightly different from the gold: content, not chrome
    "The city council voted on Tuesday to approve the budget for the new library, which will open next spring."])


def _materials() -> list[Material]:
    texts = [KindText(ARTICLE, "gazette", "article", "gazette.example", f"g/{i}", topic=topic_of(ARTICLE))
             for i in range(3)]
    return materials_for(texts, {t.id: BOILERPLATE for t in texts})


def test_boilerplate_lines_leave_out_the_main_text():
    lines = boilerplate_lines(BOILERPLATE, ARTICLE)
    assert "Home" in lines and "Most read" in lines
    assert not any(line.startswith("The city council voted") for line in lines)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_made_from_the_text_and_its_page(kind):
    m = _materials()[0]
    text = MAKERS[kind](m, random.Random(0))
    assert len(text.split()) >= 30, text
    words = {w.lower().strip(".,!?") for w in ARTICLE.split()}
    page = {w.lower().strip(".,!?|") for w in BOILERPLATE.split()}
    own = {w.lower().strip(".,!?:|…") for w in text.split()}
    assert own & (words | page), "junk must be built from the text or its page"


def test_make_junk_kinds_in_turn_and_seeded():
    mats = _materials() * 8  # 24 materials, 11 kinds in turn
    junk = make_junk(mats, seed=3)
    assert [j.kind for j in junk[:len(KINDS)]] == list(KINDS)
    assert all(j.topic == "politics" and j.source == "gazette" and j.unit == "gazette.example" for j in junk)
    assert [j.text for j in make_junk(mats, seed=3)] == [j.text for j in junk]
    assert [j.text for j in make_junk(mats, seed=4)] != [j.text for j in junk]
    per = make_junk(mats, ["word_salad", "templated"], per_kind=5, seed=1)
    assert [j.kind for j in per] == ["word_salad"] * 5 + ["templated"] * 5
    with pytest.raises(ValueError, match="unknown junk kinds"):
        make_junk(mats, ["spam"])


def test_the_rules_reject_the_structural_kinds():
    """Navigation, listings, templated pages and loops are what the published rules were
    made for: the defaults drop them (the fluent kinds are the quality model's work)."""
    rules = QualityHeuristicsFilter()
    mats = _materials() * 4
    for kind in ("navigation", "listing", "templated", "repetition"):
        junk = make_junk(mats, [kind], per_kind=6, seed=2)
        assert all(not rules(make_document(j.text)).keep for j in junk), kind
