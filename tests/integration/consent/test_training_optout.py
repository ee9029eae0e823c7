"""Training opt-out end to end: a local multi-host crawl records each page's training use
with its evidence and keeps every robots.txt / tdmrep.json it fetched; after one host opts
out, ``afm robots snapshots`` + ``afm curate`` reject exactly the opted-out hosts' pages.
A WARC from another crawler plus a robots.txt snapshot WARC gets the same rule."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from afm.app.commands.crawler.crawl import robots_group
from afm.crawler.api import crawl
from afm.crawler.storage.warc import read_index
from afm.crawler.testsite import LocalSites, Page

TEXT = {"Content-Type": "text/plain"}
JSON = {"Content-Type": "application/json"}
LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
SPLIT = "User-agent: afmbot-extended\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
PARA = ("<p>This page has a long enough paragraph about the weather in the valley, the "
        "river that floods in spring and the bridge that the town rebuilt last year, so "
        "that extraction keeps it as a document of its own.</p>")


def _write_warc(path: Path, ctype: str, records: list) -> Path:
    """A WARC written by another crawler (warcio), one gzip member per record."""
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for url, body, when in records:
            http = StatusAndHeaders("200 OK", [("Content-Type", ctype)], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http,
                warc_headers_dict={"WARC-Date": when.strftime("%Y-%m-%dT%H:%M:%SZ")}))
    return path


def _page(title: str, links: str = "") -> str:
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{PARA * 3}{links}</body></html>"


def _sites(state: dict) -> dict:
    def later_robots(path: str, headers: dict) -> Page:
        return Page(state["later"], headers=TEXT)

    return {
        "plain": {"/robots.txt": Page("User-agent: *\nAllow: /\n", headers=TEXT),
                  "/": Page(_page("plain", '<a href="/two">2</a>')), "/two": Page(_page("two"))},
        "split": {"/robots.txt": Page(SPLIT, headers=TEXT),
                  "/": Page(_page("split", '<a href="/two">2</a>')), "/two": Page(_page("s2"))},
        "tdmhdr": {"/": Page(_page("tdm header"), headers={"Content-Type": "text/html",
                                                           "tdm-reservation": "1"})},
        "tdmfile": {"/.well-known/tdmrep.json": Page(
                        '[{"location": "/reserved/*", "tdm-reservation": 1}]', headers=JSON),
                    "/": Page(_page("tdm file", '<a href="/reserved/a">a</a>')),
                    "/reserved/a": Page(_page("reserved"))},
        "noai": {"/": Page(_page("noai", "") .replace(
            "<head>", '<head><meta name="robots" content="noai">'))},
        "later": {"/robots.txt": later_robots, "/": Page(_page("later"))},
    }


def test_crawl_records_training_use_and_curate_applies_later_optouts(tmp_path: Path) -> None:
    from afm.pipelines.curate.pipeline import run_curate

    state = {"later": "User-agent: *\nAllow: /\n"}
    spec = _sites(state)
    with LocalSites(spec) as sites:
        seeds = [sites.url(h, "/") for h in spec]
        summary = crawl(seeds, tmp_path / "crawl", max_pages=50, allow_private=True,
                        user_agent="afmbot")
        assert summary["pages"] == 9
        assert summary["training_optout"] == 5
        fetched = sites.requests
        # tdmrep.json: once per host, like robots.txt
        for host in spec:
            assert sum(1 for h, p, _ in fetched if h == host and p == "/.well-known/tdmrep.json") == 1
        by_host: dict[str, list[dict]] = {}
        for row in read_index(tmp_path / "crawl"):
            host = sites.host_of(row["url"].split("/")[2].split(":")[0])
            by_host.setdefault(host, []).append(row)
        uses = {h: sorted(r["training_use"] for r in rs) for h, rs in by_host.items()}
        assert uses == {"plain": ["allowed", "allowed"], "split": ["optout", "optout"],
                        "tdmhdr": ["optout"], "tdmfile": ["allowed", "optout"],
                        "noai": ["optout"], "later": ["allowed"]}
        ev = json.loads(by_host["split"][0]["training_evidence"])
        assert ev[0]["signal"] == "robots.txt" and ev[0]["rule"] == "Disallow: /"
        assert ev[0]["file"].endswith("/robots.txt") and ev[0]["fetched_at"]
        reserved = [r for r in by_host["tdmfile"] if r["url"].endswith("/reserved/a")][0]
        assert json.loads(reserved["training_evidence"])[0]["source"] == "tdmrep.json"

        # the opt-out added after the crawl: a later fetch snapshots it
        state["later"] = SPLIT
        crawl([sites.url("later", "/robots.txt")], tmp_path / "recheck", max_pages=1,
              allow_private=True, user_agent="afmbot")
        later_host = sites.base_url("later")
        split_host = sites.base_url("split")

    snaps = list((tmp_path / "crawl" / "robotstxt" / "warc").glob("*.warc.gz"))
    assert snaps, "the crawl keeps its robots.txt / tdmrep.json responses"
    result = CliRunner().invoke(robots_group, ["snapshots", "--out", str(tmp_path / "store"),
                                               str(tmp_path / "crawl"), str(tmp_path / "recheck")])
    assert result.exit_code == 0, result.output
    store_manifest = json.loads((tmp_path / "store" / "manifest.json").read_text())
    assert store_manifest["hosts"] == 6 and store_manifest["superseded"] >= 1

    cfg = {"stages": ["optout", "extract"],
           "optout": {"params": {"snapshots": [str(tmp_path / "store")]}}}
    manifest = run_curate([str(tmp_path / "crawl")], tmp_path / "out", config=cfg,
                          pipeline_args=LOCAL, quiet=True)
    optout = next(s for s in manifest["funnel"] if s["stage"] == "optout")
    assert optout["reasons"] == {"optout": 6}
    rejects = [r for f in (tmp_path / "out").glob("rejects-*.parquet")
               for r in pq.read_table(f).to_pylist() if r["rejected_by"] == "optout"]
    hosts = sorted(r["url"].split("/")[2] for r in rejects)
    assert hosts.count(later_host.split("/")[2]) == 1  # opted out after the crawl
    assert hosts.count(split_host.split("/")[2]) == 2
    later = next(r for r in rejects if r["url"].startswith(later_host))
    evidence = json.loads(later["details"])["evidence"]
    assert evidence[0]["signal"] == "robots.txt" and evidence[0]["agent"] == "afmbot-extended"
    # the robotstxt/ snapshot WARCs are control files, never curated as pages
    assert not any("robotstxt" in f for f in manifest["inputs"])

    # switched off: nothing is rejected for opt-out
    off = dict(cfg, optout={"enabled": False})
    manifest = run_curate([str(tmp_path / "crawl")], tmp_path / "out-off", config=off,
                          pipeline_args=LOCAL, quiet=True)
    assert next(s for s in manifest["funnel"] if s["stage"] == "optout")["dropped"] == 0


def test_curate_another_crawlers_warc_with_a_robots_snapshot_warc(tmp_path: Path) -> None:
    """Common Crawl's layout: page WARCs, and robots.txt WARCs taken at other times."""
    import datetime as dt

    from afm.app.commands.pipelines.curate import curate_command

    when = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    page = _page("a page").encode()
    pages = _write_warc(tmp_path / "CC-MAIN-00000.warc.gz", "text/html", [
        ("https://open.example/a", page, when),
        ("https://closed.example/a", page, when),
        ("https://closed.example/b", page, when),
    ])
    robots = _write_warc(tmp_path / "CC-robotstxt-00000.warc.gz", "text/plain", [
        ("https://open.example/robots.txt", b"User-agent: *\nAllow: /\n", when),
        ("https://closed.example/robots.txt", SPLIT.encode(), when),
    ])
    result = CliRunner().invoke(curate_command, [
        "--input", str(pages), "--output", str(tmp_path / "out"), "--robots-snapshots",
        str(robots), "--set", "stages=[optout,extract]", *LOCAL])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    optout = next(s for s in manifest["funnel"] if s["stage"] == "optout")
    assert (optout["in"], optout["dropped"], optout["reasons"]) == (3, 2, {"optout": 2})
    rejects = [r for f in (tmp_path / "out").glob("rejects-*.parquet")
               for r in pq.read_table(f).to_pylist() if r["rejected_by"] == "optout"]
    assert sorted(r["url"] for r in rejects) == ["https://closed.example/a",
                                                 "https://closed.example/b"]


