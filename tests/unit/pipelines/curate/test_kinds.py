"""What each stage kept and rejected, by kind: the keys, the table, the report section."""

from __future__ import annotations

from afm.pipelines.curate.kinds import by_kind, kind_keys, length_band, report_html


def test_keys_of_a_record():
    doc = {"source": "web", "language": "en", "text": "x" * 600, "page_type": "forum"}
    keys = dict(kind_keys(doc, "quality", "rejected"))
    assert set(keys) == {"quality\x1fsource\x1fweb\x1frejected", "quality\x1flanguage\x1fen\x1frejected",
                         "quality\x1flength\x1f500-2k\x1frejected", "quality\x1fpage_type\x1fforum\x1frejected"}
    page = {"url": "http://a/", "body": b"<html>"}
    assert ("optout\x1flength\x1f(page)\x1fkept", 1) in kind_keys(page, "optout", "kept")
    assert "page_type" not in "".join(k for k, _ in kind_keys({"text": ""}, "s", "kept"))
    assert [length_band(t) for t in ("", "a", "a" * 2000, "a" * 60_000)] == ["empty", "< 500", "2k-10k", ">= 50k"]


def test_table_and_report_show_which_kind_a_stage_eats():
    counts = {}
    for stage, value, outcome, n in (("language", "forum", "kept", 10), ("quality", "forum", "rejected", 8),
                                     ("quality", "forum", "kept", 2), ("quality", "article", "kept", 20),
                                     ("language", "article", "kept", 20)):
        counts["\x1f".join((stage, "page_type", value, outcome))] = n
    table = by_kind(counts, ["language", "quality"])
    assert list(table) == ["page_type"] and list(table["page_type"]) == ["article", "forum"]
    assert table["page_type"]["forum"]["quality"] == {"kept": 2, "rejected": 8}
    html = report_html(table)
    assert "by page type" in html and '<td class="bad">8 / 10 (80%)</td>' in html
    assert "0 / 20 (0%)" in html and report_html({}) == ""
