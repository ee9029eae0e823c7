"""The crawl's durable frontier: what was scheduled, what is finished, what is left.

Two append-only JSON-lines logs under ``out_dir/state``, each line written with one
``write`` call before the crawler acts on it, so they survive ``kill -9``:

* ``frontier.jsonl`` - every URL scheduled (after de-duplication), with its depth; with a
  shared Redis frontier, every request this daemon took off the queue, with the number of
  that pop (``"k"``, :mod:`afm.crawler.frontier.redis`).
* ``outcomes.jsonl`` - URLs finished without a WARC record (robots denial, refusal,
  network error, ``noindex``), each with its kind, its reason and whether it was
  transient (``"t": true``); a URL's last line is its outcome.

A URL is *done* when it is in the index of a closed WARC file (``warc.WarcStore``), or
its last outcome is one the crawl does not try again (``requeue`` says which: the
crawler's :class:`~afm.crawler.fetching.retry.RetryPolicy`). On start, ``pending`` =
scheduled - done: the pages whose records were lost with the open WARC file, those never
fetched, and those that failed for a reason that may have passed. ``failed`` is every URL
whose last outcome is a failure, so seeding one again queues it again (:meth:`requeue`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from afm.crawler.frontier.urls import canonical_url, host_key
from afm.crawler.storage.warc import read_index


class CrawlState:
    def __init__(self, out_dir: str | Path, requeue: Callable[[dict[str, Any]], bool] | None = None,
                 is_failure: Callable[[str], bool] | None = None) -> None:
        """``requeue(row)``: whether a URL whose last outcome line is ``row`` is fetched
        again by this run; ``is_failure(kind)``: whether an outcome is a failed fetch
        (kept in :attr:`failed`). Both default to "no"."""
        self._requeue = requeue or (lambda row: False)
        self._is_failure = is_failure or (lambda kind: False)
        self.dir = Path(out_dir) / "state"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.frontier_path = self.dir / "frontier.jsonl"
        self.outcomes_path = self.dir / "outcomes.jsonl"
        self.seen: set[str] = set()
        self.host_counts: Counter[str] = Counter()
        self.scheduled = 0
        self.pending: list[tuple[str, int]] = []
        self.failed: dict[str, dict[str, Any]] = {}  # url -> its last outcome line, a failure
        self.requeued: Counter[str] = Counter()  # outcome kind -> URLs back in `pending` for it
        self.corrupt_lines = 0
        self.last_take = 0  # the highest pop number logged by take()
        self._load(Path(out_dir))
        self._frontier = open(self.frontier_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self._outcomes = open(self.outcomes_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def _read(self, path: Path) -> list[dict[str, Any]]:
        out = []
        if not path.exists():
            return out
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    self.corrupt_lines += 1  # a line cut by a crash: its URL is re-seeded
        return out

    def _load(self, out_dir: Path) -> None:
        stored = {row["request_url"] for row in read_index(out_dir)}
        last: dict[str, dict[str, Any]] = {}
        for row in self._read(self.outcomes_path):
            last[row["u"]] = row
        done = set(stored)
        for url, row in last.items():
            if url in stored:
                continue
            if self._requeue(row):  # pending again (below): no longer a failure to re-seed
                self.requeued[row.get("o", "")] += 1
                continue
            done.add(url)
            if self._is_failure(row.get("o", "")):
                self.failed[url] = row
        for row in self._read(self.frontier_path):
            url, depth = row["u"], int(row.get("d", 0))
            self.last_take = max(self.last_take, int(row.get("k", 0)))
            key = canonical_url(url)
            if key in self.seen:
                continue
            self.seen.add(key)
            self.host_counts[host_key(url)] += 1
            self.scheduled += 1
            if url not in done:
                self.pending.append((url, depth))

    def add(self, url: str, depth: int) -> bool:
        """Record ``url`` as scheduled; False if its canonical form was seen before."""
        key = canonical_url(url)
        if key in self.seen:
            return False
        self.seen.add(key)
        self.host_counts[host_key(url)] += 1
        self.scheduled += 1
        self._frontier.write(json.dumps({"u": url, "d": depth}) + "\n")
        return True

    def take(self, url: str, depth: int, pop: int = 0) -> None:
        """Redis mode: log a request this daemon took off the shared queue (``pop``: the
        number the queue gave that pop, so a restart knows whether it was logged)."""
        row: dict[str, Any] = {"u": url, "d": depth}
        if pop:
            row["k"] = pop
            self.last_take = max(self.last_take, pop)
        self._frontier.write(json.dumps(row) + "\n")

    def owner_id(self) -> str:
        """This output directory's lasting name (``state/owner``, made once): what a
        shared frontier knows the daemon writing here by, across its restarts."""
        path = self.dir / "owner"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_text(uuid.uuid4().hex + "\n", encoding="utf-8")
            os.replace(tmp, path)
        return path.read_text(encoding="utf-8").strip()

    def is_seen(self, url: str) -> bool:
        return canonical_url(url) in self.seen

    def requeue(self, url: str, depth: int) -> dict[str, Any] | None:
        """Schedule a failed ``url`` again (it was seeded again); its last outcome, or
        None when it had not failed (stored, never tried, or a final decision)."""
        row = self.failed.pop(url, None)
        if row is not None:
            self._frontier.write(json.dumps({"u": url, "d": depth}) + "\n")
        return row

    def finish(self, url: str, outcome: str, message: str = "", transient: bool = False) -> None:
        """Record a URL finished without a WARC record, with why; ``transient``: the
        reason may pass, so the next run fetches it again."""
        row: dict[str, Any] = {"u": url, "o": outcome}
        if message:
            row["m"] = message
        if transient:
            row["t"] = True
        if self._is_failure(outcome):
            self.failed[url] = row
        else:
            self.failed.pop(url, None)
        self._outcomes.write(json.dumps(row) + "\n")

    def close(self) -> None:
        self._frontier.close()
        self._outcomes.close()
