"""``afm curate --urls`` (fetch and curate as one Beam job) against ``afm fetch`` then ``afm
curate --input`` on one loopback web (the fetch tests' mixed web,
:func:`afm.app.bench.crawler.fetch.mixed_web`: every kind of host once — disallowing,
Crawl-delay, opting out of training by each signal the crawler reads, slow, failing,
redirecting, robots.txt unavailable or behind a redirect): the same pages kept, the same
rejected with the same stage and reason (the optout stage's included, reading the fetch's
snapshots and stored decisions); the manifest accounts for URLs in = outcomes and pages
fetched = pages read = kept + rejected; the fetch's own outputs are under ``OUTPUT/fetch/``,
and a rerun resumes it (no page asked again)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from afm.app.bench.crawler.fetch import KINDS, mixed_web, serve, web_urls

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
FETCH = {"allow_private": True, "host_interval": 0.05, "retry_times": 1, "download_timeout": 5}
# The mixed web's pages are one short template: the Gopher rules would reject every one.
CURATE = {"decontaminate": {"enabled": False}, "quality": {"enabled": False},
          "output": {"shard_target_mb": 1.0}}


def outcome(manifest: dict[str, Any]) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """Kept URLs; rejected URL -> (stage, reason)."""
    kept = {r["url"] for f in manifest["outputs"]["documents"] for r in pq.read_table(f["path"]).to_pylist()}
    rejected = {r["url"]: (r["rejected_by"], r["reason"])
                for f in manifest["outputs"]["rejects"] for r in pq.read_table(f["path"]).to_pylist()}
    return kept, rejected


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from afm.pipelines.curate.from_urls import run_curate_urls
    from afm.pipelines.curate.pipeline import run_curate
    from afm.pipelines.fetch.pipeline import run_fetch

    tmp = tmp_path_factory.mktemp("curate-urls")
    web = mixed_web(len(KINDS), 3, delay=0.3)
    site = serve(web)
    try:
        urls = web_urls(site, web)
        (tmp / "urls.txt").write_text("\n".join(urls) + "\n")
        joint = run_curate_urls([str(tmp / "urls.txt")], str(tmp / "joint"), config=CURATE,
                                fetch_config=FETCH, pipeline_args=LOCAL, quiet=True)
        asked = len(site.requests)
        rerun = run_curate_urls([str(tmp / "urls.txt")], str(tmp / "joint"), config=CURATE,
                                fetch_config=FETCH, pipeline_args=LOCAL, quiet=True, overwrite=True)
        asked_again = site.requests[asked:]
        fetched = run_fetch([str(tmp / "urls.txt")], str(tmp / "fetched"), config=FETCH,
                            pipeline_args=LOCAL, quiet=True)
        separate = run_curate([str(tmp / "fetched")], tmp / "separate", config=CURATE,
                              pipeline_args=LOCAL, quiet=True)
    finally:
        site.stop()
    return {"tmp": tmp, "urls": urls, "joint": joint, "rerun": rerun, "asked_again": asked_again,
            "fetched": fetched, "separate": separate}


def test_one_job_keeps_and_rejects_what_fetch_then_curate_does(runs) -> None:
    kept, rejected = outcome(runs["joint"])
    kept_sep, rejected_sep = outcome(runs["separate"])
    assert kept == kept_sep and kept
    assert rejected == rejected_sep
    # the optout stage decided from the fetch's snapshots and stored decisions, as it does
    # for the crawl directory
    assert any(stage == "optout" for stage, _ in rejected.values())
    assert runs["joint"]["stage_reports"].get("optout") == runs["separate"]["stage_reports"].get("optout")


def test_the_manifest_accounts_for_urls_and_pages(runs) -> None:
    m, f = runs["joint"], runs["joint"]["fetch"]
    assert f["urls_in"] == f["outcomes_out"] == len(runs["urls"])
    assert f["outcomes"] == runs["fetched"]["outcomes"]
    assert f["pages"] == f["pages_read"] == runs["fetched"]["pages"] == m["counts"]["read.pages"]
    assert m["totals"]["in"] == m["totals"]["kept"] + m["totals"]["rejected"] == f["pages"]
    assert f["accounting_ok"] and m["accounting"]["ok"]


def test_the_fetch_outputs_stay_under_the_output_and_a_rerun_resumes(runs) -> None:
    fetch = runs["tmp"] / "joint" / "fetch"
    for name in ("warc", "index", "robotstxt", "state", "report", "summary.json"):
        assert (fetch / name).exists(), name
    summary = json.loads((fetch / "summary.json").read_text())
    assert summary["urls_in"] == len(runs["urls"])
    rerun = runs["rerun"]["fetch"]
    # every URL ended by the first run but those a rerun asks again (none on this web's
    # final outcomes but robots.txt 503), and the same corpus
    assert rerun["resumed"] >= rerun["urls_in"] - summary["outcomes"].get("robots_unavailable", 0)
    assert outcome(runs["rerun"]) == outcome(runs["joint"])
    # the server's log: no page asked again, only robots.txt of the host that was unavailable
    assert {p for _h, p, _t in runs["asked_again"]} <= {"/robots.txt"}


def test_urls_and_input_are_mutually_exclusive(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from afm.app.cli import main

    (tmp_path / "urls.txt").write_text("http://example.com/\n")
    res = CliRunner().invoke(main, ["curate", "--urls", str(tmp_path / "urls.txt"), "--input",
                                    str(tmp_path), "--output", str(tmp_path / "out")])
    assert res.exit_code != 0
    assert "--urls and --input are mutually exclusive" in res.output
    assert "Traceback" not in res.output
