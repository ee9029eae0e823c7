"""The chain rule (filters/quality/context_gain.py, context_gain_train.py): the shipped word
model gains from context on real writing and not on a word chain made from it, the rule
says what decided, its numbers are the stored ones (the numpy pass is checked against
afm.model in tests/slow/filters/test_context_gain_parity.py), and the training helpers
work on small data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from afm.filters.quality.context_gain import (
    DEFAULT_MODEL,
    NUM,
    PUNCT,
    SPECIALS,
    UNK,
    ContextGainModel,
    build_vocabulary,
    encode,
    load_context_gain_model,
    words,
)
from afm.filters.quality.context_gain_train import (
    choose_threshold,
    development_report,
    gains,
    token_rows,
)
from afm.filters.quality.junk import make_junk, materials_for
from afm.filters.quality.rules import QualityConfig, QualityHeuristicsFilter
from afm.filters.quality.texts import KindText

# A council report written for this test, long enough for two windows of 64 words.
ARTICLE = (
    "The council met on Tuesday evening to discuss the budget for the city's public schools, which has "
    "grown by four percent since last year. Members said the plan would add forty teachers next autumn, "
    "paid for by a local tax that voters approved in the spring after a long campaign. Parents who spoke "
    "at the meeting asked for smaller classes in the first years of primary school, where they said the "
    "need is greatest. The final vote is expected next month, once the finance committee has reviewed "
    "the figures and heard from the teachers' union. Several members said they would wait for the "
    "committee's figures before deciding how to vote, and one asked whether the new teachers could be "
    "hired in time for the start of the school year. The head of the finance committee said that the "
    "committee would meet twice before the vote, and that it would publish its report a week before the "
    "council meets again, so that parents and teachers could read it and send their questions."
)

STORED_GAIN, STORED_SCORED = 0.2234, 103  # the shipped model's gain on ARTICLE, and the words it scored


@pytest.fixture(scope="module")
def shipped() -> ContextGainModel:
    if not DEFAULT_MODEL.is_file():
        pytest.fail(f"the shipped context-gain model is missing: {DEFAULT_MODEL}")
    return load_context_gain_model(str(DEFAULT_MODEL))


def test_words_and_ids() -> None:
    assert words("Don't stop: 42 cats!") == ["don't", "stop", ":", "42", "cats", "!"]
    vocabulary = build_vocabulary(["the cat sat", "the cat ran"], size=7)
    assert vocabulary[: len(SPECIALS)] == list(SPECIALS) and vocabulary[5:] == ["the", "cat"]
    index = {w: i for i, w in enumerate(vocabulary)}
    assert encode("The dog, 7 cats", index).tolist() == [5, UNK, PUNCT, NUM, UNK]


def test_shipped_model_gains_on_real_articles_and_not_on_chains_of_them(shipped: ContextGainModel,
                                                                        shared_eval: Path) -> None:
    """Real news articles (ScrapingHub's first English bodies of 300 words or more) against
    word chains made from them by the junk generator: the articles gain from context, the
    chains do not, and the shipped threshold lies between them."""
    truth = json.loads((shared_eval / "extraction" / "ground-truth.json").read_text(encoding="utf-8"))
    bodies = [b for k in sorted(truth) if len((b := truth[k].get("articleBody") or "").split()) >= 300]
    articles = [b for b in bodies if sum(w in {"the", "and", "of"} for w in b.lower().split()) > 15][:12]
    texts = [KindText(b, "scrapinghub", "article", f"site{i}", f"a{i}") for i, b in enumerate(articles)]
    chains = [j.text for j in make_junk(materials_for(texts), ["machine_made"], per_kind=20, seed=1)]
    threshold = QualityConfig().min_context_gain  # the sidecar's, used with context_gain_model=builtin
    article_gains = [shipped.gain(a)[0] for a in articles]
    chain_gains = [g for c in chains if (g := shipped.gain(c))[1]]
    assert np.median(article_gains) > threshold > np.median([g for g, _ in chain_gains])
    assert np.mean([g > threshold for g in article_gains]) >= 0.75
    assert np.mean([g < threshold for g, _ in chain_gains]) >= 0.75


def test_stored_values(shipped: ContextGainModel) -> None:
    """The shipped model's numbers for a fixed text (the forward pass itself is checked
    against afm.model in the slow tier)."""
    gain, scored = shipped.gain(ARTICLE)
    assert scored == STORED_SCORED and gain == pytest.approx(STORED_GAIN, abs=1e-4)


def test_short_text_is_not_judged(shipped: ContextGainModel) -> None:
    assert shipped.gain("Too short to judge.") == (0.0, 0)
    rule = QualityHeuristicsFilter(QualityConfig(context_gain_model="builtin", min_context_gain=5.0))
    checks, _ = rule.signals("A short note of a few words, far below one window.")
    assert next(str(bound) for name, _, bound in checks if name == "afm_context_gain") == "not judged"


def test_the_rule_says_what_decided(shipped: ContextGainModel) -> None:
    rule = QualityHeuristicsFilter(QualityConfig(context_gain_model="builtin", min_context_gain=5.0))
    decision = rule({"id": "x", "text": ARTICLE, "language": "en"})
    assert not decision.keep and decision.reason == "afm_context_gain"
    assert decision.details["threshold"] == ">= 5" and decision.signals["afm_context_gain"] == pytest.approx(
        shipped.gain(ARTICLE)[0])


def test_the_rule_is_opt_in_at_the_sidecar_threshold() -> None:
    """Off by default (it cost held-out news texts far more than its development 2%:
    docs/quality.md); naming the model turns it on at the threshold its sidecar chose."""
    side = json.loads(DEFAULT_MODEL.with_name(DEFAULT_MODEL.name + ".json").read_text())
    cfg = QualityConfig()
    assert cfg.context_gain_model is None and cfg.min_context_gain == side["threshold"]
    checks, _ = QualityHeuristicsFilter(cfg).signals(ARTICLE)
    assert "afm_context_gain" not in [name for name, _, _ in checks]


def test_training_helpers() -> None:
    assert choose_threshold(list(np.arange(100) / 100), keep=0.75) == pytest.approx(0.247)  # rounded down
    rows = token_rows([KindText("the cat sat", "s", "article", "u", "id1"), KindText("  ", "s", "article", "u", "id2")],
                      [*SPECIALS, "the", "cat"])
    assert rows == [{"id": "id1", "source": "web", "tokens": [5, 6, UNK]}]
    assert np.isfinite(choose_threshold([0.3]))


def test_development_report_rejects_below_the_threshold() -> None:
    """The threshold keeps the target share of the good text and the rule fails the texts
    *below* it (the report's failing share is the gains' share under the threshold), and
    the junk made from the texts is reported with the rule's rejections added."""
    sentences = ARTICLE.split(". ")
    texts = [KindText(". ".join(sentences[i:] + sentences[:i]), "wcxb", "article", f"site{i}", f"t{i}",
                      topic="politics") for i in range(6)]  # the article's sentences rotated: six gains
    report = development_report(DEFAULT_MODEL, texts, texts, {}, lambda items: [True] * len(items),
                                per_kind=2, seed=1, keep=5 / 6)
    values = np.array(gains(DEFAULT_MODEL, [t.text for t in texts]))
    assert report["threshold"] == choose_threshold(list(values), keep=5 / 6)
    # one text of six below the threshold (five above): a rule read the wrong way round fails five
    assert report["good_failing_by_kind"]["wcxb/article"]["failing"] == round(1 / 6, 4)
    assert np.sum(values < report["threshold"]) == 1
    assert sorted(report["good_gain_quantiles"]) == [0.01, 0.02, 0.05, 0.5]
    assert report["good_gain_quantiles"][0.5] >= report["threshold"]
    salad = report["junk_rejected_by_kind"]["word_salad"]  # no context to gain from: below the threshold
    assert salad["n"] == 2 and salad["rejected_by_others"] == 0.0 and salad["rejected"] == 1.0
