"""A persistent cache of completed generation requests (SQLite, one file).

Synthetic-data runs send thousands of requests; a crash, a preemption or a Ctrl-C must
not cost the ones already answered. Every completed request is committed as it arrives,
keyed by a hash of everything that determines the answer (model, messages, sampling
settings, seed), so re-running the same command replays the answered requests instantly
and sends only the rest: that is how a run resumes. SQLite gives atomic commits and
safe concurrent use from the client's worker threads (one connection, one lock).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any


class ResponseCache:
    """``key -> JSON value`` with a commit per write; thread-safe."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"
            )
            self._db.commit()
        self.hits = 0
        self.writes = 0

    def get(self, key: str) -> Any | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        data = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?)", (key, data, time.time()))
            self._db.commit()
        self.writes += 1

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
