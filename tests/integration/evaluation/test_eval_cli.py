"""``afm eval`` end to end on a tiny checkpoint and the packaged demo items."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from afm.evaluation.suite import prepare_demo_data
from afm.evaluation.tiny import tokenizer_dir, write_tiny_checkpoint


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval-cli")
    ckpt = write_tiny_checkpoint(tmp / "ck", seed=0, max_seq_len=256)
    data = prepare_demo_data(tmp / "data")
    # a user's own GSM8K copy (12 items, gzip): afm-demo reads it instead of the bundled 20
    own = tmp / "own"
    own.mkdir()
    lines = (Path(data) / "gsm8k-test.jsonl").read_text().splitlines()[:12]
    (own / "gsm8k-test.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    from afm.training.data.synthetic import markov_token_shards

    shards = markov_token_shards(tmp / "heldout", docs=20, length=(10, 300))
    return tmp, ckpt, data, shards, own


def _run(*args: str) -> object:
    return CliRunner().invoke(main, ["eval", *args], catch_exceptions=False)


def test_eval_writes_results_plot_report_and_compares(setup) -> None:
    tmp, ckpt, data, shards, own = setup
    # a decontamination index built by afm decontam from the demo-math set
    index = tmp / "index"
    assert CliRunner().invoke(main, ["decontam", "build-index", "--benchmarks", "demo", "--out", str(index)]).exit_code == 0
    out = tmp / "run" / "a.json"
    scratch = set(Path(tempfile.gettempdir()).glob("afm-demo-eval-*"))
    r = _run("--checkpoint", str(ckpt), "--tokenizer", str(tokenizer_dir()), "--tasks", "afm-demo",
             "--num-fewshot", "0", "--limit", "6", "--data-dir", str(own), "--output", str(out),
             "--perplexity-data", str(shards[0]), "--decontam-index", str(index),
             "--niah-lengths", "64,160", "--niah-depths", "0,1")
    assert r.exit_code == 0, r.output
    assert set(Path(tempfile.gettempdir()).glob("afm-demo-eval-*")) == scratch, "a temporary directory was left"
    res = json.loads(out.read_text())
    # the user's own copy where given, the bundled items elsewhere, and the output says which
    assert res["data"]["gsm8k test"] == (f"12 items from {(own / 'gsm8k-test.jsonl.gz').resolve()}, "
                                         "the first 6 evaluated (--limit)")
    assert "from the bundled demo items" in res["data"]["arc_easy test"]
    assert "data gsm8k test: 12 items from" in " ".join(r.output.split())
    assert res["format"] == "afm-eval-v1"
    assert set(res["tasks"]) == {"arc_easy", "piqa", "hellaswag", "gsm8k", "afm_niah"}
    assert res["tasks"]["arc_easy"]["samples"] == 6 and res["tasks"]["arc_easy"]["primary"] == "acc,none"
    assert 0.0 <= res["tasks"]["piqa"]["metrics"]["acc,none"]["value"] <= 1.0
    assert res["tasks"]["piqa"]["chance"] == 0.5 and 0.2 <= res["tasks"]["arc_easy"]["chance"] <= 1 / 3
    assert "chance" not in res["tasks"]["gsm8k"]  # generated answers: no guess to compare with
    ppl = res["perplexity"]
    assert ppl["documents"] == 20 and 1.0 < ppl["perplexity"] < 1e4  # random init: about the vocab size
    assert res["decontamination"]["gsm8k"]["covered"] == res["decontamination"]["gsm8k"]["items"] == 12
    assert res["decontamination"]["piqa"]["covered"] == 0
    assert res["long_context"]["lengths"] == [64, 160] and res["long_context"]["depths"] == [0.0, 1.0]
    # programs are compiled per length bucket, not per request
    assert res["engine"]["compiled_shapes"] <= 12 < res["engine"]["score_requests"]
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert "<img" in out.with_suffix(".html").read_text()
    cmp = CliRunner().invoke(main, ["eval", "compare", str(out), str(out), "--json"])
    rows = json.loads(cmp.output)
    assert rows and all(row["delta"] == 0 for row in rows if row["delta"] is not None)


def test_user_errors_are_clean(setup, tmp_path: Path) -> None:
    _tmp, ckpt, data, _, _own = setup
    tok = str(tokenizer_dir())
    cases = [
        (["--checkpoint", str(tmp_path)], "not a model checkpoint"),
        (["--checkpoint", str(ckpt), "--tokenizer", tok, "--tasks", "nope"], "unknown task"),
        (["--checkpoint", str(ckpt), "--tokenizer", tok, "--tasks", "sciq", "--data-dir", data], "sciq"),
        (["--checkpoint", str(ckpt), "--tokenizer", str(tmp_path)], "tokenizer"),
    ]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "piqa-validation.jsonl").write_text('{"goal": "x", "sol1": "a"}\n{truncated')
    cases.append((["--checkpoint", str(ckpt), "--tokenizer", tok, "--tasks", "piqa", "--data-dir", str(broken)],
                  "piqa-validation.jsonl"))
    for args, message in cases:
        r = CliRunner().invoke(main, ["eval", *args])
        assert r.exit_code != 0 and message in r.output, (args, r.output)
        assert "Traceback" not in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    r = CliRunner().invoke(main, ["eval", "compare", str(bad), str(bad)])
    assert r.exit_code != 0 and "not an afm eval results file" in r.output
