"""One representation of HTTP headers that keeps every field line (afm/headers.py), and
the WARC reader that hands it on instead of a dict that keeps only the last line."""

from __future__ import annotations

import io

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from afm.headers import Headers, list_members, unfold
from afm.pipelines.beam.coerce import classify
from afm.readers import Record
from afm.readers.warc import read_warc


def test_repeated_field_lines_are_one_list():
    """RFC 9110 5.3: "A recipient MAY combine multiple field lines within a field section
    that have the same field name into one field line, without changing the semantics of
    the message, by appending each subsequent field line value to the initial field line
    value in order, separated by a comma"."""
    two = Headers([("X-Robots-Tag", "noai"), ("x-robots-tag", "noarchive")])
    one = Headers([("X-Robots-Tag", "noai, noarchive")])
    assert two.lines("X-Robots-Tag") == ["noai", "noarchive"]
    assert two.combined("x-robots-tag") == one.combined("X-Robots-Tag") == "noai, noarchive"
    assert two.members("X-Robots-Tag") == one.members("X-Robots-Tag") == ["noai", "noarchive"]
    assert two.get("X-Robots-Tag") == "noai" and two.combined("absent") is None
    assert "X-ROBOTS-TAG" in two and "Location" not in two


def test_list_syntax_keeps_quoted_commas_and_drops_empty_elements():
    """RFC 9110 5.6.1: empty list elements do not count ("a recipient MUST accept ...
    ``foo,bar``, ``foo ,bar,``, ``foo , ,bar,charlie``"), and 5.6.4's quoted strings
    hold commas (its example ``"http://example.com/a.html,foo"``)."""
    assert list_members("foo ,bar,") == ["foo", "bar"]
    assert list_members("foo , ,bar,charlie") == ["foo", "bar", "charlie"]
    assert list_members('"http://example.com/a.html,foo", "http://without-a-comma.example.com/"') == [
        '"http://example.com/a.html,foo"', '"http://without-a-comma.example.com/"']


def test_obsolete_line_folding_is_one_space():
    """RFC 9112 5.2: "A user agent that receives an obs-fold in a response message ...
    MUST replace each received obs-fold with one or more SP octets"."""
    assert unfold("1,\r\n 1") == "1, 1"
    assert Headers([("tdm-reservation", "1,\r\n\t1")]).members("tdm-reservation") == ["1", "1"]


def test_headers_of_every_record_shape():
    assert Headers.of({"X-Robots-Tag": ["noai", "noarchive"]}).lines("x-robots-tag") == [
        "noai", "noarchive"]
    assert Headers.of([["A", "b"], ("A", "c")]).pairs() == [["A", "b"], ["A", "c"]]
    assert len(Headers.of(None)) == 0 and len(Headers.of(7)) == 0


def _warc(records: list[tuple[str, list[tuple[str, str]], dict[str, str]]]) -> bytes:
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for url, headers, warc_fields in records:
        body = b"<html><body>x</body></html>"
        http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(
            url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http,
            warc_headers_dict={"WARC-Date": "2025-01-01T00:00:00Z", **warc_fields}))
    return buf.getvalue()


def test_warc_reader_keeps_every_field_line_and_the_stored_decision():
    data = _warc([("https://a.example/", [("Content-Type", "text/html"),
                                          ("X-Robots-Tag", "noai"), ("X-Robots-Tag", "noarchive")],
                   {"AFM-Training-Use": "optout", "AFM-Training-Evidence": "[]"}),
                  ("https://b.example/", [("Content-Type", "text/html")],
                   {"WARC-Truncated": "length"})])
    pages = [i.value for i in read_warc(io.BytesIO(data), "x.warc.gz") if isinstance(i, Record)]
    first, second = pages
    assert Headers.of(first["headers"]).lines("X-Robots-Tag") == ["noai", "noarchive"]
    assert first["training_use"] == "optout" and first["training_evidence"] == "[]"
    assert "warc_truncated" not in first
    assert second["warc_truncated"] == "length"  # WARC 1.1 5.13
    # coerce (JSONL / Parquet crawl records) keeps the lines and the stored decision too
    out = classify({"url": "https://a.example/", "body": b"x", "training_use": "optout",
                    "headers": {"X-Robots-Tag": ["noai", "noarchive"]}}, "web")
    assert out.value["headers"] == [["X-Robots-Tag", "noai"], ["X-Robots-Tag", "noarchive"]]
    assert out.value["training_use"] == "optout"
