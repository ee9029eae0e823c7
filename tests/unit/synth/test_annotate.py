"""`afm quality annotate` against a local stand-in judge (the OpenAI-compatible server of
``tests/chat_server.py``, started on loopback, answering by a rubric), then `afm classifier train
--labels` learning its labels: the FineWeb-Edu recipe end to end at toy scale."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.cli import main
from afm.app.commands.filters.classifier import classifier
from afm.app.commands.filters.quality import quality
from afm.synth.annotate import RubricError, load_rubric
from tests.chat_server import ChatStub, serve_chat
from tests.unit.filters.quality_models import CC, HQ

pytest.importorskip("httpx")


def rubric_judge(prompt: str, _choice: int) -> str:
    """A rubric-following judge: lessons score 4, shop spam 0, and one answer carries no
    score (the stand-in refuses a FORBIDDEN document with HTTP 400 itself)."""
    doc = re.search(r"<extract>\n(.*)\n</extract>", prompt, re.S)
    text = doc.group(1) if doc else ""
    if "MUMBLE" in text:
        return "I would rather not give a number."
    score = 4 if any(w in text for w in ("blood", "energy", "river", "prime", "press", "magma")) else 0
    return f"The extract {'teaches' if score else 'sells'} something.\nEducational value: {score}"


@pytest.fixture()
def judge_url():
    judge = ChatStub(rubric_judge)
    with serve_chat(judge) as url:
        yield judge, url


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    rows = [{"id": f"hq{i}-{k}", "text": f"{t} Note {k}."} for k in range(4) for i, t in enumerate(HQ)]
    rows += [{"id": f"cc{i}-{k}", "text": f"{t} ref {k}"} for k in range(4) for i, t in enumerate(CC)]
    rows += [{"id": "refused", "text": "FORBIDDEN text the judge will not read"},
             {"id": "mumble", "text": "MUMBLE a page the judge gives no number for"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_annotate_then_train_on_the_labels(judge_url, docs: Path, tmp_path: Path) -> None:
    judge, url = judge_url
    labels = tmp_path / "labels.jsonl"
    args = ["annotate", str(docs), "--judge", f"openai:{url}", "--model", "stand-in", "--sample", "100",
            "--out", str(labels), "--max-concurrency", "4"]
    res = CliRunner().invoke(quality, args)
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in labels.read_text().splitlines()]
    # Every document judged once; the refused one is asked again alone, and answers in
    # flight when the refusal stopped the batch (at most --max-concurrency) again too.
    assert len(rows) == 50 and len(set(judge.prompts)) == 50 and len(judge.prompts) <= 50 + 1 + 4
    assert "Educational value: <points>" in judge.prompts[0]  # the shipped rubric was sent
    by_id = {r["id"]: r for r in rows}
    assert by_id["hq0-0"]["score"] == 4 and by_id["hq0-0"]["label"] == "pos"
    assert by_id["cc0-0"]["score"] == 0 and by_id["cc0-0"]["label"] == "neg"
    assert by_id["hq0-0"]["raw"].endswith("Educational value: 4")  # the judge's raw answer is kept
    assert by_id["refused"]["score"] is None and "refused" in by_id["refused"]["error"]
    assert by_id["mumble"]["score"] is None and by_id["mumble"]["raw"].startswith("I would rather")
    assert {r["rubric"] for r in rows} == {"educational_value"} and rows[0]["positive_from"] == 3
    assert "answers without a score" in res.output and "refused" in res.output

    # Resume: every answered request comes from the cache; only the refused one is asked again.
    before = len(judge.prompts)
    res = CliRunner().invoke(quality, args)
    assert res.exit_code == 0, res.output
    again = judge.prompts[before:]
    assert again and all("FORBIDDEN" in p for p in again)

    model = tmp_path / "edu.bin"
    res = CliRunner().invoke(classifier, ["train", "--labels", str(labels), "--out", str(model),
                                          "--held-out", "0.25", "--epoch", "20", "--lr", "0.5"])
    assert res.exit_code == 0, res.output
    assert "skipped 2" in res.output  # no score: not a training example
    meta = json.loads(model.with_name(model.name + ".json").read_text())
    assert meta["n_train"] + meta["n_test"] == 48 and meta["accuracy"] >= 0.9

    # Re-thresholding from the scores instead of the labels: nothing reaches 5.
    res = CliRunner().invoke(classifier, ["train", "--labels", str(labels), "--out", str(tmp_path / "x.bin"),
                                          "--positive-from", "5"])
    assert res.exit_code != 0 and "0 positive" in res.output


def test_rubric_files_are_checked(tmp_path: Path) -> None:
    rubric = load_rubric("educational_value")
    assert rubric.parse("blah\nEducational value: 4") == 4
    assert rubric.parse("Educational value: 2 ... on reflection Educational value: 3") == 3  # the last one
    assert rubric.parse("Educational value: 9") is None and rubric.parse("") is None
    bad = tmp_path / "r.yaml"
    bad.write_text("name: x\nprompt: no placeholder\nanswer_pattern: '(\\d)'\nscale: {min: 0, max: 5}\n"
                   "positive_from: 3\n")
    with pytest.raises(RubricError, match="placeholder"):
        load_rubric(str(bad))
    bad.write_text("name: x\nprompt: '{document}'\nanswer_pattern: 'no group'\nscale: {min: 0, max: 5}\n"
                   "positive_from: 3\n")
    with pytest.raises(RubricError, match="group"):
        load_rubric(str(bad))
    res = CliRunner().invoke(main, ["quality", "annotate", "x.jsonl", "--judge", "openai:http://127.0.0.1:9/v1",
                                       "--model", "m", "--out", str(tmp_path / "l.jsonl"),
                                       "--rubric", str(bad)])
    assert res.exit_code != 0 and "Error:" in res.output and "Traceback" not in res.output
