"""The crawler's log of control files: every robots.txt / tdmrep.json response it fetched,
kept as a snapshot (the store :mod:`afm.consent.snapshots` reads, resolves and merges)."""

from __future__ import annotations

import datetime as dt

from afm import fs
from afm.consent.snapshots import SNAPSHOT_DIR
from afm.crawler.storage.warc import WarcStore


class SnapshotWriter:
    """The crawler's log of control files: a WARC response record per robots.txt /
    tdmrep.json response, in ``<crawl>/robotstxt/`` (:class:`~afm.crawler.storage.warc.WarcStore`:
    WARC + index, renamed into place when closed). Fetches that got no response are not
    records (Common Crawl keeps none either); pages are never fetched after one."""

    def __init__(self, crawl_dir: str, prefix: str = "afm", recover: bool = True,
                 flush_records: bool = False) -> None:
        self.store = WarcStore(fs.join(crawl_dir, SNAPSHOT_DIR), prefix=f"{prefix}-robotstxt",
                               max_bytes=64 << 20, flush_records=flush_records)
        if recover:  # one writer per directory (the daemon); afm fetch's workers share it
            self.store.recover()
        self.written = 0

    def write(self, url: str, status: int, headers: list[tuple[str, str]], body: bytes,
              fetched_at: dt.datetime, final_url: str | None = None) -> None:
        extra = {"AFM-Fetched-URL": final_url} if final_url and final_url != url else None
        self.store.write(url, status, headers, body, fetched_at=fetched_at, warc_headers=extra)
        self.written += 1

    def close(self) -> None:
        self.store.close()


__all__ = ["SnapshotWriter"]
