"""The curate pipeline end to end on Beam's local runner over a planted WARC crawl.

Checks the shards' schema, the accounting rule, that each planted problem was handled
by its stage, and (fault test) that bundles failing on their first attempt and retried
by the runner leave the same result: accounting holds and no row is duplicated.
Every stage must have run: a stage that did not is a failure, not a skip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from afm.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA, from_table

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def _config(tmp: Path, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        # The demo benchmark set, named explicitly (there is no default), indexed by the
        # run itself into a private cache.
        "decontaminate": {"params": {"benchmarks": "demo",
                                     "cache_dir": str(tmp / "decontam-cache")}},
        "output": {"shard_target_mb": 1.0},
    }
    cfg.update(extra)
    return cfg


def _rows(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in files:
        out.extend(from_table(pq.read_table(f["path"])))
    return out


@pytest.fixture(scope="module")
def curated(planted_warc: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from afm.pipelines.curate.pipeline import run_curate

    tmp = tmp_path_factory.mktemp("curate")
    out = tmp / "corpus"
    manifest = run_curate([str(planted_warc)], out, config=_config(tmp), pipeline_args=LOCAL)
    return {
        "manifest": manifest,
        "out": out,
        "docs": _rows(manifest["outputs"]["documents"]),
        "rejects": _rows(manifest["outputs"]["rejects"]),
    }


def _stage(curated: dict[str, Any], name: str) -> dict[str, Any]:
    """The stage's funnel row; it ran (every stage is ready in the development install: a
    stage that did not run is a failure here, never a skip)."""
    stage = next(s for s in curated["manifest"]["funnel"] if s["stage"] == name)
    assert stage["status"] == "ready", f"stage {name} did not run ({stage['status']})"
    return stage


def _rejected(curated: dict[str, Any], url_part: str) -> dict[str, Any] | None:
    return next((r for r in curated["rejects"] if url_part in (r["url"] or "")), None)


def test_outputs_and_schema(curated: dict[str, Any]) -> None:
    out: Path = curated["out"]
    manifest = curated["manifest"]
    assert (out / "manifest.json").exists() and (out / "report.html").exists()
    assert json.loads((out / "manifest.json").read_text())["totals"] == manifest["totals"]
    assert not (out / ".tmp").exists(), "temporary files must be cleaned up"
    docs = manifest["outputs"]["documents"]
    assert [Path(f["path"]).name for f in docs] == ["documents-00000.parquet"]
    for f in docs:
        schema = pq.read_schema(f["path"])
        assert schema.names == DOCUMENT_SCHEMA.names
        assert [fld.type for fld in schema] == [fld.type for fld in DOCUMENT_SCHEMA]
        assert pq.ParquetFile(f["path"]).metadata.row_group(0).column(0).compression == "ZSTD"
    for f in manifest["outputs"]["rejects"]:
        assert pq.read_schema(f["path"]).names == REJECT_SCHEMA.names
    report = (out / "report.html").read_text()
    assert "data:image/png;base64," in report and "Sample rejects" in report
    # what each stage rejected by kind, and each sample reject's deciding value
    kinds = manifest["by_kind"]
    assert {"source", "language", "length"} <= set(kinds) and "What each stage rejected, by kind" in report
    assert kinds["language"]["en"]["quality"]["kept"] >= 4 and kinds["source"]["web"]["extract"]["rejected"] >= 1
    assert " vs " in report  # a sample reject's deciding value and threshold


def test_accounting(curated: dict[str, Any], planted_pages: list) -> None:
    manifest = curated["manifest"]
    assert manifest["accounting"]["ok"], manifest["accounting"]["problems"]
    totals = manifest["totals"]
    assert totals["in"] == len(planted_pages)
    assert totals["in"] == totals["kept"] + totals["rejected"]
    for stage in manifest["funnel"]:
        assert stage["in"] == stage["kept"] + stage["dropped"], stage
        assert sum(stage["reasons"].values()) == stage["dropped"], stage
    assert len(curated["docs"]) == totals["kept"]
    assert len(curated["rejects"]) == totals["rejected"]
    ids = [d["id"] for d in curated["docs"]] + [r["id"] for r in curated["rejects"]]
    assert len(ids) == len(set(ids)), "a document appears twice in the outputs"


def test_duplicate_removed(curated: dict[str, Any]) -> None:
    _stage(curated, "dedup")
    rej = _rejected(curated, "orchard-copy")
    assert rej is not None and rej["rejected_by"] == "dedup"
    original = [d for d in curated["docs"] if d["url"].endswith("/orchard")]
    assert len(original) == 1, "exactly one copy of the duplicated story is kept"
    assert json.loads(rej["details"])["duplicate_of"] == original[0]["id"]


def test_pii_redacted(curated: dict[str, Any]) -> None:
    _stage(curated, "pii")
    ferry = next(d for d in curated["docs"] if d["url"].endswith("/ferry"))
    assert "martha.quinn@islandferry-office.org" not in ferry["text"]
    assert "555 0132" not in ferry["text"]
    assert ferry["pii_redactions"].get("email") == 1
    assert ferry["pii_redactions"].get("phone") == 1


def test_profanity_dropped(curated: dict[str, Any]) -> None:
    _stage(curated, "safety")
    rej = _rejected(curated, "/rant")
    assert rej is not None and rej["rejected_by"] == "safety"


def test_contamination_dropped(curated: dict[str, Any], planted_pages: list) -> None:
    if not any(url.endswith("/homework-help") for url, _, _ in planted_pages):
        pytest.skip("no demo benchmark set (filters/data/benchmarks) to plant")
    _stage(curated, "decontaminate")
    rej = _rejected(curated, "/homework-help")
    assert rej is not None and rej["rejected_by"] == "decontaminate"
    assert json.loads(rej["details"])["benchmark"] == "demo-math"


def test_boilerplate_handled(curated: dict[str, Any], boilerplate_markers: tuple) -> None:
    _stage(curated, "extract")
    assert curated["docs"], "the clean articles must survive"
    for doc in curated["docs"]:
        for marker in boilerplate_markers:
            assert marker not in doc["text"], (doc["url"], marker)
    assert all(not d["url"].endswith("/links") for d in curated["docs"])
    gone = _rejected(curated, "/gone")
    assert gone is not None and gone["reason"] == "http_status"


def test_clean_articles_kept(curated: dict[str, Any]) -> None:
    kept = sorted(d["url"].rsplit("/", 1)[1] for d in curated["docs"])
    assert kept == ["bridge", "ferry", "library", "orchard"]
    for doc in curated["docs"]:
        assert doc["language"] == "en" and doc["fetched_at"] is not None


def test_retried_bundles_leave_no_trace(curated: dict[str, Any], planted_warc: Path,
                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Fault injection: every bundle of the language stage, the dedup output and the shard
    writer fails on its first attempt (after the temp shard is written, for the writer).
    Beam's bundle-based local runner retries each; the result must equal the clean run."""
    from afm.pipelines.curate.pipeline import run_curate

    tmp = tmp_path_factory.mktemp("faults")
    markers = tmp / "markers"
    cfg = _config(tmp, debug={"fail_once_at": ["language", "dedup", "write"],
                              "marker_dir": str(markers)})
    manifest = run_curate([str(planted_warc)], tmp / "corpus", config=cfg,
                          runner="BundleBasedDirectRunner")
    injected = sorted(p.name.split("-")[0] for p in markers.iterdir())
    assert {"language", "write"} <= set(injected), injected
    assert manifest["accounting"]["ok"], manifest["accounting"]["problems"]
    assert manifest["totals"] == curated["manifest"]["totals"]
    docs = _rows(manifest["outputs"]["documents"])
    rejects = _rows(manifest["outputs"]["rejects"])
    assert len(docs) == len({d["id"] for d in docs}) == manifest["totals"]["kept"]
    assert len(rejects) == len({r["id"] for r in rejects}) == manifest["totals"]["rejected"]
    assert sorted(d["id"] for d in docs) == sorted(d["id"] for d in curated["docs"])
    assert not list((tmp / "corpus").glob(".*")), "no temporary or staging file may remain"
    assert (tmp / "corpus" / "_SUCCESS").exists()
