"""Consent end to end: a local crawl whose pages send repeated and folded header fields,
then ``afm curate`` on the crawl rejects exactly the opted-out pages, agreeing with the
decision the crawler stored on each record.

RFC 9110 section 5.3: "A recipient MAY combine multiple field lines within a field
section that have the same field name into one field line, without changing the
semantics of the message" - so ``X-Robots-Tag: noai`` + ``X-Robots-Tag: noarchive`` and
``tdm-reservation: 1, 1`` mean what a single ``noai`` / ``1`` means. RFC 9112 section
5.2: an obsolete line fold is replaced by a space. The usage preferences are the IETF
drafts' (draft-ietf-aipref-attach-05 section 2: ``Content-Usage: train-ai=n``) and
Cloudflare's managed robots.txt (``Content-signal: search=yes, ai-train=no``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from afm.crawler.api import crawl
from afm.crawler.storage.warc import read_index
from afm.crawler.testsite import LocalSites, Page

LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
TEXT = {"Content-Type": "text/plain"}
HTML = ("Content-Type", "text/html; charset=utf-8")
PARA = ("<p>This page has a long enough paragraph about the weather in the valley, the "
        "river that floods in spring and the bridge that the town rebuilt last year, so "
        "that extraction keeps it as a document of its own.</p>")
CLOUDFLARE_MANAGED = ("User-Agent: *\nContent-signal: search=yes, ai-train=no\nAllow: /\n\n"
                      "User-agent: GPTBot\nDisallow: /\n")


def _page(title: str, headers: list[tuple[str, str]]) -> Page:
    body = f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{PARA * 3}</body></html>"
    return Page(body, headers=[HTML, *headers])


def _sites() -> tuple[dict, set[str], set[str]]:
    """Hosts, the hosts every policy opts out, and those only the AI-training preset does."""
    sites = {
        "plain": {"/": _page("plain", [("X-Robots-Tag", "noarchive")])},
        "twolines": {"/": _page("two lines", [("X-Robots-Tag", "noai"),
                                              ("X-Robots-Tag", "noarchive")])},
        "tdmtwice": {"/": _page("tdm twice", [("tdm-reservation", "1"),
                                              ("tdm-reservation", "1")])},
        "tdmcombined": {"/": _page("tdm combined", [("tdm-reservation", "1, 1")])},
        "obsfold": {"/": _page("obs-fold", [("X-Robots-Tag", "noarchive,\r\n noai")])},
        "usage": {"/": _page("content usage", [("Content-Usage", "search=y"),
                                               ("Content-Usage", "train-ai=n")])},
        "signals": {"/robots.txt": Page(CLOUDFLARE_MANAGED, headers=TEXT),
                    "/": _page("content signal", [])},
        "gptonly": {"/robots.txt": Page("User-agent: GPTBot\nDisallow: /\n", headers=TEXT),
                    "/": _page("gpt only", [])},
    }
    always = {"twolines", "tdmtwice", "tdmcombined", "obsfold", "usage", "signals"}
    return sites, always, {"gptonly"}


def _crawl_and_curate(tmp_path: Path, name: str, agents: list[str]) -> tuple[dict, dict, dict]:
    """Crawl the sites with ``training_agents=agents``, curate with the same setting;
    returns (host -> stored use, host -> curate reason or None, the curate manifest)."""
    from afm.pipelines.curate.pipeline import run_curate

    spec, _, _ = _sites()
    with LocalSites(spec) as sites:
        summary = crawl([sites.url(h, "/") for h in spec], tmp_path / name, max_pages=40,
                        allow_private=True, user_agent="afmbot",
                        config={"training_agents": agents})
        assert summary["pages"] == len(spec)
        host_of = {sites.base_url(h).split("//")[1]: h for h in spec}
    stored = {host_of[r["url"].split("/")[2]]: r["training_use"]
              for r in read_index(tmp_path / name)}
    cfg = {"stages": ["optout", "extract"], "optout": {"params": {"training_agents": agents}}}
    manifest = run_curate([str(tmp_path / name)], tmp_path / f"{name}-out", config=cfg,
                          pipeline_args=LOCAL, quiet=True)
    rejects = [r for f in (tmp_path / f"{name}-out").glob("rejects-*.parquet")
               for r in pq.read_table(f).to_pylist() if r["rejected_by"] == "optout"]
    curated = dict.fromkeys(spec)
    for r in rejects:
        curated[host_of[r["url"].split("/")[2]]] = r["reason"]
        assert "disagreement" not in json.loads(r["details"]), r
    return stored, curated, manifest


def test_repeated_and_folded_headers_opt_out_in_the_crawler_and_in_curate(tmp_path: Path) -> None:
    _, always, preset_only = _sites()
    stored, curated, manifest = _crawl_and_curate(tmp_path, "own", ["afmbot-extended"])
    assert {h for h, use in stored.items() if use == "optout"} == always
    assert {h for h, reason in curated.items() if reason} == always
    assert set(curated[h] for h in always) == {"optout"}
    cost = manifest["stage_reports"]["optout"]
    assert cost["pages"] == len(always) and cost["hosts"] == len(always)
    assert cost["words"] > 0 and 0 < cost["share_of_words"] < 1
    assert cost["by_signal"]["noai"]["pages"] == 2  # the two-line and the folded X-Robots-Tag
    assert cost["by_signal"]["tdm-reservation"]["pages"] == 2
    assert cost["by_signal"]["content-usage"]["pages"] == 1
    assert cost["by_signal"]["content-signal"]["pages"] == 1
    assert cost["disagreements"] == {}
    assert "What opting out cost" in (tmp_path / "own-out" / "report.html").read_text()

    # One setting honours what the publisher said to any AI crawler: GPTBot's group too.
    stored, curated, _ = _crawl_and_curate(tmp_path, "preset", ["preset:ai-training"])
    assert {h for h, use in stored.items() if use == "optout"} == always | preset_only
    assert {h for h, reason in curated.items() if reason} == always | preset_only
