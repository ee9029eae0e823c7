"""The Beam transform and the ``afm decontam`` commands, end to end on the demo set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to
from click.testing import CliRunner

from afm.app.commands.pipelines.decontam import decontam_group
from afm.filters.benchmarks import DATA_DIR, build_index, demo_benchmark_specs
from afm.io import read_records, write_parquet
from afm.pipelines.decontaminate import DecontamConfig, Decontaminate, decontaminate_records
from afm.schema import make_document


def _rows() -> list[dict]:
    return [json.loads(line) for line in open(demo_benchmark_specs()[0].path, encoding="utf-8")]


def _corpus() -> list[dict]:
    rows = _rows()
    common = " ".join(rows[9]["question"].split()[:13])
    texts = [f"Recipe blog. {rows[0]['question'].upper()} Enjoy!"]  # contaminated
    texts += [f"{common} number {i}" for i in range(4)]  # common usage at threshold 4
    texts += [f"Rare: {' '.join(rows[3]['question'].split()[:14])} {i}" for i in range(3)]  # 3 < 4
    texts += [f"Ordinary page {i} about gardening and weather." for i in range(10)]
    return [make_document(t, url=f"https://site.test/{i}") for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("beam") / "idx"
    build_index(str(DATA_DIR), out)
    return str(out)


def test_beam_transform_matches_plain_python(index: str) -> None:
    docs = _corpus()
    cfg = DecontamConfig(index=index, threshold=4, batch_docs=3)
    kept_py, rejects_py, report_py = decontaminate_records(docs, cfg)
    assert len(rejects_py) == 1 + 3
    expected_report = report_py["benchmarks"]["demo-math"]

    def check_report(reports: list[dict]) -> None:
        (report,) = reports
        assert report["documents_in"] == len(docs)
        assert report["documents_rejected"] == len(rejects_py)
        assert report["benchmarks"]["demo-math"] == expected_report

    with beam.Pipeline(runner="DirectRunner") as p:
        out = p | beam.Create(docs) | Decontaminate(cfg)
        assert_that(out["kept"] | "kept ids" >> beam.Map(lambda d: d["id"]),
                    equal_to([d["id"] for d in kept_py]), label="check kept")
        assert_that(out["rejected"] | "rejected ids" >> beam.Map(lambda d: (d["id"], d["details"])),
                    equal_to([(d["id"], d["details"]) for d in rejects_py]), label="check rejected")
        assert_that(out["report"], check_report, label="check report")


def test_cli_build_index_and_run(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(decontam_group, ["build-index", "--benchmarks", "demo", "--out", str(tmp_path / "idx")])
    assert res.exit_code == 0, res.output
    docs = _corpus()
    write_parquet(docs[:9], tmp_path / "in" / "a.parquet")
    with open(tmp_path / "in" / "b.jsonl", "w", encoding="utf-8") as fh:
        for d in docs[9:]:
            fh.write(json.dumps({"id": d["id"], "url": d["url"], "text": d["text"]}) + "\n")
        fh.write(json.dumps({"id": "no-text", "url": None}) + "\n")
    res = runner.invoke(decontam_group, [
        "run", "--index", str(tmp_path / "idx"), "--input", str(tmp_path / "in"),
        "--output", str(tmp_path / "out"), "--threshold", "4",
    ])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    kept = [r for f in sorted(out.glob("documents-*.parquet")) for r in read_records(f)]
    rejects = [r for f in sorted(out.glob("rejects-*.parquet")) for r in read_records(f)]
    assert len(kept) + len(rejects) == len(docs) + 1
    assert sorted(r["reason"] for r in rejects) == ["benchmark_overlap"] * 4 + ["missing_text"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"] == {"in": len(docs) + 1, "kept": len(kept), "rejected": 5}
    bench = manifest["stage_reports"]["decontaminate"]["benchmarks"]["demo-math"]
    assert bench["documents_removed"] == 4 and bench["excused_as_common"][0]["documents"] == 4


def test_cli_sft_fields(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(decontam_group, ["build-index", "--benchmarks", str(DATA_DIR),
                                          "--out", str(tmp_path / "idx")]).exit_code == 0
    rows = _rows()
    with open(tmp_path / "sft.jsonl", "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"prompt": rows[5]["question"], "response": "2592"}) + "\n")
        fh.write(json.dumps({"prompt": "Say hi", "response": "Hi!"}) + "\n")
    res = runner.invoke(decontam_group, [
        "run", "--index", str(tmp_path / "idx"), "--input", str(tmp_path / "sft.jsonl"),
        "--text-field", "prompt", "--text-field", "response", "--output", str(tmp_path / "out"),
    ])
    assert res.exit_code == 0, res.output
    (rej,) = read_records(tmp_path / "out" / "rejects-00000.parquet")
    assert json.loads(rej["details"])["example_id"] == "5"


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    res = CliRunner().invoke(decontam_group, ["run", "--index", str(tmp_path / "none"), "--input",
                                              str(tmp_path), "--output", str(tmp_path / "o")])
    assert res.exit_code != 0 and "build-index" in res.output
    res = CliRunner().invoke(decontam_group, ["build-index", "--benchmarks", "demo", "--out",
                                              str(tmp_path / "i"), "--n", "nope=5"])
    assert res.exit_code != 0 and "unknown benchmark" in res.output


def test_with_a_spill_folder_texts_wait_on_disk_and_the_verdicts_stay(index: str, tmp_path: Path) -> None:
    """In a curate run the documents with benchmark hits cross the join by document, and the
    kept documents and the rejects a flatten each: with a spill folder all of them carry
    their texts on disk (a local run's launcher would otherwise hold them), and read back
    they are the plain run's, verdicts and details included."""
    from afm.pipelines.beam.spill import is_stowed, restore_all

    filler = " ".join(f"zqx{k}" for k in range(80))  # long enough to stow, in no benchmark
    docs = [{**d, "text": f"{d['text']} {filler}"} for d in _corpus()]
    cfg = DecontamConfig(index=index, threshold=4, batch_docs=3)
    kept_py, rejects_py, _ = decontaminate_records(docs, cfg)
    assert rejects_py

    def same_as_plain(expected: list[dict]) -> Any:
        def check(records: list[dict]) -> None:
            assert records and all(is_stowed(r) for r in records)
            back = sorted(restore_all(records), key=lambda r: r["id"])
            assert back == sorted(expected, key=lambda r: r["id"])
        return check

    spill_dir = str(tmp_path / ".spill" / "decontaminate")
    with beam.Pipeline(runner="DirectRunner") as p:
        out = p | beam.Create(docs) | Decontaminate(cfg, spill_dir=spill_dir)
        assert_that(out["kept"], same_as_plain(kept_py), label="check kept")
        assert_that(out["rejected"], same_as_plain(rejects_py), label="check rejected")
