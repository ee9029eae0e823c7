"""Safety: URL block-lists, word-list ratios, the shipped classifier, and restraint."""

from __future__ import annotations

import json
import pickle

import pytest

from afm.filters.classifier import metadata_path
from afm.filters.safety import (
    DEFAULT_MODEL,
    SafetyConfig,
    SafetyFilter,
    TermMatcher,
    make_safety_training_data,
)
from afm.schema import make_document

NEWS = ("The city council approved the new library budget on Tuesday. Construction will start "
        "in the spring, and the building should open to readers within two years. The mayor said "
        "the project had been delayed by rising costs but was now fully funded.")
ADULT_SPAM = ("Watch free porn videos of horny milfs and hot camgirls. Hardcore sex, blowjob and "
              "threesome xxx movies updated daily. Horny sluts waiting for live sex chat now, "
              "free porno, nude pics and sex cams. ") * 3
HEALTH = ("The clinic offers free, confidential testing for sexually transmitted infections. "
          "Sex education classes cover consent and contraception, and doctors recommend regular "
          "breast cancer screening after age 50.")


@pytest.fixture(scope="module")
def flt() -> SafetyFilter:
    return SafetyFilter()


def doc(text: str, url: str | None = "https://news.example.org/a", language: str | None = None):
    d = make_document(text, url=url)
    d["language"] = language
    return d


def test_ordinary_and_hard_negative_text_kept_with_low_score(flt):
    for text in (NEWS, HEALTH):
        d = flt(doc(text))
        assert d.keep, d.reason
        assert 0.0 <= d.document["safety_score"] < 0.5
    assert flt.name == "safety"


def test_adult_spam_dropped_by_word_ratio(flt):
    d = flt(doc(ADULT_SPAM))
    assert not d.keep and d.reason == "adult_terms"
    assert d.document["safety_score"] > 0.9
    assert d.signals["adult_hits"] >= 5 and "porn" in d.details["terms"]


def test_single_swear_word_or_quoted_slur_is_kept(flt):
    quote = NEWS + ' A protester shouted "fuck the budget" before being escorted out.'
    assert flt(doc(quote)).keep
    report = NEWS + " The court heard that the defendant had called his neighbour a faggot."
    d = flt(doc(report))
    assert d.keep and d.signals["hate_hits"] == 1


def test_hate_and_spam_dropped_at_high_ratio(flt):
    hate = "Get rid of the kikes and the spics and the niggers, every one of those ragheads. " * 2
    assert flt(doc(hate)).reason == "hate_terms"
    spam = "Buy viagra and cialis online, best online casino with free spins and payday loans. " * 3
    assert flt(doc(spam)).reason == "spam_terms"


def test_heavy_profanity_dropped_only_when_dense(flt):
    rant = "fuck this shit, fucking bullshit, what an asshole, fuck fuck shit. " * 4
    assert flt(doc(rant)).reason == "profanity_terms"
    assert flt(doc(NEWS * 3 + " shit.")).keep


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://www.pornhub.com/view?x=1", "blocked_url"),
        ("https://de.xhamster.com/videos/1", "blocked_url"),
        ("http://anything.xxx/page", "blocked_url"),
        ("https://free-porn-tube.net/", "adult_url"),
        ("https://hentaihaven.example/", "adult_url"),
    ],
)
def test_url_block_list(flt, url, reason):
    d = flt(doc(NEWS, url=url))
    assert not d.keep and d.reason == reason and d.signals["url_blocked"] == 1.0


@pytest.mark.parametrize("url", ["https://essex.ac.uk/news", "https://www.scunthorpe.gov.uk/",
                                 "https://www.middlesex.gov/", None, "not a url", ""])
def test_url_look_alikes_not_blocked(flt, url):
    assert flt(doc(NEWS, url=url)).keep


def test_user_block_list_file(tmp_path):
    lst = tmp_path / "blocked.txt"
    lst.write_text("# my list\nbad-domain.com\nwww.other.net\n")
    f = SafetyFilter(SafetyConfig(blocklist_files=[str(lst)], use_model=False))
    assert f(doc(NEWS, url="https://sub.bad-domain.com/x")).reason == "blocked_url"
    assert f(doc(NEWS, url="https://other.net/")).reason == "blocked_url"
    assert f(doc(NEWS, url="https://good-domain.com/")).keep
    with pytest.raises(FileNotFoundError):
        SafetyFilter(SafetyConfig(blocklist_files=[str(tmp_path / "missing.txt")]))


def test_per_language_lists_apply_to_that_language(flt):
    german = ("Geile Schlampen ficken im Porno, Titten und Muschi, kostenlose Sexfilme, "
              "Hure und Schwanz. ") * 3
    assert flt(doc(german, language="de")).reason == "adult_terms"
    french_text = "Le match de football a commencé à huit heures devant un public nombreux. " * 3
    assert flt(doc(french_text, language="fr")).keep


def test_model_alone_needs_corroborating_term():
    f = SafetyFilter(SafetyConfig(adult_min_hits=10_000))  # word lists cannot drop
    d = f(doc(ADULT_SPAM))
    assert d.reason == "unsafe_model" and d.signals["model_score"] >= 0.98
    no_model = SafetyFilter(SafetyConfig(use_model=False))
    d = no_model(doc(NEWS))
    assert d.keep and "model_score" not in d.signals and d.document["safety_score"] == 0.0


def test_empty_text_and_pickle(flt):
    d = flt(doc(""))
    assert d.keep and d.signals["adult_ratio"] == 0.0
    clone = pickle.loads(pickle.dumps(flt))
    assert clone(doc(ADULT_SPAM)).reason == "adult_terms"


def test_term_matcher_phrases():
    m = TermMatcher(["porn", "sex video", "live sex"])
    hits, found = m.count("watch a live sex video about porn".split())
    assert hits == 3 and found == {"porn", "sex video", "live sex"}


def test_shipped_model_small_with_recorded_metrics():
    assert DEFAULT_MODEL.stat().st_size < 2_000_000
    meta = json.loads(metadata_path(DEFAULT_MODEL).read_text())
    assert meta["label_pos"] == "unsafe" and meta["punctuation"] is False
    assert meta["precision"] >= 0.9 and meta["recall"] >= 0.9


def test_training_data_generator_is_deterministic():
    a = make_safety_training_data(20, seed=3, vocabulary=["alpha", "beta", "gamma"])
    b = make_safety_training_data(20, seed=3, vocabulary=["alpha", "beta", "gamma"])
    assert a == b and len(a[0]) == len(a[1]) == 20
    assert all(t.strip() for t in a[0] + a[1])
