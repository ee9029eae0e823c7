"""The curate bench's steady-state costs: two runs' manifests differenced, so start-up (the
runner's and each stage's) is left out of the per-document figures."""

from __future__ import annotations

import json

import pytest

from afm.app.bench.pipelines.curate import BEYOND_STAGES, steady_costs


def _manifest(tmp_path, name: str, docs: int, stage_cpu: dict[str, float], process: float) -> str:
    stages = [{"stage": s, "cpu_s": c, "documents": docs, "ms_per_document": 1000 * c / docs}
              for s, c in stage_cpu.items()]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"costs": {"stages": stages, "stages_cpu_s": sum(stage_cpu.values()),
                                          "process_cpu_s": process}}))
    return str(path)


def test_steady_costs_leave_start_up_out(tmp_path) -> None:
    # each run: 2 s of start-up in the process and 0.5 s of model loading in "extract";
    # per document 1 ms read, 7 ms extract and 2 ms beyond the stages
    small = _manifest(tmp_path, "small", 100, {"read": 0.1, "extract": 0.5 + 0.7}, 2.0 + 0.1 + 1.2 + 0.2)
    big = _manifest(tmp_path, "big", 1100, {"read": 1.1, "extract": 0.5 + 7.7}, 2.0 + 1.1 + 8.2 + 2.2)
    costs = steady_costs(small, big)
    assert costs["read"] == pytest.approx(1.0)
    assert costs["extract"] == pytest.approx(7.0)
    assert costs["all stages"] == pytest.approx(8.0)
    assert costs[BEYOND_STAGES] == pytest.approx(2.0)
    assert costs["the whole process"] == pytest.approx(10.0)


def test_steady_costs_without_the_process_figures_give_the_stages_only(tmp_path) -> None:
    # a cluster runner's manifest has no process CPU (its workers are elsewhere)
    small = _manifest(tmp_path, "small", 100, {"read": 0.1}, 1.0)
    big = _manifest(tmp_path, "big", 1100, {"read": 1.1}, 3.0)
    for path in (small, big):
        data = json.loads(open(path).read())
        del data["costs"]["process_cpu_s"]
        open(path, "w").write(json.dumps(data))
    costs = steady_costs(small, big)
    assert costs["all stages"] == pytest.approx(1.0)
    assert BEYOND_STAGES not in costs


def test_real_pages_are_written_with_urls_a_crawler_would_record(tmp_path, caplog) -> None:
    """Gold page ids with spaces (Utomo & Leu's "robot (1)") become escaped URLs, so reading
    the bench's files costs no per-record warning (warcio logs one for every raw space)."""
    from afm.app.bench.pipelines.curate import build_real_corpus
    from afm.filters.extraction.gold import GoldPage
    from afm.readers.warc import iter_warc_pages

    body = b"<html><body><p>text</p></body></html>"
    pages = [GoldPage("utomo-chaos", "chaos-all/robot (1)", None, body),
             GoldPage("wcxb", "x", "https://example.org/a b?q=%5B1%5D&r=\u00e9", body),
             GoldPage("wcxb", "y", "https://b\u00fccher.de:8080/caf\u00e9#top", body)]
    small, big = build_real_corpus(pages, tmp_path)
    with caplog.at_level("WARNING"):
        urls = sorted(p["url"] for f in sorted(big.glob("*.warc.gz")) for p in iter_warc_pages(str(f)))
    assert urls == ["http://utomo-chaos.gold.test/chaos-all/robot%20(1)",
                    "https://example.org/a%20b?q=%5B1%5D&r=%C3%A9",
                    "https://xn--bcher-kva.de:8080/caf%C3%A9"]  # requested, as the crawler does, without its fragment
    assert not [r for r in caplog.records if "WARC-Target-URI" in r.getMessage()]
