"""The word n-gram model: modified Kneser-Ney estimation, ARPA, the backoff scorer, and the
quality rule that reads it (``afm_word_perplexity``)."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest

from afm.filters.quality.ngram_lm import (
    BOS,
    EOS,
    UNK,
    NGramLM,
    _discounts,
    estimate,
    read_arpa,
    sentences,
    tokens,
    write_arpa,
)
from afm.filters.quality.rules import QualityConfig, QualityHeuristicsFilter

WORDS = "the cat dog sat on a mat ran to house big small".split()


def _corpus(seed: int = 0, n: int = 200) -> list[list[str]]:
    rng = random.Random(seed)
    return [[rng.choice(WORDS) for _ in range(rng.randint(1, 8))] for _ in range(n)]


@pytest.mark.parametrize(("order", "prune"), [(1, 0), (2, 0), (3, 0), (3, 1), (4, 1)])
def test_every_context_is_a_distribution(tmp_path, order, prune):
    """p(. | h) over the vocabulary, </s> and <unk> sums to one for seen and unseen
    contexts, through the ARPA file (pruning renormalises the backoffs)."""
    lm = NGramLM.load(write_arpa(estimate(_corpus(), order, prune_count=prune), tmp_path / "m.arpa"))
    outcomes = [*WORDS, EOS, UNK]
    contexts = [(BOS,), (BOS, "the"), ("zzz", "the"), *itertools.product(WORDS[:4], repeat=max(order - 1, 1))]
    for ctx in contexts:
        ctx = ctx[-(order - 1):] if order > 1 else ()
        assert sum(10 ** lm._word(ctx, w) for w in outcomes) == pytest.approx(1.0, abs=1e-5), ctx


def test_discounts_are_chen_and_goodmans():
    """D1, D2, D3+ from the count-of-counts n1..n4 (counts above 4 play no part):
    Y = n1 / (n1 + 2 n2), D1 = 1 - 2Y n2/n1, D2 = 2 - 3Y n3/n2, D3+ = 3 - 4Y n4/n3."""
    counts: Counter[tuple[str, ...]] = Counter()
    for count, how_many in ((1, 10), (2, 5), (3, 3), (4, 2), (9, 7)):
        counts.update({("w", f"{count}-{i}"): count for i in range(how_many)})
    assert _discounts(counts) == pytest.approx((0.5, 1.1, 5 / 3))


def test_pruning_drops_rare_top_order_ngrams_only():
    full = estimate(_corpus(), 3, prune_count=0)
    pruned = estimate(_corpus(), 3, prune_count=1)
    assert [len(t) for t in full.logprob[:2]] == [len(t) for t in pruned.logprob[:2]]
    assert 0 < len(pruned.logprob[2]) < len(full.logprob[2])


def test_arpa_round_trip(tmp_path):
    model = estimate(_corpus(), 3)
    for name in ("m.arpa", "m.arpa.gz"):
        back = read_arpa(write_arpa(model, tmp_path / name))
        assert back.order == 3
        for mine, read in zip(model.logprob, back.logprob):
            assert mine.keys() == read.keys()
            assert all(read[g] == pytest.approx(mine[g], abs=1e-6) for g in mine)
        for mine, read in zip(model.backoff[:2], back.backoff[:2]):
            assert all(read[g] == pytest.approx(mine[g], abs=1e-6) for g in mine)
    assert back.logprob[0][(BOS,)] == -99.0


def test_not_an_arpa_file(tmp_path):
    bad = tmp_path / "x.arpa"
    bad.write_text("hello\n")
    with pytest.raises(ValueError, match="not an ARPA"):
        read_arpa(bad)
    with pytest.raises(ValueError, match="no tokens"):
        estimate([[]], 3)


# KenLM 0.3.0's ``Model(ARPA).score(s, bos=True, eos=True)`` of these sentences under the
# model of _corpus() (order 3, singletons of the top order pruned), stored so `make test`
# checks the scorer against KenLM without building it (tests/slow/filters/ recomputes).
KENLM_EXPECTED = {
    "the cat sat on a mat": -7.817793846130371,
    "a big dog ran to the house": -9.167145729064941,
    "house house house": -4.5624542236328125,
    "the zebra sat": -5.41664981842041,
}


def test_scores_match_kenlm_stored_values(tmp_path):
    lm = NGramLM.load(write_arpa(estimate(_corpus(), 3, prune_count=1), tmp_path / "m.arpa"))
    for sentence, expected in KENLM_EXPECTED.items():
        assert lm.sentence_log10(sentence.split()) == pytest.approx(expected, abs=1e-4), sentence


def test_tokens_and_sentences():
    assert tokens("It's 2024, isn't it? Price: $3.50!") == ["it's", "0000", ",", "isn't", "it", "?", "price", ":",
                                                             "$", "0.00", "!"]
    assert sentences("First line.\n\n  \nSecond, line") == [["first", "line", "."], ["second", ",", "line"]]


def test_perplexity_is_lower_for_text_like_the_training_text(tmp_path):
    lm = NGramLM.load(write_arpa(estimate(_corpus(), 3), tmp_path / "m.arpa"))
    seen = " ".join(_corpus()[0])
    assert lm.perplexity(seen) < lm.perplexity("zebra quantum the of mat mat cat")
    assert lm.perplexity("") == math.inf


# --------------------------------------------------------------------------- the rule

GOOD = ("The committee met on Tuesday to discuss the new budget for the city's public schools.\n"
        "Members said that the plan would add teachers in the coming year.\n"
        "The money would come from a tax the council approved last spring.\n"
        "Parents who spoke at the meeting asked for smaller classes and longer library hours.\n"
        "A vote on the budget is expected next month, after a second public hearing.\n"
        "Until then, the schools will keep the schedule they had last year.\n")


def _rule(tmp_path, threshold: float | None) -> QualityHeuristicsFilter:
    path = write_arpa(estimate(sentences(GOOD) * 3, 3, prune_count=0), tmp_path / "lm.arpa")
    return QualityHeuristicsFilter(QualityConfig(word_lm=str(path), max_word_perplexity=threshold,
                                                 word_lm_min_tokens=20, word_order=False, chrome_model=None))


def test_rule_rejects_text_the_model_finds_unlikely_with_value_and_threshold(tmp_path):
    rule = _rule(tmp_path, 20.0)
    kept = rule({"text": GOOD, "language": "en"})
    assert kept.keep, kept
    assert kept.signals["afm_word_perplexity"] < 20
    words = GOOD.split()
    random.Random(3).shuffle(words)
    chain = "\n".join(" ".join(words[i:i + 12]) + "." for i in range(0, len(words), 12))
    out = rule({"text": chain, "language": "en"})
    assert not out.keep
    assert out.reason == "afm_word_perplexity"
    assert out.details["rule"] == "afm_word_perplexity"
    assert out.details["threshold"] == "<= 20"
    assert out.details["value"] > 20


def test_rule_applies_to_its_languages_and_long_texts_only(tmp_path):
    rule = _rule(tmp_path, 1.0)  # everything is above 1
    chain = "zebra quantum the of mat " * 10
    assert rule({"text": chain, "language": "de"}).keep or \
        rule({"text": chain, "language": "de"}).reason != "afm_word_perplexity"
    short = _rule(tmp_path, 1.0)
    short.cfg.word_lm_min_tokens = 1000
    assert "afm_word_perplexity" not in (short({"text": GOOD, "language": "en"}).details or {}).get(
        "failed_rules", [])


def test_no_model_no_signal_and_a_missing_file_is_one_clear_error(tmp_path):
    checks, _ = QualityHeuristicsFilter(QualityConfig(word_lm=None)).signals(GOOD * 3)
    assert "afm_word_perplexity" not in {name for name, _, _ in checks}
    with pytest.raises(FileNotFoundError, match="quality.word_lm"):
        QualityHeuristicsFilter(QualityConfig(word_lm=str(tmp_path / "none.arpa")))
