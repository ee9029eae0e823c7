"""What a batch fetch keeps, laid out as the crawler lays out its output directory, so
``afm curate --input OUT`` and ``afm robots snapshots OUT`` read it as a crawl:

* ``warc/*.warc.gz`` + ``index/*.parquet``: the pages (:class:`WarcStore`, the crawler's
  writer: same records, same training-use fields, same index columns);
* ``robotstxt/``: every robots.txt / tdmrep.json response as a snapshot
  (:class:`SnapshotWriter`, the crawler's);
* ``state/fetch/outcomes/*.jsonl``: one line per URL that ended (fetched or not), written
  and flushed as it ends; ``state/fetch/hosts/``: each host's control files
  (:class:`~afm.crawler.batch.control.HostFiles`), read by later stages and reruns.

Every page is written as it is fetched, each record flushed at once, so a worker killed
mid-run leaves complete records and a damaged tail at most: :func:`salvage_open_files`
(run before a rerun starts) cuts the tail, closes and indexes those files, and the rerun
finds every page they hold done.

A local (or shared, mounted) output is written in place. A remote one (``gs://``, ``s3://``)
is written under a local scratch directory and copied there, through :mod:`afm.fs`, each
time :meth:`PageStore.publish` closes the files (once per bundle): a worker lost mid-bundle
costs that bundle's pages, fetched again by a rerun.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import socket
import tempfile
import uuid
from pathlib import Path
from typing import Any

from afm import fs
from afm.consent.snapshots import SNAPSHOT_DIR
from afm.crawler.batch.config import FetchConfig
from afm.crawler.storage.snapshot_log import SnapshotWriter
from afm.crawler.storage.warc import WarcStore, index_rows_from_warc, write_index
from afm.readers import Failure, read_file

STATE_DIR = "state/fetch"
OUTCOMES_DIR = f"{STATE_DIR}/outcomes"
HOSTS_DIR = f"{STATE_DIR}/hosts"


def host_state_path(out_dir: str, origin: str) -> str:
    digest = hashlib.sha1(origin.encode("utf-8")).hexdigest()
    return fs.join(out_dir, HOSTS_DIR, digest[:2], digest + ".json")


class PageStore:
    """One worker's writers (see the module docstring)."""

    def __init__(self, out_dir: str, cfg: FetchConfig) -> None:
        self.out_dir = out_dir
        self.remote = fs.is_remote(out_dir)
        self.local = tempfile.mkdtemp(prefix="afm-fetch-") if self.remote else out_dir
        self.cfg = cfg
        self.writer = f"{socket.gethostname().split('.')[0]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.pages = WarcStore(self.local, prefix=cfg.warc_prefix, max_bytes=cfg.warc_max_bytes,
                               flush_records=True)
        self.snapshots: SnapshotWriter | None = None
        self._outcomes: Any = None
        self._outcomes_path = ""
        self._seq = 0

    def write_page(self, *args: Any, **kwargs: Any) -> tuple[str, int]:
        return self.pages.write(*args, **kwargs)

    def keep_control(self, url: str, status: int, headers: list[tuple[str, str]], body: bytes,
                     when: float, final_url: str) -> None:
        """A robots.txt / tdmrep.json response, as the crawler keeps it (a snapshot)."""
        if not self.cfg.snapshots:
            return
        if self.snapshots is None:
            self.snapshots = SnapshotWriter(self.local, prefix=self.cfg.warc_prefix, recover=False,
                                            flush_records=True)
        self.snapshots.write(url, status, headers, body, dt.datetime.fromtimestamp(when, dt.UTC),
                             final_url=final_url)

    def outcome(self, row: dict[str, Any]) -> None:
        """One URL's end, durable at once (a line, flushed)."""
        if self._outcomes is None:
            self._seq += 1
            directory = os.path.join(self.local, OUTCOMES_DIR)
            os.makedirs(directory, exist_ok=True)
            self._outcomes_path = os.path.join(directory, f"{self.writer}-{self._seq:05d}.jsonl")
            self._outcomes = open(self._outcomes_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self._outcomes.write(json.dumps(row, sort_keys=True, default=str) + "\n")

    def save_host(self, origin: str, data: dict[str, Any]) -> None:
        fs.write_bytes(host_state_path(self.out_dir, origin), json.dumps(data).encode("utf-8"))

    def publish(self) -> None:
        """Close the open files (renamed into place, indexed) and, for a remote output,
        copy them there."""
        self.pages.rotate()
        if self.snapshots is not None:
            self.snapshots.store.rotate()
        if self._outcomes is not None:
            self._outcomes.close()
            self._outcomes = None
        if self.remote:
            for path in sorted(Path(self.local).rglob("*")):
                if path.is_file() and not path.name.startswith("."):
                    rel = path.relative_to(self.local).as_posix()
                    fs.write_bytes(fs.join(self.out_dir, rel), path.read_bytes())
                    path.unlink()

    def close(self) -> None:
        self.publish()
        if self.remote:
            shutil.rmtree(self.local, ignore_errors=True)


def salvage_open_files(out_dir: str) -> dict[str, int]:
    """Before a rerun: every WARC file a killed run left open (``.NAME.open``) in ``warc/``
    and ``robotstxt/warc/`` is cut after its last complete record, renamed into place and
    indexed, so the pages it holds count as fetched. Local outputs only (a remote run's
    open files died with their workers)."""
    salvaged = records = 0
    if fs.is_remote(out_dir):
        return {"files": 0, "records": 0}
    for base in (Path(out_dir), Path(out_dir) / SNAPSHOT_DIR):
        warc_dir, index_dir = base / "warc", base / "index"
        for tmp in sorted(warc_dir.glob(".*.open")):
            final = warc_dir / (tmp.name[1:-len(".open")] + ".warc.gz")
            os.replace(tmp, final)  # named as WARC: the one reader reads it
            cut = next((item.where.offset for item in read_file(str(final))
                        if isinstance(item, Failure)), None)
            if cut is not None:  # the damaged tail a kill left: cut after the last whole record
                with open(final, "r+b") as fh:
                    fh.truncate(cut)
            rows = index_rows_from_warc(final)
            index_dir.mkdir(parents=True, exist_ok=True)
            write_index(index_dir / (final.name[: -len(".warc.gz")] + ".parquet"), rows)
            salvaged += 1
            records += len(rows)
    return {"files": salvaged, "records": records}


__all__ = ["HOSTS_DIR", "OUTCOMES_DIR", "PageStore", "STATE_DIR", "host_state_path",
           "salvage_open_files"]
