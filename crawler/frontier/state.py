"""The crawl's durable frontier: what was scheduled, what is finished, what is left.

Two append-only JSON-lines logs under ``out_dir/state``, each line written with one
``write`` call before the crawler acts on it, so they survive ``kill -9``:

* ``frontier.jsonl`` - every URL scheduled (after de-duplication), with its depth.
* ``outcomes.jsonl`` - URLs finished without a WARC record (robots denial, refusal,
  network error, ``noindex``).

A URL is *done* when it is in ``outcomes.jsonl`` or in the index of a closed WARC file
(``warc.WarcStore``). On start, ``pending`` = scheduled - done: exactly the pages whose
records were lost with the open WARC file, plus those never fetched.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from afm.crawler.frontier.urls import canonical_url, host_key
from afm.crawler.storage.warc import read_index


class CrawlState:
    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir) / "state"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.frontier_path = self.dir / "frontier.jsonl"
        self.outcomes_path = self.dir / "outcomes.jsonl"
        self.seen: set[str] = set()
        self.host_counts: Counter[str] = Counter()
        self.scheduled = 0
        self.pending: list[tuple[str, int]] = []
        self.corrupt_lines = 0
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
        done = {row["request_url"] for row in read_index(out_dir)}
        done |= {row["u"] for row in self._read(self.outcomes_path)}
        for row in self._read(self.frontier_path):
            url, depth = row["u"], int(row.get("d", 0))
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

    def take(self, url: str, depth: int) -> None:
        """Redis mode: log a request this daemon took off the shared queue."""
        self._frontier.write(json.dumps({"u": url, "d": depth}) + "\n")

    def is_seen(self, url: str) -> bool:
        return canonical_url(url) in self.seen

    def finish(self, url: str, outcome: str, message: str = "") -> None:
        """Record a URL finished without a WARC record (so a restart does not retry it)."""
        row = {"u": url, "o": outcome}
        if message:
            row["m"] = message
        self._outcomes.write(json.dumps(row) + "\n")

    def close(self) -> None:
        self._frontier.close()
        self._outcomes.close()
