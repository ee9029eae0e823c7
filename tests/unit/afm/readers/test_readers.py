"""The input boundary (afm.readers, crawler/warc_reader): every record of a damaged file
is met exactly once, as a record, a failure with its place, or a non-document.

Each observed case of issue 13 that lives in the reader is reproduced here: a truncated
gzip WARC (the partial last record was kept as a page), a few corrupt bytes in the middle
(warcio stopped, the rest vanished), a wrong Content-Length (16 of 20 records lost), a
corrupt gzip member in JSONL, a damaged Parquet row group.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from afm.readers import Failure, Record, Skipped, read_file


def _kinds(items: list) -> list[str]:
    return [type(i).__name__ if not isinstance(i, Failure) else f"Failure:{i.reason}"
            for i in items]


def _read(path: Path) -> list:
    return list(read_file(str(path)))


# --------------------------------------------------------------------------------- WARC


def test_clean_warc_gzip_and_plain(tmp_path: Path, make_warc) -> None:
    for gz in (True, False):
        data, _ = make_warc(5, gzip_per_record=gz, requests=True)
        path = tmp_path / ("a.warc.gz" if gz else "a.warc")
        path.write_bytes(data)
        items = _read(path)
        assert _kinds(items) == ["Record", "Skipped"] * 5
        pages = [i.value for i in items if isinstance(i, Record)]
        assert [p["url"] for p in pages] == [f"http://site.test/p{i}" for i in range(5)]
        assert all(p["status"] == 200 and b"orchards" in p["body"] for p in pages)
        assert pages[0]["fetched_at"].year == 2024


def test_truncated_gzip_warc_rejects_the_partial_record(tmp_path: Path, make_warc) -> None:
    """Issue 13: the partial last record of a truncated file was kept as a normal page."""
    data, ranges = make_warc(6)
    start, end = ranges[4]
    path = tmp_path / "t.warc.gz"
    path.write_bytes(data[: (start + end) // 2])  # cut inside record 4
    items = _read(path)
    assert _kinds(items) == ["Record"] * 4 + ["Failure:truncated"]
    tail = items[-1]
    assert tail.lost is None and tail.where.offset == start  # unknown loss, and where
    assert "records_lost" in tail.details() and tail.details()["records_lost"] == "unknown"


def test_truncated_plain_warc(tmp_path: Path, make_warc) -> None:
    data, ranges = make_warc(4, gzip_per_record=False)
    path = tmp_path / "t.warc"
    path.write_bytes(data[: ranges[3][1] - 3])  # inside the last record's trailer
    assert _kinds(_read(path)) == ["Record"] * 3 + ["Failure:truncated"]


def test_corrupt_bytes_in_the_middle_resynchronise(tmp_path: Path, make_warc) -> None:
    """Issue 13: warcio printed 'Error -3 while decompressing' and the rest vanished."""
    data, ranges = make_warc(10)
    bad = bytearray(data)
    start, end = ranges[4]
    for k in range(5):
        bad[(start + end) // 2 + k] ^= 0xFF
    path = tmp_path / "c.warc.gz"
    path.write_bytes(bytes(bad))
    items = _read(path)
    assert _kinds(items) == ["Record"] * 4 + ["Failure:corrupt_gzip"] + ["Record"] * 5
    assert items[4].where.offset == start and items[4].lost == 1
    assert [i.value["url"] for i in items if isinstance(i, Record)][4] == "http://site.test/p5"


def test_wrong_content_length_costs_one_record(tmp_path: Path, make_warc) -> None:
    """Issue 13: a WARC record with a wrong Content-Length lost 16 of 20 records."""
    for gz in (True, False):
        records, _ = make_warc(20, gzip_per_record=False)
        pieces = records.split(b"WARC/1.0\r\n")[1:]
        pieces = [b"WARC/1.0\r\n" + p for p in pieces]
        length = pieces[3].split(b"Content-Length: ")[1].split(b"\r\n")[0]
        for wrong in (int(length) - 7, int(length) + 900):
            damaged = list(pieces)
            damaged[3] = pieces[3].replace(b"Content-Length: " + length,
                                           b"Content-Length: " + str(wrong).encode(), 1)
            blob = b"".join(gzip.compress(p, mtime=0) if gz else p for p in damaged)
            path = tmp_path / ("w.warc.gz" if gz else "w.warc")
            path.write_bytes(blob)
            items = _read(path)
            assert _kinds(items) == ["Record"] * 3 + ["Failure:bad_content_length"] + \
                ["Record"] * 16, (gz, wrong)


def test_garbage_between_members_is_one_failure(tmp_path: Path, make_warc) -> None:
    data, ranges = make_warc(5)
    start, _ = ranges[2]
    bad = bytearray(data)
    bad[start] = 0x00  # the gzip magic of record 2
    path = tmp_path / "g.warc.gz"
    path.write_bytes(bytes(bad))
    assert _kinds(_read(path)) == ["Record", "Record", "Failure:garbage", "Record", "Record"]


def test_not_gzip_at_all_and_empty_files(tmp_path: Path) -> None:
    path = tmp_path / "x.warc.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"garbage" * 10)
    (item,) = _read(path)
    assert isinstance(item, Failure) and item.lost is None
    empty = tmp_path / "e.warc.gz"
    empty.write_bytes(b"")
    assert _read(empty) == []
    html = tmp_path / "h.warc"
    html.write_bytes(b"<html>not a warc</html>")
    (item,) = _read(html)
    assert isinstance(item, Failure) and item.reason in ("not_a_warc_record", "truncated")


def test_record_types(tmp_path: Path, make_warc) -> None:
    data, _ = make_warc(1, gzip_per_record=False)
    odd = data.replace(b"WARC-Type: response", b"WARC-Type: responsf", 1)
    dns = data.replace(b"application/http; msgtype=response", b"text/dns", 1)
    info = data.replace(b"WARC-Type: response", b"WARC-Type: warcinfo", 1)
    bad_http = data.replace(b"HTTP/1.1 200 OK", b"HTTP/1.1 2x0 OK", 1)
    path = tmp_path / "r.warc"
    path.write_bytes(data + odd + dns + info + bad_http)
    items = _read(path)
    assert _kinds(items)[:4] == ["Record", "Failure:unknown_record_type", "Skipped", "Skipped"]
    assert isinstance(items[2], Skipped) and items[2].what == "dns response"
    assert len(items) == 5  # the unparseable status line is a page (status 0) or a failure


def test_record_too_large_is_rejected_not_buffered(tmp_path: Path, make_warc) -> None:
    data, _ = make_warc(3, gzip_per_record=False)
    path = tmp_path / "big.warc"
    path.write_bytes(data)
    items = list(read_file(str(path), max_record_bytes=500))
    assert _kinds(items) == ["Failure:record_too_large"] * 3


def test_arc_file(tmp_path: Path) -> None:
    body = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>arc page</p>"
    header = b"filedesc://x.arc 0.0.0.0 20240501120000 text/plain 9\n1 0 afm\n\n"
    rec = f"http://a.test/ 1.2.3.4 20240501120000 text/html {len(body)}\n".encode() + body + b"\n"
    path = tmp_path / "x.arc"
    path.write_bytes(header + rec + b"garbage line that is not a header\n" + rec)
    items = _read(path)
    pages = [i.value for i in items if isinstance(i, Record)]
    assert len(pages) == 2 and pages[0]["body"] == b"<p>arc page</p>"
    assert pages[0]["url"] == "http://a.test/" and pages[0]["fetched_at"].year == 2024
    assert _kinds(items) == ["Skipped", "Record", "Failure:bad_header", "Record"]


# -------------------------------------------------------------------------------- JSONL


def test_jsonl_lines_each_met_once(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"text": "a"}\n\n   \nnot json\n{"text": "b\xff"}\n[1, 2]\n{"text": "c"}')
    items = _read(path)
    assert _kinds(items) == ["Record", "Failure:bad_json", "Record", "Record", "Record"]
    assert items[1].where.line == 4
    assert items[2].notes == ("utf8_repaired",) and items[2].value["text"] == "b\ufffd"
    assert items[4].value == {"text": "c"}  # last line without a newline is complete


def test_jsonl_gz_corrupt_member_resynchronises(tmp_path: Path) -> None:
    lines = [json.dumps({"text": f"line {i}"}).encode() + b"\n" for i in range(6)]
    members = [gzip.compress(line, mtime=0) for line in lines]
    bad = bytearray(members[2])
    bad[len(bad) // 2] ^= 0xFF
    members[2] = bytes(bad)
    path = tmp_path / "m.jsonl.gz"
    path.write_bytes(b"".join(members))
    items = _read(path)
    assert _kinds(items) == ["Record", "Record", "Failure:corrupt_gzip", "Record", "Record",
                             "Record"]
    assert [i.value["text"] for i in items if isinstance(i, Record)] == \
        ["line 0", "line 1", "line 3", "line 4", "line 5"]


def test_jsonl_gz_truncated_tail(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(json.dumps({"text": f"line {i} " * 30}).encode() + b"\n"
                                  for i in range(50)), mtime=0)
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    items = _read(path)
    assert isinstance(items[-1], Failure) and items[-1].reason == "truncated"
    assert items[-1].lost is None
    assert all(isinstance(i, Record) for i in items[:-1]) and 0 < len(items) - 1 < 50


def test_jsonl_deeply_nested_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n" + '{"text": "ok"}\n')
    assert _kinds(_read(path)) == ["Failure:bad_json", "Record"]


# ------------------------------------------------------------------------------ Parquet


def _parquet(path: Path, n: int, row_group: int) -> bytes:
    table = pa.table({"id": [str(i) for i in range(n)], "text": [f"text {i} " * 40 for i in range(n)]})
    pq.write_table(table, path, row_group_size=row_group, compression="none")
    return path.read_bytes()


def test_parquet_damaged_row_group_keeps_the_count(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    data = bytearray(_parquet(path, 30, 10))
    meta = pq.read_metadata(path)
    col = meta.row_group(1).column(1)
    start = col.data_page_offset
    data[start : start + 40] = b"\xff" * 40  # the page header of row group 1's text
    path.write_bytes(bytes(data))
    items = _read(path)
    assert len(items) == 30
    kinds = _kinds(items)
    assert kinds[:10] == ["Record"] * 10 and kinds[20:] == ["Record"] * 10
    assert kinds[10:20] == ["Failure:unreadable_row_group"] * 10
    assert [i.where.row for i in items] == list(range(30))


def test_parquet_unreadable_footer(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    data = _parquet(path, 10, 5)
    path.write_bytes(data[:-20])
    (item,) = _read(path)
    assert item.reason == "unreadable_file" and item.lost is None


def test_missing_file_is_a_failure(tmp_path: Path) -> None:
    (item,) = list(read_file(str(tmp_path / "gone.jsonl")))
    assert item.reason == "unreadable_file"


def test_read_records_is_strict(tmp_path: Path) -> None:
    from afm.io import read_records

    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"text": "a"}\n{broken\n')
    it = read_records(path)
    assert next(it) == {"text": "a"}
    try:
        next(it)
    except ValueError as exc:
        assert "d.jsonl:2" in str(exc) and "bad_json" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("a bad line must raise in strict mode")
