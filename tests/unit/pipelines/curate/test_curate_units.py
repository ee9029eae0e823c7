"""Unit tests of the curate pipeline's parts: config, stage lookup, readers, shard writer,
accounting, runner option checks, report."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
from pathlib import Path

import pytest

from afm.config import ConfigError
from afm.imports import probe as probe_module
from afm.pipelines.beam.accounting import check_accounting
from afm.pipelines.beam.io import (
    BAD,
    DOC,
    PAGE,
    SKIP,
    classify_record,
    read_file_items,
    resolve_inputs,
    shard_of,
)
from afm.pipelines.curate.config import CurateConfig, load_curate_config
from afm.pipelines.curate.stages import REGISTRY, resolve_stage
from afm.readers.warc import iter_warc_pages
from afm.schema import make_document

# ----------------------------------------------------------------------------- config


def test_config_yaml_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("source: math\nquality_model: {enabled: false}\n"
                    "output: {shard_target_mb: 16}\n")
    cfg = load_curate_config(str(path))
    assert cfg.source == "math" and cfg.quality_model.enabled is False
    assert cfg.output.shard_target_mb == 16.0
    assert cfg.stage_names() == REGISTRY.order("math")
    # --source wins over the file.
    assert load_curate_config(str(path), source="code").stage_names() == REGISTRY.order("code")


def test_a_stage_off_by_default_is_on_when_the_run_asks_for_it() -> None:
    """quality_model is off by default (docs/quality.md); it runs when enabled, when its
    params are set, or when the run's stage list names it; an explicit false wins."""
    assert load_curate_config().quality_model.enabled is False
    assert load_curate_config(overrides=["quality_model.enabled=true"]).quality_model.enabled is True
    assert load_curate_config(overrides=["quality_model.params.threshold=0.2"]).quality_model.enabled is True
    assert load_curate_config({"stages": ["quality", "quality_model"]}).quality_model.enabled is True
    off = load_curate_config({"quality_model": {"enabled": False, "params": {"threshold": 0.2}}})
    assert off.quality_model.enabled is False
    assert load_curate_config().quality.enabled is True  # stages on by default stay on
    round_trip = load_curate_config(load_curate_config(overrides=["quality_model.params.threshold=0.2"]))
    assert round_trip.quality_model.enabled is True


def test_config_rejects_typos() -> None:
    with pytest.raises(ConfigError, match="unknown keys"):
        load_curate_config({"dedupe": {}})
    with pytest.raises(ConfigError, match="fail_once_at"):
        load_curate_config({"debug": {"fail_once_at": ["nowhere"], "marker_dir": "/tmp"}})
    with pytest.raises(ConfigError, match="marker_dir"):
        load_curate_config({"debug": {"fail_once_at": ["write"]}})


def test_report_order_and_cheap_first() -> None:
    web = REGISTRY.order("web")
    order = ["extract", "language", "safety", "pii", "dedup", "quality", "decontaminate"]
    assert [s for s in web if s in order] == order
    assert web.index("quality") < web.index("quality_model")  # heuristics before model


def test_stage_params_checked_against_the_stage_config() -> None:
    stage = resolve_stage(REGISTRY["language"], True, {"min_score": 0.5})
    assert stage.active and stage.config.min_score == 0.5
    with pytest.raises(ConfigError, match="language"):
        resolve_stage(REGISTRY["language"], True, {"min_scor": 0.5})
    # typed when the config is loaded: a threshold is a number from YAML or --set onward
    cfg = load_curate_config({"language": {"params": {"min_score": "0.5"}}}, overrides=["dedup.params.threshold=0.9"])
    assert cfg.language.params.min_score == 0.5 and cfg.stage("dedup").params.threshold == 0.9
    with pytest.raises(ConfigError, match=r"language\.params: unknown keys \['min_scor'\]"):
        load_curate_config(overrides=["language.params.min_scor=0.5"])
    with pytest.raises(ConfigError, match="language needs"):
        load_curate_config({"stages": ["language", "extract"]})


