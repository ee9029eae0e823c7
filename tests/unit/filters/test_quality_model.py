"""Model-based quality: shipped classifier, top-fraction cut, LLM-guided labelling loop."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import pytest

from afm.filters.base import apply_filter
from afm.filters.quality.model import (
    DEFAULT_MODEL,
    CallableScorer,
    DocumentScorer,
    NGramLMScorer,
    QualityClassifierFilter,
    QualityModelConfig,
    QualityScoreCut,
    label_with_scorer,
    llm_guided_selection,
    reservoir_sample,
    score_threshold_for_top_fraction,
)
from afm.schema import make_document

pytest.importorskip("fasttext")

DATA = Path(DEFAULT_MODEL).parent
HANDWRITTEN = DATA / "handwritten"
PROSE = ("Glaciers carve deep valleys as they move slowly downhill. When the ice melts, the valleys fill "
         "with water and become long, narrow lakes that are often very deep. Many of the lakes in the Alps "
         "and in Scandinavia were formed this way at the end of the last ice age. Their water is cold and "
         "clear, because little soil washes into them from the steep rock walls around them, and fish that "
         "need cold water, such as trout and char, live in them. Scientists drill into the mud at the bottom "
         "of such lakes to read the history of the climate, layer by layer, over thousands of years.")
SPAM = " ".join(["BUY NOW!!! cheap replica watches best price click here free shipping cheap watches deal now."
                 " Best watches online, discount watches, replica watches sale."] * 4)


def _jsonl(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text().splitlines() if line.strip()]


def test_top_fraction_threshold_by_hand():
    scores = [0.1, 0.9, 0.5, 0.7]
    assert score_threshold_for_top_fraction(scores, 0.5) == 0.7  # keeps 0.9 and 0.7
    assert score_threshold_for_top_fraction(scores, 1.0) == 0.1
    assert score_threshold_for_top_fraction(scores, 0.01) == 0.9  # at least one document
    assert score_threshold_for_top_fraction(scores, 0.6) == 0.5  # ceil(2.4) = 3 kept
    with pytest.raises(ValueError):
        score_threshold_for_top_fraction(scores, 0)
    with pytest.raises(ValueError, match="empty"):
        score_threshold_for_top_fraction([], 0.5)


def test_shipped_default_model_is_small_and_separates():
    assert DEFAULT_MODEL.is_file() and DEFAULT_MODEL.stat().st_size < 2 * 1024 * 1024
    meta = json.loads((DATA / "quality_default.ftz.json").read_text())
    assert meta["heldout"]["test"] and meta["label_pos"] == "hq"
    flt = QualityClassifierFilter()
    assert flt.threshold == pytest.approx(meta["threshold"])  # the sidecar's, chosen on held-out units
    prose, spam = flt.score_texts([PROSE, SPAM])
    assert prose > spam
    kept, rej = apply_filter(QualityClassifierFilter(QualityModelConfig(threshold=float(spam) + 1e-3)),
                             make_document(PROSE))
    assert rej is None and kept["signals"]["quality_model.quality_score"] == pytest.approx(kept["quality_score"])
    kept, rej = apply_filter(flt, make_document(SPAM))
    assert kept is None and rej["reason"] == "quality_model_score"
    # rejects carry the score and the threshold that decided them
    assert rej["quality_score"] < flt.threshold
    assert json.loads(rej["details"]) == {"model": "builtin", "score": pytest.approx(spam, abs=1e-4),
                                          "threshold": flt.threshold}


def test_no_model_passes_and_filter_pickles():
    d = QualityClassifierFilter(QualityModelConfig(model_path=None))(make_document(SPAM))
    assert d.keep and not d.signals
    flt = QualityClassifierFilter()
    flt(make_document(PROSE))  # loads the model
    clone = pickle.loads(pickle.dumps(flt))
    assert clone(make_document(PROSE)).signals["quality_score"] == pytest.approx(
        flt(make_document(PROSE)).signals["quality_score"])
    with pytest.raises(FileNotFoundError):
        QualityClassifierFilter(QualityModelConfig(model_path="/nonexistent.ftz"))


def test_top_fraction_two_passes():
    flt = QualityClassifierFilter(QualityModelConfig(top_fraction=0.5))
    docs = [make_document(t) for t in (PROSE, SPAM, PROSE + " Lakes freeze in winter.", SPAM + " now")]
    scored = [apply_filter(flt, d)[0] for d in docs]
    assert all(d is not None for d in scored)  # scoring pass keeps everything
    cut = score_threshold_for_top_fraction([d["quality_score"] for d in scored], 0.5)
    results = [apply_filter(QualityScoreCut(cut), d) for d in scored]
    kept = [k for k, r in results if r is None]
    assert len(kept) == 2 and all("Glaciers" in k["text"] for k in kept)
    assert {r["reason"] for k, r in results if r} == {"quality_model_top_fraction"}
    assert QualityScoreCut(0.5)(make_document("unscored")).reason == "quality_model_unscored"


def test_ngram_lm_scorer_prefers_text_like_its_reference():
    pos = _jsonl(HANDWRITTEN / "train_positives.jsonl")
    lm = NGramLMScorer().fit(pos[:40])
    assert isinstance(lm, DocumentScorer)
    held_out_prose, spam = lm.score(pos[40:50]), lm.score(_jsonl(HANDWRITTEN / "train_negatives.jsonl")[:10])
    assert sum(held_out_prose) / 10 > sum(spam) / 10
    assert lm.score([""]) == [-math.inf]


def test_label_with_scorer_thresholds_and_fractions():
    texts = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff"]
    by_length = CallableScorer(lambda ts: [len(t) for t in ts])
    lab = label_with_scorer(texts, by_length, pos_fraction=1 / 3, neg_fraction=1 / 3, batch_size=4)
    assert lab.scores == [1, 2, 3, 4, 5, 6]
    assert (lab.positives, lab.negatives, lab.dropped) == (["eeeee", "ffffff"], ["a", "bb"], 2)
    lab = label_with_scorer(texts, by_length, pos_threshold=4, neg_threshold=1)
    assert (lab.positives, lab.negatives) == (["dddd", "eeeee", "ffffff"], ["a"])
    with pytest.raises(ValueError, match="does not separate"):
        label_with_scorer(texts, CallableScorer(lambda ts: [1.0] * len(ts)))
    with pytest.raises(ValueError, match="returned 1 scores"):
        label_with_scorer(texts, CallableScorer(lambda ts: [1.0]))


def test_reservoir_sample():
    assert reservoir_sample(["a", " ", "b"], 5) == ["a", "b"]
    s = reservoir_sample((str(i) for i in range(1000)), 50, seed=3)
    assert len(s) == 50 and len(set(s)) == 50 and s == reservoir_sample((str(i) for i in range(1000)), 50, seed=3)


def test_llm_guided_selection_trains_a_fast_classifier_on_scorer_labels(tmp_path):
    pos = _jsonl(HANDWRITTEN / "train_positives.jsonl")
    neg = _jsonl(HANDWRITTEN / "train_negatives.jsonl")
    scorer = NGramLMScorer().fit(pos[:30])  # the "expensive" scorer, fitted on reference text
    corpus = pos[30:] + neg[:80]  # unlabelled corpus: the scorer decides the labels
    labels = tmp_path / "labels.jsonl"
    report = llm_guided_selection(corpus, scorer, tmp_path / "q.bin", sample_size=len(corpus),
                                  pos_fraction=0.3, neg_fraction=0.4, labels_out=labels,
                                  epoch=20, lr=0.5, verbose=False)
    assert report["labelled_positive"] + report["labelled_negative"] + report["unlabelled"] == len(corpus)
    assert len(labels.read_text().splitlines()) == len(corpus)
    # The fast classifier reproduces the scorer's preference on texts it never saw.
    from afm.filters.classifier import FastTextClassifier

    fast = FastTextClassifier(tmp_path / "q.bin")
    assert fast.score(pos[:30]).mean() > fast.score(neg[80:]).mean()
