"""``afm eval`` on the post-training tasks that need no judge, offline, on a tiny checkpoint:
every BFCL category (AST and relevance checks, BFCL's summaries) and the safety and
over-refusal rates with the keyword detector, labelled; the model's replies come from the
loaded engine through the chat template (tool schemas in the system turn)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from afm.evaluation.posttrain.bfcl.data import CATEGORIES
from afm.evaluation.tiny import tokenizer_dir, write_tiny_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("posttrain") / "ck", seed=0, max_seq_len=256)


def test_bfcl_and_safety_offline(checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "post.json"
    r = CliRunner().invoke(main, ["eval", "--checkpoint", str(checkpoint), "--tokenizer", str(tokenizer_dir()),
                                  "--tasks", "afm-bfcl,afm-safety", "--limit", "2", "--max-new-tokens", "8",
                                  "--data-dir", str(tmp_path), "--output", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    tasks, details = res["tasks"], res["posttrain"]["tasks"]
    for name in CATEGORIES:
        entry = tasks[name]
        assert entry["samples"] == 2 and entry["primary"] in ("accuracy,ast", "accuracy,relevance")
        assert 0.0 <= entry["metrics"][entry["primary"]]["value"] <= 1.0
        assert len(details[name]["items"]) == 2 and details[name]["source"] in ("afm sample", "bfcl-eval package")
    assert tasks["bfcl_non_live_ast"]["group"] and tasks["bfcl_non_live_ast"]["members"] == 4
    assert tasks["bfcl_live_ast"]["samples"] == 8
    for name, metric in (("safety_harmbench", "violation_rate,keyword"), ("safety_xstest", "violation_rate,keyword"),
                         ("overrefusal_xstest", "refusal_rate,keyword")):
        assert tasks[name]["primary"] == metric and tasks[name]["samples"] == 2
        assert "weaker" in res["notes"][name]
        assert details[name]["detector"] == "keyword" and details[name]["judged"] == 2
    assert res["posttrain"]["judge"] is None and res["settings"]["posttrain"]["max_new_tokens"] == 8
    html = out.with_suffix(".html").read_text()
    assert "bfcl_simple" in html and "violation_rate,keyword" in html
    table = CliRunner().invoke(main, ["eval", "compare", str(out), str(out)])
    assert table.exit_code == 0 and "overrefusal_xstest" in table.output


def test_engine_generator_renders_tools_with_the_chat_template(checkpoint: Path) -> None:
    from afm.evaluation.harness import AfmLM
    from afm.evaluation.posttrain.bfcl import data
    from afm.evaluation.posttrain.generation import EngineGenerator
    from afm.synth.generators import GenerationRequest

    lm = AfmLM(checkpoint=str(checkpoint), tokenizer=str(tokenizer_dir()), show_progress=False)
    gen = EngineGenerator(lm.engine, lm.tok, "tiny")
    entry = data.load("bfcl_simple", str(data.SAMPLE_DIR)).entries[0]
    tools = tuple(data.to_tools(entry["function"]))
    req = GenerationRequest(tuple(data.messages(entry)), tools=tools, max_tokens=6)
    ids = gen.prompt_ids(req, 10_000)
    assert ids == lm.tok.encode_chat(data.messages(entry), tools=list(tools), add_generation_prompt=True)[0]
    assert "calculate_triangle_area" in lm.tok.decode(ids) and ids[-1] == lm.tok.role_id("assistant")
    (g,) = gen.generate([req])
    new = lm.engine.generate([ids], max_new_tokens=6, stop_token_ids=[lm.tok.end_id, lm.tok.eos_id],
                             pad_id=lm.tok.pad_id)[0]
    assert g.texts == [lm.tok.decode(new)] and g.finish[0] in ("stop", "length")
    (two,) = gen.generate([GenerationRequest(req.messages, tools=tools, max_tokens=6, n=2)])
    assert len(two.texts) == 2
    (long,) = gen.generate([GenerationRequest(req.messages, max_tokens=lm.max_length + 5)])
    assert gen.clamped


def test_demo_safety_stage_labels_toy_scale_and_the_keyword_detector(checkpoint: Path, tmp_path: Path) -> None:
    from afm.app.demo import DemoRun

    run = DemoRun(tmp_path, train_steps=1)
    rates = run.safety(checkpoint, tokenizer_dir(), per_set=3)
    assert set(rates) == {"safety_harmbench", "safety_xstest", "overrefusal_xstest"}
    assert all(e["samples"] == 3 and 0.0 <= e["metrics"][e["primary"]]["value"] <= 1.0 for e in rates.values())
    res = json.loads((tmp_path / "eval" / "safety.json").read_text())
    for name in rates:
        assert res["notes"][name].startswith("toy scale") and "keyword refusal detector" in res["notes"][name]
    assert ("SFT safety report", str(tmp_path / "eval" / "safety.html")) in run.outputs