def test_only_a_missing_third_party_library_makes_a_stage_unavailable(monkeypatch, tmp_path) -> None:
    """A stage whose extra is not installed is unavailable (reported, documents pass); a stage
    of this project that cannot be built is a failure: a missing afm module, a renamed config
    class or a module that raises on import never turns into a skipped filter."""

    from afm.imports import BrokenComponent

    (tmp_path / "stage_with_an_extra.py").write_text("import afm_extra_not_installed_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    why = probe_module("stage_with_an_extra", "Filter")
    assert why == "module stage_with_an_extra needs 'afm_extra_not_installed_xyz', which is not installed"
    with pytest.raises(BrokenComponent, match="afm.filters.no_such_filter"):
        probe_module("afm.filters.no_such_filter", "X")
    renamed = dataclasses.replace(REGISTRY["pii"], config="afm.filters.pii:PiiConfigRenamed")
    with pytest.raises(BrokenComponent, match="has no PiiConfigRenamed"):
        resolve_stage(renamed, True, {})
    assert resolve_stage(REGISTRY["language"], False, {}).status == "disabled"


@pytest.mark.parametrize("source", ["web", "math", "code", "chat"])
def test_every_stage_of_every_source_is_ready_in_the_development_install(source: str) -> None:
    """The development install (make test) has every extra: each stage of each source's list
    resolves ready, so a curate test never passes because a stage silently did not run."""
    for name in REGISTRY.order(source):
        stage = resolve_stage(REGISTRY[name], True, {}, source)
        assert stage.status == "ready", f"{source}: {name}: {stage.status}"


def test_math_source_requires_math() -> None:
    stages = {s.name: s for s in load_curate_config(CurateConfig(source="math")).resolve()}
    assert stages["math"].config.require_math is True


# ----------------------------------------------------------------------------- reading


def _warc_bytes() -> bytes:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record(
        "http://a.test/", "response", payload=io.BytesIO(b"<p>hello</p>"), http_headers=headers,
        warc_headers_dict={"WARC-Date": "2024-01-02T03:04:05Z"}))
    writer.write_record(writer.create_warc_record(
        "http://a.test/", "request", payload=io.BytesIO(b"GET / HTTP/1.1\r\n\r\n")))
    return buf.getvalue()


def test_warc_pages(tmp_path: Path) -> None:
    pages = list(iter_warc_pages(io.BytesIO(_warc_bytes())))
    assert len(pages) == 1  # the request record is not a page
    page = pages[0]
    assert page["url"] == "http://a.test/" and page["status"] == 200
    assert page["body"] == b"<p>hello</p>" and page["fetched_at"].year == 2024
    path = tmp_path / "x.warc.gz"
    path.write_bytes(_warc_bytes())
    assert [k for k, _ in read_file_items(str(path), "web")] == [PAGE, SKIP]


def test_reads_the_crawlers_warc(tmp_path: Path) -> None:
    """Pages written by the crawler's WarcStore read back identically (crawl dir input)."""
    from afm.crawler.storage.warc import WarcStore, iter_warc_responses

    store = WarcStore(tmp_path / "crawl")
    store.write("http://c.test/a", 200, [("Content-Type", "text/html")], b"<p>caf\xc3\xa9</p>")
    store.write("http://c.test/b", 404, [("Content-Type", "text/html")], b"gone")
    store.close()
    files, _ = resolve_inputs([str(tmp_path / "crawl")], "web")
    assert files and all(f.endswith(".warc.gz") for f in files)
    ours = [p for f in files for k, p in read_file_items(f, "web") if k == PAGE]
    theirs = [p for f in files for p in iter_warc_responses(f)]
    assert [(p["url"], p["status"], p["body"]) for p in ours] == \
        [(p["url"], p["status"], p["body"]) for p in theirs]
    assert [p["status"] for p in ours] == [200, 404]


def test_corrupt_file_becomes_a_reject(tmp_path: Path) -> None:
    path = tmp_path / "broken.warc.gz"
    # gzip magic followed by garbage: deterministic (a truncated real record depends on
    # the random WARC-Record-ID bytes, and warcio sometimes reads that as a clean end).
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"garbage" * 10)
    items = list(read_file_items(str(path), "web"))
    assert [k for k, _ in items] == [BAD]
    assert items[0][1]["reason"] in ("corrupt_gzip", "truncated") and items[0][1]["id"]
    assert json.loads(items[0][1]["details"])["records_lost"] == "unknown"


def test_jsonl_records(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps({"text": "hello world", "url": "http://b.test/"}) + "\n")
        fh.write("{not json\n\n")
        fh.write(json.dumps({"url": "http://c.test/"}) + "\n")
        fh.write(json.dumps({"html": "<p>x</p>", "url": "http://d.test/"}) + "\n")
    kinds = [(k, r.get("reason")) for k, r in read_file_items(str(path), "web")]
    assert kinds == [(DOC, None), (BAD, "bad_json"), (BAD, "missing_text"), (PAGE, None)]
    # A code source has no extractor: a crawl page is a read reject there.
    kinds = [k for k, _ in read_file_items(str(path), "code", allow_pages=False)]
    assert kinds == [DOC, BAD, BAD, BAD]


