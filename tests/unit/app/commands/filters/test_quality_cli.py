"""`afm quality filter` and `afm quality label` end to end on small files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from afm.app.commands.filters.quality import quality
from afm.filters.quality.model import DEFAULT_MODEL
from afm.io import read_records

pytest.importorskip("fasttext")
DATA = Path(DEFAULT_MODEL).parent / "handwritten"


def _texts(name: str) -> list[str]:
    return [json.loads(x)["text"] for x in (DATA / name).read_text().splitlines() if x.strip()]


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    pos, neg = _texts("train_positives.jsonl"), _texts("train_negatives.jsonl")
    path = tmp_path / "docs.jsonl"
    with path.open("w") as fh:
        for i in range(0, 30, 3):  # 10 prose documents of three paragraphs
            fh.write(json.dumps({"id": f"p{i}", "source": "web", "text": "\n".join(pos[i : i + 3])}) + "\n")
        for i in range(10):
            fh.write(json.dumps({"id": f"n{i}", "source": "web", "text": neg[i]}) + "\n")
    return path


def _dataset(out: Path) -> tuple[list[dict], list[dict]]:
    kept = [r for f in sorted(out.glob("documents-*.parquet")) for r in read_records(f)]
    rejects = [r for f in sorted(out.glob("rejects-*.parquet")) for r in read_records(f)]
    return kept, rejects


def test_filter_writes_kept_and_rejects(corpus: Path, tmp_path: Path):
    out = tmp_path / "out"
    res = CliRunner().invoke(quality, ["filter", str(corpus), "--output", str(out)])
    assert res.exit_code == 0, res.output
    kept, rejects = _dataset(out)
    assert len(kept) + len(rejects) == 20  # nothing lost
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["accounting"]["ok"] and (out / "_SUCCESS").exists()
    assert {d["id"] for d in kept} <= {f"p{i}" for i in range(0, 30, 3)}
    assert all(d["quality_score"] is not None for d in kept)
    assert all(r["reason"] for r in rejects)


def test_filter_top_fraction_and_bad_override(corpus: Path, tmp_path: Path):
    out = tmp_path / "top"
    res = CliRunner().invoke(quality, ["filter", str(corpus), "--output", str(out),
                                       "--no-heuristics", "--top-fraction", "0.25"])
    assert res.exit_code == 0, res.output
    kept, rejects = _dataset(out)
    # top quarter of 20 = 5 documents, more only when scores tie at the cut
    assert len(kept) >= 5 and len(kept) + len(rejects) == 20
    assert min(d["quality_score"] for d in kept) >= max(r["quality_score"] for r in rejects)
    assert {r["reason"] for r in rejects} == {"quality_model_top_fraction"}
    res = CliRunner().invoke(quality, ["filter", str(corpus), "--output", str(out), "--set", "nope=1"])
    assert res.exit_code != 0 and "unknown keys" in res.output


def test_label_trains_from_a_reference_lm(corpus: Path, tmp_path: Path):
    ref = tmp_path / "ref.jsonl"
    ref.write_text("".join(json.dumps({"text": t}) + "\n" for t in _texts("train_positives.jsonl")[40:]))
    model = tmp_path / "lm_labels.bin"
    res = CliRunner().invoke(quality, ["label", str(corpus), "--reference", str(ref), "--out", str(model),
                                       "--labels-out", str(tmp_path / "labels.jsonl"), "--epoch", "20"])
    assert res.exit_code == 0, res.output
    assert model.is_file()
    labels = [json.loads(x) for x in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert len(labels) == 20 and {x["label"] for x in labels} >= {"pos", "neg"}
    res = CliRunner().invoke(quality, ["label", str(corpus), "--out", str(model)])
    assert res.exit_code != 0 and "exactly one of" in res.output


def test_filter_records_damaged_lines_and_refuses_a_full_output(corpus: Path, tmp_path: Path):
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(corpus.read_text() + '{"id": "cut", "text": "trunc\n' + "not json\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(quality, ["filter", str(damaged), "--output", str(out), "--no-model"])
    assert res.exit_code == 0, res.output
    kept, rejects = _dataset(out)
    assert len(kept) + len(rejects) == 22  # the two damaged lines are recorded, not lost
    assert sum(r["rejected_by"] == "read" for r in rejects) == 2, {r["rejected_by"] for r in rejects}
    res = CliRunner().invoke(quality, ["filter", str(damaged), "--output", str(out), "--no-model"])
    assert res.exit_code == 1 and "--overwrite" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(quality, ["filter", str(damaged), "--output", str(out), "--no-model",
                                       "--no-heuristics"])
    assert res.exit_code == 2 and "nothing to run" in res.output


def test_audit_and_junk_on_real_pages(shared_eval: Path, tmp_path: Path):
    """`afm quality junk` writes a set per kind made from the pages; `afm quality audit`
    runs the default stages over their main texts and the junk, tables in its JSON."""
    out = tmp_path / "junk"
    result = CliRunner().invoke(quality, ["junk", "--scrapinghub", str(shared_eval), "--out", str(out),
                                          "--per-kind", "3", "--kinds", "word_salad,keyword_spam"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["keyword_spam.jsonl", "word_salad.jsonl"]
    rows = [json.loads(x) for x in (out / "word_salad.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and {r["kind"] for r in rows} == {"word_salad"} and rows[0]["made_from"]
    report = tmp_path / "audit.json"
    result = CliRunner().invoke(quality, ["audit", "--scrapinghub", str(shared_eval), "--technical", "none",
                                          "--per-kind", "2", "--min-words", "200", "--json", str(report)])
    assert result.exit_code == 0, result.output
    tables = json.loads(report.read_text())
    assert tables["stages"] == ["language", "safety", "pii", "quality"]  # the model is off by default
    sh = tables["good"]["by_set"]["scrapinghub"]
    assert sh["n"] >= 140 and sh["keep_rate"] >= 0.8
    assert tables["junk"]["all"]["n"] == 22 and tables["junk"]["keyword_spam"]["rejected"] == 2
    bad = CliRunner().invoke(quality, ["audit", "--technical", "none"])
    assert bad.exit_code != 0 and "nothing to audit" in bad.output
