"""Builders of WARC, JSONL and Parquet inputs, clean and damaged, for the reader tests."""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable

import pytest


def warc_record(url: str, body: bytes, rtype: str = "response", status: int = 200,
                date: str = "2024-05-01T12:00:00Z") -> bytes:
    """One uncompressed WARC record (header, HTTP message, trailer), written by hand so a
    test controls every byte (and so knows where each record starts and ends)."""
    if rtype == "response":
        http = (f"HTTP/1.1 {status} OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        ctype = "application/http; msgtype=response"
    elif rtype == "request":
        http = f"GET /{url.rsplit('/', 1)[-1]} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        ctype = "application/http; msgtype=request"
    else:
        http = body
        ctype = "application/warc-fields"
    head = (f"WARC/1.0\r\nWARC-Type: {rtype}\r\nWARC-Target-URI: {url}\r\n"
            f"WARC-Date: {date}\r\nWARC-Record-ID: <urn:uuid:{abs(hash((url, rtype))):032x}>\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {len(http)}\r\n\r\n").encode()
    return head + http + b"\r\n\r\n"


def page_html(i: int) -> bytes:
    return (f"<html><head><title>Page {i}</title></head><body><article><p>"
            + f"Paragraph {i} about orchards, bridges and libraries. " * 20
            + "</p></article></body></html>").encode()


@pytest.fixture
def make_warc() -> Callable[..., tuple[bytes, list[tuple[int, int]]]]:
    """``make_warc(n, gzip_per_record=True, requests=False)`` -> (file bytes, byte ranges
    of each record in the file)."""

    def build(n: int, gzip_per_record: bool = True, requests: bool = False
              ) -> tuple[bytes, list[tuple[int, int]]]:
        out = io.BytesIO()
        ranges = []
        for i in range(n):
            records = [warc_record(f"http://site.test/p{i}", page_html(i))]
            if requests:
                records.append(warc_record(f"http://site.test/p{i}", b"", rtype="request"))
            for rec in records:
                start = out.tell()
                out.write(gzip.compress(rec, mtime=0) if gzip_per_record else rec)
                ranges.append((start, out.tell()))
        return out.getvalue(), ranges

    return build