def test_classify_record_keeps_schema_fields() -> None:
    kind, doc = classify_record({"text": "t", "id": "abc", "quality_score": 0.5,
                                 "fetched_at": "2024-01-01T00:00:00Z", "extra": 1}, "web")
    assert kind == DOC and doc["id"] == "abc" and doc["quality_score"] == 0.5
    assert doc["fetched_at"].tzinfo is not None and "extra" not in doc
    kind, doc = classify_record({"path": "a.py", "content": "x = 1", "repo": "o/r",
                                 "license": "MIT"}, "code")
    assert kind == DOC and doc["url"] == "o/r/a.py" and doc["license"] == "MIT"


def test_resolve_inputs(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.parquet").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x")
    files, skipped = resolve_inputs([str(tmp_path)], "web")
    assert [Path(f).name for f in files] == ["a.jsonl", "b.parquet"]
    assert [Path(f.split(" (")[0]).name for f in skipped] == ["notes.txt"]
    with pytest.raises(ValueError):
        resolve_inputs([str(tmp_path / "notes.txt")], "web")
    # A crawl directory: only its WARCs are documents (not the index, state, summary).
    crawl = tmp_path / "crawl"
    (crawl / "index").mkdir(parents=True)
    (crawl / "state").mkdir()
    (crawl / "afm-00000.warc.gz").write_bytes(b"")
    (crawl / "index" / "afm-00000.parquet").write_bytes(b"")
    (crawl / "state" / "frontier.jsonl").write_text("{}\n")
    files, skipped = resolve_inputs([str(crawl)], "web")
    assert [Path(f).name for f in files] == ["afm-00000.warc.gz"] and len(skipped) == 2
    with pytest.raises(FileNotFoundError):
        resolve_inputs([str(tmp_path / "missing.jsonl")], "web")


def test_shard_of_is_stable() -> None:
    assert shard_of("abc", 7) == shard_of("abc", 7)
    assert {shard_of(str(i), 4) for i in range(200)} == {0, 1, 2, 3}


# ----------------------------------------------------------------------------- writing


def test_write_shards_deterministic_and_atomic(tmp_path: Path) -> None:
    import apache_beam as beam
    import pyarrow.parquet as pq

    from afm.pipelines.beam.io import WriteShards
    from afm.pipelines.beam.packing import pack_record
    from afm.pipelines.beam.runners import build_options, make_runner
    from afm.schema import DOCUMENT_SCHEMA

    docs = [make_document(f"document number {i} " * 20, url=f"http://s.test/{i}")
            for i in range(60)]

    def run(out: Path) -> list[Path]:
        options = build_options("DirectRunner", ["--direct_running_mode=in_memory",
                                                 "--direct_num_workers=1"])
        with beam.Pipeline(runner=make_runner("DirectRunner"), options=options) as p:
            _ = (p | beam.Create(docs) | beam.Map(pack_record)
                 | WriteShards(str(out), "documents", DOCUMENT_SCHEMA, target_bytes=4000))
        return sorted(out.glob("*.parquet"))

    first = run(tmp_path / "a")
    assert len(first) > 1 and sum(pq.read_metadata(f).num_rows for f in first) == 60
    for f in first:
        ids = pq.read_table(f, columns=["id"]).column("id").to_pylist()
        assert ids == sorted(ids)
    second = run(tmp_path / "b")
    assert [f.name for f in first] == [f.name for f in second]
    for a, b in zip(first, second):
        assert pq.read_table(a).equals(pq.read_table(b))
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.startswith(".")]  # no temporary file left


# ----------------------------------------------------------------------------- accounting


def _counts() -> dict[str, int]:
    return {"read.in": 10, "read.kept": 10, "read.rejected": 0, "read.pages": 10,
            "extract.in": 10, "extract.kept": 8, "extract.rejected": 2,
            "dedup.in": 8, "dedup.kept": 7, "dedup.rejected": 1}


STAGES = [("read", "ready"), ("extract", "ready"), ("dedup", "ready")]
CHAIN = {"extract": ["read.pages"], "dedup": ["extract.kept"]}
FILES = [{"kind": "documents", "rows": 7}, {"kind": "rejects", "rows": 3}]


