"""The generic fastText classifier: training report, scoring, preprocessing, bad data."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from afm.filters.classifier import (
    ClassifierError,
    FastTextClassifier,
    binary_metrics,
    metadata_path,
    preprocess,
    read_texts,
    train_classifier,
)

COOKING = "simmer the onions with garlic then add tomatoes basil salt and olive oil".split()
FINANCE = "shares fell after the quarterly earnings report as investors sold bonds".split()


def _corpus(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=25)).capitalize() + ".\nMore text." for _ in range(n)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("clf") / "topic.bin"
    report = train_classifier(
        _corpus(COOKING, 120, 1),
        _corpus(FINANCE, 120, 2),
        out,
        label_pos="cooking",
        label_neg="finance",
        bucket=5_000,
        dim=8,
        verbose=False,
    )
    return out, report


def test_preprocess_is_shared_normalisation():
    assert preprocess("Hello,\nWORLD!\t\tBye") == "hello , world ! bye"
    assert preprocess("") == ""
    assert len(preprocess("a " * 50_000)) <= 20_000


def test_training_reports_held_out_metrics_and_sidecar(trained):
    out, report = trained
    assert report["n_test_pos"] == 12 and report["n_test_neg"] == 12
    assert report["precision"] == pytest.approx(1.0) and report["recall"] == pytest.approx(1.0)
    meta = json.loads(metadata_path(out).read_text())
    assert meta["label_pos"] == "cooking" and meta["f1"] == pytest.approx(report["f1"])


def test_score_batches_probability_of_positive_label(trained):
    out, _ = trained
    clf = FastTextClassifier(out)
    scores = clf.score(["Add garlic and basil to the onions", "Investors sold shares after earnings"])
    assert scores.dtype == np.float32 and scores.shape == (2,)
    assert scores[0] > 0.8 > 0.2 > scores[1]
    assert clf.score([]).shape == (0,)
    # Newlines and case do not change the score: the same preprocessing as training.
    assert clf.score_one("ADD GARLIC\nand basil") == pytest.approx(clf.score_one("add garlic and basil"))


def test_quantized_model_is_small(tmp_path):
    out = tmp_path / "small.ftz"
    train_classifier(
        _corpus(COOKING, 40, 3), _corpus(FINANCE, 40, 4), out, bucket=2_000, dim=8,
        quantize_cutoff=1_000, verbose=False,
    )
    assert out.stat().st_size < 300_000
    assert FastTextClassifier(out).score_one("olive oil and tomatoes") > 0.5


@pytest.mark.parametrize(
    ("pos", "neg", "match"),
    [
        ([], ["some text"], "both classes"),
        (["  ", "\n"], ["some text"], "both classes"),
    ],
)
def test_degenerate_inputs_raise_clear_error(tmp_path, pos, neg, match):
    with pytest.raises(ClassifierError, match=match):
        train_classifier(pos, neg, tmp_path / "m.bin", verbose=False)


def test_diverging_training_is_a_classifier_error(tmp_path):
    with pytest.raises(ClassifierError, match="NaN|diverged"):
        # lr 1e5: even the last retry (a quarter of it) diverges; at 100 that one sometimes trained
        train_classifier(["a"], ["b"], tmp_path / "m.bin", lr=1e5, bucket=1000, verbose=False)


def test_loading_missing_or_bogus_model(tmp_path):
    with pytest.raises(ClassifierError, match="not found"):
        FastTextClassifier(tmp_path / "nope.bin")
    bogus = tmp_path / "bogus.bin"
    bogus.write_bytes(b"not a model at all")
    with pytest.raises(ClassifierError):
        FastTextClassifier(bogus)


def test_binary_metrics():
    m = binary_metrics(np.array([0.9, 0.8, 0.2, 0.6]), np.array([1, 0, 0, 1]))
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == 1.0 and m["accuracy"] == 0.75


def test_read_texts_formats(tmp_path):
    (tmp_path / "a.txt").write_text("one doc\n\nsecond doc\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"body": "from jsonl"}) + "\n")
    assert list(read_texts([tmp_path / "a.txt"])) == ["one doc", "second doc"]
    assert list(read_texts([tmp_path / "b.jsonl"], text_field="body")) == ["from jsonl"]
    with pytest.raises(ClassifierError, match="no field 'text'"):
        list(read_texts([tmp_path / "b.jsonl"]))


def test_cli_train_prints_metrics_and_rejects_missing_input(tmp_path):
    from afm.app.commands.filters.classifier import classifier

    pos, neg = tmp_path / "p.txt", tmp_path / "n.txt"
    pos.write_text("\n".join(_corpus(COOKING, 30, 5)).replace(".\nMore", ". More") + "\n")
    neg.write_text("\n".join(_corpus(FINANCE, 30, 6)).replace(".\nMore", ". More") + "\n")
    runner = CliRunner()
    res = runner.invoke(
        classifier, ["train", "--positives", str(pos), "--negatives", str(neg),
                     "--out", str(tmp_path / "m.bin"), "--dim", "8"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(metadata_path(tmp_path / "m.bin").read_text())["n_test"] == 6
    res = runner.invoke(
        classifier, ["train", "--positives", str(tmp_path / "missing.txt"), "--negatives",
                     str(neg), "--out", str(tmp_path / "x.bin")],
    )
    assert res.exit_code != 0 and "input not found" in res.output
