"""Quality models users bring, as files: a fastText ``.bin`` with DCLM's labels and a tiny
Hugging Face classifier directory, each through ``afm curate`` and ``afm quality filter``
with their scores in the rejects; the batched stage; errors before any work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from afm.app.commands.filters.quality import quality
from afm.app.commands.pipelines.curate import curate_command as curate
from afm.config import ConfigError
from afm.filters.base import Decision, apply_filter_batch
from afm.filters.classifier import preprocess_raw
from afm.filters.quality.model import QualityClassifierFilter, QualityModelConfig
from afm.filters.quality.scorers import ScorerError, hf_head
from afm.io import read_records
from afm.schema import make_document
from tests.unit.filters.quality_models import (
    CC,
    HQ,
    corpus,
    dclm_style_fasttext,
    reference_scores,
    tiny_hf_classifier,
)

pytest.importorskip("fasttext")


def _dataset(out: Path) -> tuple[list[dict], list[dict]]:
    kept = [r for f in sorted(out.glob("documents-*.parquet")) for r in read_records(f)]
    rejects = [r for f in sorted(out.glob("rejects-*.parquet")) for r in read_records(f)]
    return kept, rejects


@pytest.fixture(scope="module")
def dclm(tmp_path_factory) -> Path:
    return dclm_style_fasttext(tmp_path_factory.mktemp("dclm") / "dclm_hq_cc.bin")


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    return corpus(tmp_path / "docs.jsonl")


def _check_hq_kept(out: Path, signal: str = "quality_model.quality_score") -> None:
    kept, rejects = _dataset(out)
    assert len(kept) + len(rejects) == len(HQ) + len(CC)  # nothing lost
    assert {d["id"] for d in kept} == {f"hq{i}" for i in range(len(HQ))}
    assert {r["reason"] for r in rejects} == {"quality_model_score"}
    for r in rejects:  # the score and the evidence travel with every reject
        assert r["quality_score"] < 0.5 and r["signals"][signal] == pytest.approx(r["quality_score"])


def test_dclm_fasttext_file_through_quality_filter(dclm: Path, docs: Path, tmp_path: Path) -> None:
    out = tmp_path / "q"
    res = CliRunner().invoke(quality, ["filter", str(docs), "--output", str(out), "--no-heuristics",
                                       "--model", str(dclm), "--label-pos", "hq", "--batch-size", "4"])
    assert res.exit_code == 0, res.output
    _check_hq_kept(out)


def test_dclm_fasttext_file_through_curate(dclm: Path, docs: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "curate.yaml"
    cfg.write_text(json.dumps({"stages": ["quality_model"], "quality_model": {
        "params": {"model_path": str(dclm), "label_pos": "hq", "batch_size": 3}}}))
    out = tmp_path / "c"
    res = CliRunner().invoke(curate, ["-i", str(docs), "-o", str(out), "-c", str(cfg)])
    assert res.exit_code == 0, res.output
    _check_hq_kept(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["accounting"]["ok"]


def test_a_label_the_model_lacks_is_one_error_before_work(dclm: Path, docs: Path, tmp_path: Path) -> None:
    out = tmp_path / "bad"
    # No sidecar and no --label-pos: the default 'pos' is not one of the model's labels.
    res = CliRunner().invoke(quality, ["filter", str(docs), "--output", str(out), "--no-heuristics",
                                       "--model", str(dclm)])
    assert res.exit_code != 0 and "label_pos" in res.output and "'hq'" in res.output and "'cc'" in res.output
    assert "Traceback" not in res.output and not (out / "_SUCCESS").exists()
    with pytest.raises(ConfigError, match="batch_size"):
        QualityModelConfig(model_path=str(dclm), batch_size=0)
    with pytest.raises(ConfigError, match="device"):
        QualityModelConfig(device="gpu0")


def test_classifier_score_reads_a_foreign_model(dclm: Path, docs: Path) -> None:
    from afm.app.commands.filters.classifier import classifier

    res = CliRunner().invoke(classifier, ["score", "--model", str(dclm), "--label-pos", "hq",
                                          "--batch-size", "5", str(docs)])
    assert res.exit_code == 0, res.output
    scores = [float(line.split("\t")[0]) for line in res.output.splitlines() if "\t" in line]
    assert len(scores) == len(HQ) + len(CC)
    assert min(scores[: len(HQ)]) > max(scores[len(HQ):])  # every lesson above every shop page


def test_a_foreign_fasttext_model_sees_raw_text(dclm: Path) -> None:
    """No sidecar: the text is prepared as DCLM prepares it (lines joined), and the score
    is fastText's own probability of the positive label."""
    import fasttext

    flt = QualityClassifierFilter(QualityModelConfig(model_path=str(dclm), label_pos="hq"))
    text = HQ[0].replace(". ", ".\n", 1)
    labels, probs = fasttext.load_model(str(dclm)).predict(preprocess_raw(text), k=-1, threshold=0.0)
    expected = dict(zip(labels, probs))["__label__hq"]
    assert flt.score_texts([text])[0] == pytest.approx(expected, abs=1e-6)
    assert flt.scorer.clf.preprocess == "raw"


