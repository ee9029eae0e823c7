"""robots.txt / tdmrep.json snapshots: the newest one wins, damage is never a silent allow.

Snapshot WARCs are written with warcio the way another crawler (Common Crawl's
``robotstxt/*.warc.gz``) writes them, and the ``optout`` stage decides pages with them.
"""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from afm.consent.snapshots import (
    ROBOTS,
    TDMREP,
    SnapshotError,
    SnapshotIndex,
    build_store,
    load_index,
    make_snapshot,
)
from afm.filters.optout import OptoutConfig, OptoutFilter

OPT_OUT = b"User-agent: afmbot-extended\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
ALLOW = b"User-agent: *\nAllow: /\n"
T0 = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
T1 = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)
T2 = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)


def write_warc(path: Path, records: list[tuple[str, int, bytes, dt.datetime]]) -> Path:
    """A WARC of HTTP responses as another crawler writes them (warcio, gzip per record)."""
    with path.open("wb") as fh:
        writer = WARCWriter(fh, gzip=path.name.endswith(".gz"))
        for url, status, body, when in records:
            http = StatusAndHeaders(f"{status} X", [("Content-Type", "text/plain")],
                                    protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http,
                warc_headers_dict={"WARC-Date": when.strftime("%Y-%m-%dT%H:%M:%SZ")}))
    return path


def _snap(host: str, body: bytes, when: dt.datetime, status: int | None = 200,
          kind: str = ROBOTS) -> dict:
    path = "/robots.txt" if kind == ROBOTS else "/.well-known/tdmrep.json"
    return make_snapshot(host + path, kind, fetched_at=when, status=status, body=body)


def _use(index: SnapshotIndex, url: str) -> tuple[bool, str | None, dict]:
    decision = OptoutFilter(OptoutConfig(), index=index)({"url": url, "text": "t"})
    return decision.keep, decision.reason, decision.details


def test_site_that_opts_out_after_it_was_crawled():
    index = SnapshotIndex([_snap("https://g.example", ALLOW, T0),
                           _snap("https://g.example", OPT_OUT, T1)])
    keep, reason, details = _use(index, "https://g.example/page-fetched-in-2024")
    assert (keep, reason) == (False, "optout")
    [ev] = details["evidence"]
    assert ev["rule"] == "Disallow: /" and ev["fetched_at"] == "2025-03-01T00:00:00+00:00"


def test_site_that_withdraws_its_opt_out():
    index = SnapshotIndex([_snap("https://g.example", OPT_OUT, T0),
                           _snap("https://g.example", ALLOW, T1)])
    assert _use(index, "https://g.example/x")[0]


def test_newer_server_error_does_not_hide_the_last_good_snapshot():
    index = SnapshotIndex([_snap("https://g.example", ALLOW, T0),
                           _snap("https://g.example", b"", T1, status=503)])
    assert _use(index, "https://g.example/x")[0]
    # only failures: RFC 9309's "disallow all"
    index = SnapshotIndex([_snap("https://h.example", b"", T1, status=503)])
    keep, reason, details = _use(index, "https://h.example/x")
    assert (keep, reason) == (False, "optout")
    assert "disallow all" in details["evidence"][0]["detail"]


def test_missing_host_follows_the_missing_setting():
    index = SnapshotIndex([_snap("https://g.example", ALLOW, T0)])
    assert _use(index, "https://other.example/x")[0]
    strict = OptoutFilter(OptoutConfig(missing="reject"), index=index)
    assert strict({"url": "https://other.example/x", "text": "t"}).reason == "optout_no_snapshot"


def test_other_scheme_of_the_same_host_uses_its_snapshot():
    index = SnapshotIndex([_snap("http://g.example", OPT_OUT, T0)])
    assert _use(index, "https://g.example/x")[1] == "optout"


def test_tdmrep_snapshot():
    body = b'[{"location": "/", "tdm-reservation": 1}]'
    index = SnapshotIndex([_snap("https://t.example", ALLOW, T0),
                           _snap("https://t.example", body, T0, kind=TDMREP)])
    keep, reason, details = _use(index, "https://t.example/x")
    assert (keep, reason) == (False, "optout")
    assert details["evidence"][0]["source"] == "tdmrep.json"