def test_bad_snapshot_sources_are_one_line_errors(tmp_path: Path) -> None:
    """Missing or unreadable snapshots stop `afm curate` before any work, in one line."""
    import datetime as dt

    from afm.app.cli import main

    when = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    pages = _write_warc(tmp_path / "pages.warc.gz", "text/html",
                        [("https://a.example/x", _page("x").encode(), when)])
    robots = _write_warc(tmp_path / "robots.warc.gz", "text/plain",
                         [("https://a.example/robots.txt", SPLIT.encode(), when)])
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(robots.read_bytes() + robots.read_bytes()[:30])
    for source, needle in ((tmp_path / "nowhere", "not found"), (cut, "cannot be read")):
        result = CliRunner().invoke(main, [
            "curate", "--input", str(pages), "--output", str(tmp_path / "out"),
            "--robots-snapshots", str(source), "--set", "stages=[optout,extract]", *LOCAL])
        assert result.exit_code != 0, result.output
        assert "Traceback" not in result.output
        errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert errors and needle in " ".join(result.output.split()), result.output
        assert not (tmp_path / "out" / "_SUCCESS").exists()
    result = CliRunner().invoke(main, ["robots", "snapshots", "--out", str(tmp_path / "s"),
                                       str(cut)])
    assert result.exit_code != 0 and "cannot be read" in " ".join(result.output.split())
