"""What every reader yields: a decoded :class:`Record`, a :class:`Failure` or a
:class:`Skipped` non-document, each with its place in the file (:class:`Where`), and the
limits every reader shares. Its own module so the format readers (``warc.py``) and the
package's front door (``__init__.py``) import it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WARC_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")
PARQUET_SUFFIXES = (".parquet",)
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
SUPPORTED_SUFFIXES = WARC_SUFFIXES + PARQUET_SUFFIXES + JSONL_SUFFIXES
MAX_RECORD_BYTES = 256 << 20  # a longer JSONL line / WARC record is rejected, not buffered
# Records of a gzip member are held until the member's CRC is checked, up to this many
# bytes (beyond, e.g. a whole-file gzip, they are passed on unverified).
VERIFY_LOOKAHEAD = 16 << 20
PARQUET_BATCH_ROWS = 1024


@dataclass(frozen=True)
class Where:
    """The place of a record in its file: byte offset (compressed offset of the gzip
    member for ``.gz``), line number (JSONL) or row number (Parquet)."""

    file: str
    offset: int | None = None
    line: int | None = None
    row: int | None = None

    def describe(self) -> str:
        parts = [self.file]
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.row is not None:
            parts.append(f"row {self.row}")
        if self.offset is not None:
            parts.append(f"byte {self.offset}")
        return ", ".join(parts)

    def details(self) -> dict[str, Any]:
        """The place as reject details (only the fields that are known)."""
        return {k: v for k, v in (("file", self.file), ("offset", self.offset),
                                  ("line", self.line), ("row", self.row)) if v is not None}

    def sort_key(self) -> int:
        """Position inside the file, for "first in input order" decisions."""
        for value in (self.row, self.line, self.offset):
            if value is not None:
                return int(value)
        return 0


@dataclass
class Record:
    """A decoded record: ``kind`` is ``record`` (JSONL value / Parquet row) or ``page``
    (a WARC HTTP response, ``{"url","status","headers","body","fetched_at"}``)."""

    value: Any
    where: Where
    kind: str = "record"
    notes: tuple[str, ...] = ()  # repairs made while decoding, e.g. "utf8_repaired"


@dataclass
class Failure:
    """Something that could not be decoded. ``lost``: how many records it stands for
    (None = unknown: the run summary warns)."""

    where: Where
    reason: str
    error: str
    lost: int | None = 1
    url: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def details(self) -> dict[str, Any]:
        out = {**self.where.details(), "error": self.error[:500],
               "records_lost": self.lost if self.lost is not None else "unknown"}
        out.update(self.extra)
        return out


@dataclass
class Skipped:
    """A record that is not a document by design (WARC request / warcinfo / metadata)."""

    where: Where
    what: str


Item = Record | Failure | Skipped