def test_domain_list(tmp_path):
    listing = tmp_path / "domains.txt"
    listing.write_text("# opted out by e-mail\nnews.example\n")
    flt = OptoutFilter(OptoutConfig(domains_file=str(listing), domains=["b.example"]))
    assert flt({"url": "https://www.news.example/a", "text": "t"}).reason == "optout"
    assert flt({"url": "https://b.example/a", "text": "t"}).reason == "optout"
    assert flt({"url": "https://notnews.example/a", "text": "t"}).keep
    assert flt({"text": "no url"}).keep


def test_store_from_another_crawlers_robots_warc(tmp_path):
    """Common Crawl's robots.txt WARCs: build a store, then decide with it."""
    warc = write_warc(tmp_path / "CC-robotstxt-00000.warc.gz", [
        ("https://a.example/robots.txt", 200, OPT_OUT, T0),
        ("https://b.example/robots.txt", 200, ALLOW, T0),
        ("https://b.example/robots.txt", 200, OPT_OUT, T2),
        ("https://c.example/robots.txt", 404, b"", T0),
    ])
    manifest = build_store([str(warc)], str(tmp_path / "store"))
    assert manifest["snapshots_read"] == 4 and manifest["kept"] == 3 and manifest["hosts"] == 3
    assert (tmp_path / "store" / "_SUCCESS").exists()
    index, _ = load_index([str(tmp_path / "store")])
    assert _use(index, "https://a.example/x")[1] == "optout"
    assert _use(index, "https://b.example/x")[1] == "optout"  # the newer snapshot
    assert _use(index, "https://c.example/x")[0]  # 404: no file, allowed


# ---- damage: a reject or a clear error, never a silent allow --------------------------------


def _damaged_robots_record(url: str) -> bytes:
    """An uncompressed WARC response whose HTTP message cannot be parsed."""
    payload = b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09"
    return (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: " + url.encode()
            + b"\r\nWARC-Date: 2025-09-01T00:00:00Z\r\nContent-Type: application/http; "
            b"msgtype=response\r\nContent-Length: " + str(len(payload)).encode()
            + b"\r\n\r\n" + payload + b"\r\n\r\n")


def test_damaged_newest_snapshot_makes_pages_unverifiable(tmp_path):
    good = write_warc(tmp_path / "old.warc", [("https://d.example/robots.txt", 200, ALLOW, T0)])
    bad = tmp_path / "new.warc"
    bad.write_bytes(_damaged_robots_record("https://d.example/robots.txt"))
    index, counts = load_index([str(good), str(bad)])
    assert counts.damaged == 1
    keep, reason, details = _use(index, "https://d.example/x")
    assert (keep, reason) == (False, "optout_unverifiable")
    assert "damaged" in details["evidence"][0]["detail"]
    # A damaged record's date cannot be read: it may be the newest of all, so even a
    # dated good snapshot does not overrule it (leave the damaged file out to decide).
    newer = write_warc(tmp_path / "newer.warc", [("https://d.example/robots.txt", 200, ALLOW, T2)])
    index, _ = load_index([str(good), str(bad), str(newer)])
    assert _use(index, "https://d.example/x")[1] == "optout_unverifiable"
    index, _ = load_index([str(good), str(newer)])
    assert _use(index, "https://d.example/x")[0]
    # the store keeps the damaged snapshot: building one does not launder the damage
    build_store([str(good), str(bad)], str(tmp_path / "store"))
    index, _ = load_index([str(tmp_path / "store")])
    assert _use(index, "https://d.example/x")[1] == "optout_unverifiable"