def test_accounting_holds() -> None:
    acc = check_accounting(_counts(), STAGES, CHAIN, FILES,
                           reasons={"reason|extract|http_status": 2, "reason|dedup|dup": 1})
    assert acc.ok and (acc.total_in, acc.kept, acc.rejected) == (10, 7, 3)


@pytest.mark.parametrize("change, message", [
    ({"dedup.kept": 6}, "stage dedup: in 8"),
    ({"dedup.in": 9, "dedup.kept": 8}, "were passed to it"),
])
def test_accounting_catches_lost_documents(change: dict, message: str) -> None:
    acc = check_accounting({**_counts(), **change}, STAGES, CHAIN, FILES)
    assert not acc.ok and any(message in p for p in acc.problems), acc.problems


def test_accounting_checks_written_rows() -> None:
    files = [{"kind": "documents", "rows": 8}, {"kind": "rejects", "rows": 3}]
    acc = check_accounting(_counts(), STAGES, CHAIN, files)
    assert not acc.ok and "document shards hold 8 rows" in acc.problems[0]


# ----------------------------------------------------------------------------- runners


def test_direct_defaults_use_every_core() -> None:
    from apache_beam.options.pipeline_options import DirectOptions

    from afm.pipelines.beam.runners import build_options

    direct = build_options("DirectRunner").view_as(DirectOptions)
    assert direct.direct_running_mode == "multi_processing" and direct.direct_num_workers == 0
    direct = build_options("DirectRunner", ["--direct_num_workers=2"]).view_as(DirectOptions)
    assert direct.direct_num_workers == 2


# ----------------------------------------------------------------------------- report


def test_report_html() -> None:
    from afm.pipelines.curate.report import render_report

    manifest = {
        "source": "web", "runner": "DirectRunner", "inputs": ["a"], "elapsed_s": 1.0,
        "created_at": "now", "output": "/o", "config": {"source": "web"},
        "accounting": {"ok": True, "checks": 3, "problems": []},
        "totals": {"in": 3, "kept": 2, "rejected": 1},
        "funnel": [{"stage": "read", "status": "ready", "in": 3, "kept": 3, "dropped": 0,
                    "reasons": {}},
                   {"stage": "safety", "status": "ready", "in": 3, "kept": 2, "dropped": 1,
                    "reasons": {"profanity_terms": 1}}],
        "outputs": {"documents": [{"bytes": 10}]},
    }
    html = render_report(manifest, {"safety|profanity_terms": [
        {"id": "x", "url": "http://r/<b>", "text": "bad <words>", "details": None}]})
    assert "data:image/png;base64," in html and "profanity_terms" in html
    assert "&lt;words&gt;" in html and "<words>" not in html


def test_the_report_folds_its_sample_rejects_and_config(tmp_path) -> None:
    """Issue 56: written out, the samples' text made a report 21,733 px tall."""
    from afm.pipelines.curate.report import render_report
    from tests.browser import page_size

    funnel = [{"stage": f"stage{i}", "status": "ready", "in": 100, "kept": 90, "dropped": 10,
               "reasons": {f"reason{j}": 2 for j in range(5)}} for i in range(6)]
    manifest = {
        "source": "web", "runner": "DirectRunner", "inputs": ["a"], "elapsed_s": 1.0, "created_at": "now",
        "output": "/o", "config": {f"key{i}": {"a": i, "b": [1, 2, 3]} for i in range(60)},
        "accounting": {"ok": True, "checks": 3, "problems": []}, "totals": {"in": 100, "kept": 40, "rejected": 60},
        "funnel": funnel, "outputs": {"documents": [{"bytes": 10}]},
    }
    samples = {f"stage{i}|reason{j}": [{"id": f"d{k}", "text": "A long rejected page. " * 400, "details": None}
                                       for k in range(5)] for i in range(6) for j in range(5)}
    html = render_report(manifest, samples)
    assert html.count("<details>") == 31 and "[...]" in html  # 30 reasons and the config, previews cut
    (tmp_path / "report.html").write_text(html)
    width, height = page_size(tmp_path / "report.html", 1280)
    assert width <= 1280 and height < 6000, (width, height)


def test_cli_help_has_examples() -> None:
    from click.testing import CliRunner

    from afm.app.commands.pipelines.curate import curate_command

    result = CliRunner().invoke(curate_command, ["--help"])
    assert result.exit_code == 0 and "Examples:" in result.output