def test_batch_fallback_records_the_one_bad_document() -> None:
    class Picky:
        name = "picky"

        def decide_batch(self, docs):
            if any("boom" in d["text"] for d in docs):
                raise RuntimeError("model failed on this batch")
            return [Decision(keep="good" in d["text"], signals={"s": 1.0}) for d in docs]

        def __call__(self, doc):
            return self.decide_batch([doc])[0]

    docs = [make_document(t) for t in ("good one", "boom", "bad one", "good two")]
    results = apply_filter_batch(Picky(), docs)
    assert [k is not None for k, _ in results] == [True, False, False, True]
    assert results[1][1]["reason"] == "error:RuntimeError"  # only the bad one fails
    assert results[2][1]["reason"] == "dropped" and results[2][1]["signals"]["picky.s"] == 1.0


def test_hf_head_reading() -> None:
    assert hf_head({"num_labels": 1}, None) == ("regression", None)
    assert hf_head({"id2label": {"0": "low", "1": "high"}}, None) == ("probability", 1)
    assert hf_head({"id2label": {"0": "low", "1": "mid", "2": "high"}}, "high") == ("probability", 2)
    with pytest.raises(ScorerError, match="name the positive one"):
        hf_head({"id2label": {"0": "a", "1": "b", "2": "c"}}, None)
    with pytest.raises(ScorerError, match="not one of"):
        hf_head({"id2label": {"0": "a", "1": "b"}}, "z")


# ---------------------------------------------------------------- Hugging Face (hf extra)
# Without torch and transformers (the fast tier's install) these skip, saying why; the one
# that runs both commands end to end is in the slow tier (`make test-all` installs the extra).

HF_REASON = "a Hugging Face classifier needs torch and transformers (the hf extra; `make test-all` installs it)"


@pytest.fixture(scope="module")
def hf_regression(tmp_path_factory) -> Path:
    pytest.importorskip("torch", reason=HF_REASON)
    pytest.importorskip("transformers", reason=HF_REASON)
    return tiny_hf_classifier(tmp_path_factory.mktemp("hf") / "edu-regression", num_labels=1)


def test_hf_regression_scores_match_transformers_one_by_one(hf_regression: Path) -> None:
    texts = HQ + CC + ["", "x " * 600]  # an empty text and one cut at max_length
    flt = QualityClassifierFilter(QualityModelConfig(model_path=str(hf_regression), threshold=0.0,
                                                     batch_size=3, device="cpu"))
    assert flt.kind == "hf"
    got = flt.score_texts(texts)
    np.testing.assert_allclose(got, reference_scores(hf_regression, texts), atol=1e-4)


@pytest.mark.slow
def test_hf_classifier_through_quality_filter_and_curate(hf_regression: Path, docs: Path, tmp_path: Path) -> None:
    texts = HQ + CC
    scores = reference_scores(hf_regression, texts)
    cut = float(np.median(scores))
    out = tmp_path / "q"
    res = CliRunner().invoke(quality, ["filter", str(docs), "--output", str(out), "--no-heuristics",
                                       "--model", str(hf_regression), "--threshold", repr(cut),
                                       "--batch-size", "4", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    kept, rejects = _dataset(out)
    ids = [f"hq{i}" for i in range(len(HQ))] + [f"cc{i}" for i in range(len(CC))]
    expected = {i for i, s in zip(ids, scores) if s >= cut}
    assert {d["id"] for d in kept} == expected and len(kept) + len(rejects) == len(ids)
    by_id = dict(zip(ids, scores))
    for r in rejects:
        assert r["signals"]["quality_model.quality_score"] == pytest.approx(by_id[r["id"]], abs=1e-4)
    # The same model through afm curate, a regression head without a threshold refused first.
    cfg = tmp_path / "curate.yaml"
    cfg.write_text(json.dumps({"stages": ["quality_model"],
                               "quality_model": {"params": {"model_path": str(hf_regression)}}}))
    res = CliRunner().invoke(curate, ["-i", str(docs), "-o", str(tmp_path / "c0"), "-c", str(cfg)])
    assert res.exit_code != 0 and "threshold" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(curate, ["-i", str(docs), "-o", str(tmp_path / "c"), "-c", str(cfg),
                                      "--set", f"quality_model.params.threshold={cut!r}",
                                      "--set", "quality_model.params.device=cpu"])
    assert res.exit_code == 0, res.output
    kept, _ = _dataset(tmp_path / "c")
    assert {d["id"] for d in kept} == expected


def test_hf_classification_head_probability_of_the_named_label(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason=HF_REASON)
    pytest.importorskip("transformers", reason=HF_REASON)
    path = tiny_hf_classifier(tmp_path / "three", num_labels=3, labels=("low", "medium", "high"))
    flt = QualityClassifierFilter(QualityModelConfig(model_path=str(path), label_pos="high", device="cpu"))
    got = flt.score_texts(HQ[:3])
    np.testing.assert_allclose(got, reference_scores(path, HQ[:3], index=2), atol=1e-5)
    assert ((got > 0) & (got < 1)).all()
    with pytest.raises(ScorerError, match="name the positive one"):
        QualityClassifierFilter(QualityModelConfig(model_path=str(path)))