def test_damage_that_cannot_be_attributed_is_an_error(tmp_path):
    warc = write_warc(tmp_path / "r.warc", [("https://e.example/robots.txt", 200, ALLOW, T0)])
    data = warc.read_bytes()
    (tmp_path / "cut.warc").write_bytes(data + data[: len(data) // 2])  # cut-off record
    with pytest.raises(SnapshotError, match="cannot be read"):
        load_index([str(tmp_path / "cut.warc")])


def test_damaged_store_is_an_error(tmp_path):
    warc = write_warc(tmp_path / "r.warc", [("https://e.example/robots.txt", 200, ALLOW, T0)])
    store = tmp_path / "store"
    build_store([str(warc)], str(store))
    shard = next(store.glob("snapshots-*.parquet"))
    shard.write_bytes(shard.read_bytes()[:40])
    with pytest.raises(SnapshotError, match="cannot be read"):
        load_index([str(store)])
    (store / "_SUCCESS").unlink()
    with pytest.raises(SnapshotError):
        load_index([str(store)])
    with pytest.raises(SnapshotError, match="not found"):
        load_index([str(tmp_path / "nowhere")])


# ---- Common Crawl's robots.txt WARCs: redirects and truncation ------------------------------


def _cc_warc(path: Path, records: list[tuple[str, int, list[tuple[str, str]], bytes, dict]]) -> Path:
    """A robots.txt WARC as Common Crawl writes one: each fetch (a redirect, its target)
    is its own response record."""
    with path.open("wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for url, status, headers, body, fields in records:
            http = StatusAndHeaders(f"{status} X", [("Content-Type", "text/plain"), *headers],
                                    protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http,
                warc_headers_dict={"WARC-Date": T1.strftime("%Y-%m-%dT%H:%M:%SZ"), **fields}))
    return path


@pytest.mark.parametrize("target", [
    "https://cdn.example/robots/site-a.txt",  # another host, another path
    "https://a.example/robots/",  # same host, another path
    "https://www.a.example/robots.txt",  # another host's robots.txt
])
def test_redirect_is_followed_to_its_target_in_the_same_capture_set(tmp_path, target):
    """RFC 9309 2.3.1.2: "crawlers SHOULD follow at least five consecutive redirects, even
    across authorities (for example, hosts in the case of HTTP)". The target is in the
    set, as its own record: it decides, directly and through a store."""
    warc = _cc_warc(tmp_path / "CC-robotstxt.warc.gz", [
        ("https://a.example/robots.txt", 301, [("Location", target)], b"moved", {}),
        (target, 200, [], OPT_OUT, {}),
    ])
    index, _ = load_index([str(warc)])
    keep, reason, details = _use(index, "https://a.example/page")
    assert (keep, reason) == (False, "optout")
    assert details["evidence"][0]["file"] == target
    build_store([str(warc)], str(tmp_path / "store"))
    index, _ = load_index([str(tmp_path / "store")])
    assert _use(index, "https://a.example/page")[1] == "optout"
    if "cdn.example" in target:  # a capture is no host's robots.txt
        assert _use(index, "https://cdn.example/page")[0]


def test_redirect_chain_and_uncaptured_target(tmp_path):
    warc = _cc_warc(tmp_path / "r.warc.gz", [
        ("https://a.example/robots.txt", 301, [("Location", "/r1")], b"", {}),
        ("https://a.example/r1", 302, [("Location", "https://b.example/r2.txt")], b"", {}),
        ("https://b.example/r2.txt", 200, [], OPT_OUT, {}),
        ("https://c.example/robots.txt", 301, [("Location", "https://elsewhere.example/x")], b"", {}),
    ])
    index, _ = load_index([str(warc)])
    assert _use(index, "https://a.example/page")[1] == "optout"
    # a target nobody captured is a host without snapshot: `missing` decides
    assert _use(index, "https://c.example/page")[0]
    strict = OptoutFilter(OptoutConfig(missing="reject"), index=index)
    assert strict({"url": "https://c.example/page", "text": "t"}).reason == "optout_no_snapshot"


def test_truncated_robots_record_is_damage_not_an_allow(tmp_path):
    """WARC 1.1 5.13: WARC-Truncated "indicates that the record's content block was
    truncated"; the readable part (here: allow all) is not the publisher's whole file."""
    warc = _cc_warc(tmp_path / "r.warc.gz", [
        ("https://t.example/robots.txt", 200, [], ALLOW, {"WARC-Truncated": "length"}),
    ])
    index, counts = load_index([str(warc)])
    assert counts.damaged == 1
    keep, reason, details = _use(index, "https://t.example/page")
    assert (keep, reason) == (False, "optout_unverifiable")
    assert "WARC-Truncated" in details["evidence"][0]["detail"]
    # a newer complete snapshot of the host decides again
    newer = write_warc(tmp_path / "newer.warc", [("https://t.example/robots.txt", 200, ALLOW, T2)])
    index, _ = load_index([str(warc), str(newer)])
    assert _use(index, "https://t.example/page")[0]


def test_a_status_that_is_no_status_is_damage(tmp_path):
    index = SnapshotIndex([_snap("https://z.example", ALLOW, T1, status=0)])
    assert _use(index, "https://z.example/x")[1] == "optout_unverifiable"
