"""WARC store (rotation, temp names, index, recovery)."""

from __future__ import annotations

from afm.crawler.storage.warc import WarcStore, iter_warc_responses, read_index
from afm.headers import Headers


def test_warc_rotation_index_and_reader(tmp_path):
    store = WarcStore(tmp_path, max_bytes=2000)
    for i in range(10):
        store.write(f"http://h/{i}", 200, [("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
                    f"page {i} ".encode() * 50, request_url=f"http://h/{i}")
    open_files = list((tmp_path / "warc").glob(".*.open"))
    assert len(open_files) == 1  # the file being written is never under its final name
    store.close()
    assert not list((tmp_path / "warc").glob(".*.open"))
    files = sorted((tmp_path / "warc").glob("*.warc.gz"))
    assert len(files) > 1  # rotated by size
    rows = read_index(tmp_path)
    assert sorted(r["url"] for r in rows) == sorted(f"http://h/{i}" for i in range(10))
    pages = [p for f in files for p in iter_warc_responses(f)]
    assert len(pages) == 10
    first = next(p for p in pages if p["url"] == "http://h/0")
    assert first["status"] == 200 and first["body"] == b"page 0 " * 50
    assert "X-Crawler-Content-Encoding" in Headers.of(first["headers"])  # stored body is decoded
    assert first["fetched_at"].tzinfo is not None
    # the index offset points at the response record
    row = next(r for r in rows if r["url"] == "http://h/3")
    with open(tmp_path / "warc" / row["warc_file"], "rb") as fh:
        fh.seek(row["offset"])
        from warcio.archiveiterator import ArchiveIterator

        record = next(iter(ArchiveIterator(fh)))
        assert record.rec_headers.get_header("WARC-Target-URI") == "http://h/3"


def test_recovery_drops_open_file_and_reindexes(tmp_path):
    store = WarcStore(tmp_path, max_bytes=10**9)
    store.write("http://h/a", 200, [], b"a")
    store.rotate()
    store.write("http://h/b", 200, [], b"b")  # left open: a crash
    shard = next((tmp_path / "index").glob("*.parquet"))
    original = read_index(tmp_path)
    shard.unlink()  # crash between rename and index write
    result = WarcStore(tmp_path).recover()
    assert result == {"dropped_open_files": 1, "reindexed": 1}
    rebuilt = read_index(tmp_path)
    assert [r["url"] for r in rebuilt] == ["http://h/a"]
    assert (rebuilt[0]["offset"], rebuilt[0]["length"]) == (original[0]["offset"], original[0]["length"])


def test_recovery_reads_a_bad_date_as_every_reader_does(tmp_path):
    """Re-indexing goes through the one WARC reader: a WARC-Date that does not parse is
    unknown (None) in the index, as in the pages curate reads, never a made-up epoch."""
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from afm.crawler.storage.warc import index_rows_from_warc

    path = tmp_path / "bad-date.warc.gz"
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for url, date in (("http://h/ok", "2024-05-01T10:00:00Z"), ("http://h/bad", "yesterday")):
            record = writer.create_warc_record(
                url, "response", payload=io.BytesIO(b"<p>x</p>"), length=8,
                warc_headers_dict={"WARC-Date": date},
                http_headers=StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1"))
            writer.write_record(record)
    rows = {r["url"]: r for r in index_rows_from_warc(path)}
    pages = {p["url"]: p for p in iter_warc_responses(path)}
    assert rows["http://h/bad"]["fetched_at"] is None and pages["http://h/bad"]["fetched_at"] is None
    assert rows["http://h/ok"]["fetched_at"] == pages["http://h/ok"]["fetched_at"] is not None
    assert rows["http://h/ok"]["content_type"] == "text/html" and rows["http://h/ok"]["status"] == 200
    ok, bad = rows["http://h/ok"], rows["http://h/bad"]
    assert ok["offset"] + ok["length"] == bad["offset"] and bad["offset"] + bad["length"] == path.stat().st_size
