"""Document texts kept on disk while their records cross a shuffle.

Beam's local runner (the FnApiRunner) runs a graph one fused stage at a time and holds the
whole output of a stage in its own memory until the next stage has read it: every
element that crosses a GroupByKey, a CoGroupByKey, a side input or a Flatten of branches
made in different stages. A curate run sends every document across several of those
(one per id, the dedup join, the shard writer, the flatten of all rejects), so measured
on 20,000 and 100,000 documents its memory grew with the corpus, about 27 kB a document.

Here a record's ``text`` and ``signals``, by far its largest fields, are *stowed* before
such a boundary: written, packed (:mod:`afm.pipelines.beam.packing`), to a spill file of
the producing bundle under the run's scratch directory (any filesystem, through
:mod:`afm.fs`), and replaced in the record by their locations (a crawl page's ``body``
likewise). The consumer after the boundary *restores* them by reading them back. What the
runner holds is then a few hundred bytes a document (its id, URL, scores and the
locations) instead of its text, while the spill files grow on disk. The graph is the same
on every runner: a cluster runner writes its spill files under the run's staging
directory on GCS or S3 and its workers read them back the same way.

A text read back and stowed again unchanged (no stage edited it since the last shuffle,
about half of a run's stows) is not written again: the reader remembers, by identity, the
last texts it gave out and where they lie (:class:`_Restored`), and the writer reuses that
place when it is in the same run's spill folder. Only immutable values (``str``, ``bytes``)
are reused, never a ``signals`` dict, which the stages after a restore extend.

A spill file is complete before anyone reads it: the writer closes it when its bundle
finishes, and its locations are only read after a shuffle, which a runner starts once the
bundles before it have finished. A retried bundle writes a new file (its first attempt's
locations were discarded with its output), and the files go with the run's staging
directory.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import apache_beam as beam

from afm import fs
from afm.pipelines.beam.packing import PackedRecord, pack, pack_record, reject_label, unpack

STOWED = "_stowed_text"  # the key that takes the place of ``text`` in a stowed record
_PREFIX = "_stowed_"  # ... and ``_stowed_<field>`` that of another field (a page's ``body``)
MIN_CHARS = 256  # shorter texts stay in the record: a read costs more than they weigh
MIN_BYTES = 256  # other fields (a document's signals) stay when packed smaller than this
# What a document's record sheds: its text, and the signals every stage adds (44 numbers
# with their names by the end of a web run, about 1.5 kB, more than the rest of the record).
FIELDS = ("text", "signals")
SPILL_DIR = ".spill"  # under a run's staging directory (hidden: scratch, never promoted)

# Where a stowed text lies: (file, offset, length in the file, characters of the text).
Location = tuple[str, int, int, int]


class _Restored:
    """The last texts read back in this process, by identity, with their locations: a
    fused stage reads a record back, runs its steps and stows it again a few records later,
    so a short memory finds the unchanged ones. Bounded by entries and characters (it
    keeps the texts alive); a lock, as a worker may run bundles on several threads."""

    def __init__(self, max_entries: int = 4096, max_chars: int = 32_000_000):
        self.max_entries, self.max_chars = max_entries, max_chars
        self._entries: OrderedDict[int, tuple[Any, Location]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def add(self, value: Any, location: Location) -> None:
        if not isinstance(value, (str, bytes)):
            return  # a dict may be changed in place after it is read back
        with self._lock:
            old = self._entries.pop(id(value), None)
            if old is not None:
                self._chars -= len(old[0])
            self._entries[id(value)] = (value, location)
            self._chars += len(value)
            while self._entries and (len(self._entries) > self.max_entries or self._chars > self.max_chars):
                self._chars -= len(self._entries.popitem(last=False)[1][0])

    def where(self, value: Any) -> Location | None:
        """Where ``value`` (this very object) was read from, if remembered."""
        with self._lock:
            entry = self._entries.get(id(value))
        return entry[1] if entry is not None and entry[0] is value else None


_RESTORED = _Restored()


def _run_folder(step_dir: str) -> str:
    """The run's spill folder of a step's spill directory (``<staging>/.spill/<step>`` ->
    ``<staging>/.spill``); a spill file's is that of the folder holding it."""
    return step_dir.rsplit("/", 1)[0]


def is_stowed(rec: Any) -> bool:
    return isinstance(rec, dict) and any(isinstance(k, str) and k.startswith(_PREFIX) for k in rec)


class SpillWriter:
    """One spill file per bundle, opened on the first text that needs it; :meth:`close`
    at the end of the bundle. Not thread-safe: one per DoFn instance (Beam runs one bundle
    at a time on an instance)."""

    def __init__(self, directory: str):
        self.directory = directory
        self._run = _run_folder(directory)  # where read-back texts it may point to lie
        self._file: BinaryIO | None = None
        self._path = ""
        self._offset = 0

    def stow(self, rec: dict[str, Any], names: tuple[str, ...] = FIELDS) -> dict[str, Any]:
        """``rec`` with its fields ``names`` (a document's text and signals, a crawl
        page's body) replaced by their values' locations (same key order, so that
        :meth:`SpillReader.restore` gives back an equal record); short values and fields
        already stowed stay as they are."""
        for name in names:
            rec = self._stow_field(rec, name)
        return rec

    def _stow_field(self, rec: dict[str, Any], name: str) -> dict[str, Any]:
        value = rec.get(name)
        location: Location | None = None
        if isinstance(value, (str, bytes)):
            if len(value) < MIN_CHARS:
                return rec
            known = _RESTORED.where(value)
            if known is not None and _run_folder(_run_folder(known[0])) == self._run:
                location = known  # read back and unchanged: it lies in this run's spill files
            else:
                data = pack(value)
        elif isinstance(value, dict) and value:
            data = pack(value)
            if len(data) < MIN_BYTES:
                return rec
        else:
            return rec
        if location is None:
            location = self._put(data, len(value))
        key = _PREFIX + name
        return {(key if k == name else k): (location if k == name else v) for k, v in rec.items()}

    def _put(self, data: bytes, chars: int) -> Location:
        if self._file is None:
            self._path = fs.join(self.directory, f"{uuid.uuid4().hex}.bin")
            self._file = fs.open_write(self._path)
            self._offset = 0
        self._file.write(data)
        location = (self._path, self._offset, len(data), chars)
        self._offset += len(data)
        return location

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class SpillReader:
    """Reads stowed texts back, keeping a few spill files open (a consumer's records come
    from few files, mostly in order)."""

    def __init__(self, max_open: int = 16):
        self.max_open = max_open
        self._files: OrderedDict[str, BinaryIO] = OrderedDict()

    def restore(self, rec: Any) -> Any:
        """The record with its text back (records that were not stowed as they are)."""
        if not is_stowed(rec):
            return rec
        out = {}
        for k, v in rec.items():
            if isinstance(k, str) and k.startswith(_PREFIX):
                out[k[len(_PREFIX):]] = self.read(v)
            else:
                out[k] = v
        return out

    def read(self, location: Location) -> Any:
        path, offset, length, _chars = location
        handle = self._files.pop(path, None)
        if handle is None:
            handle = fs.open_read(path)
            while len(self._files) >= self.max_open:
                self._files.popitem(last=False)[1].close()
        self._files[path] = handle
        handle.seek(offset)
        data = handle.read(length)
        if len(data) != length:
            raise OSError(f"spill file {path} is shorter than expected (offset {offset}, "
                          f"{length} bytes): was the run's staging directory removed?")
        value = unpack(data)
        _RESTORED.add(value, location)
        return value

    def close(self) -> None:
        while self._files:
            self._files.popitem(last=False)[1].close()


def restore_all(records: Iterable[Any]) -> list[Any]:
    """A few records with their texts back (one reader, closed after)."""
    reader = SpillReader()
    try:
        return [reader.restore(r) for r in records]
    finally:
        reader.close()


class WritingFn(beam.DoFn):
    """A DoFn that stows texts into one spill file per bundle (none without a directory);
    a step that stows some of what it emits subclasses it (``stow``)."""

    def __init__(self, directory: str | None):
        self.directory = directory
        self.writer: SpillWriter | None = None

    def start_bundle(self) -> None:
        self.writer = SpillWriter(self.directory) if self.directory else None

    def finish_bundle(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def stow(self, rec: dict[str, Any]) -> dict[str, Any]:
        return self.writer.stow(rec) if self.writer is not None else rec


class StowFn(WritingFn):
    """Record -> the record with its fields ``names`` (default: text and signals) stowed."""

    def __init__(self, directory: str | None, names: tuple[str, ...] = FIELDS):
        super().__init__(directory)
        self.names = names

    def process(self, rec: Any) -> Iterator[Any]:
        if isinstance(rec, dict) and self.writer is not None:
            rec = self.writer.stow(rec, self.names)
        yield rec


class RestoreFn(beam.DoFn):
    """Record -> the record with what was stowed in it read back."""

    def start_bundle(self) -> None:
        self.reader = SpillReader()

    def process(self, rec: Any) -> Iterator[Any]:
        yield self.reader.restore(rec)

    def finish_bundle(self) -> None:
        self.reader.close()


class PackFn(WritingFn):
    """Record -> :data:`~afm.pipelines.beam.packing.PackedRecord` for the shard writer,
    its text (cut to ``text_chars`` when > 0) stowed when there is a directory; a reject
    (``reject``) is labelled ``stage|reason``."""

    def __init__(self, directory: str | None, reject: bool = False, text_chars: int = 0):
        super().__init__(directory)
        self.reject, self.text_chars = reject, text_chars

    def process(self, rec: dict[str, Any]) -> Iterator[PackedRecord]:
        label = reject_label(rec) if self.reject else ""
        yield pack_record(rec, label, self.text_chars, self.stow if self.writer is not None else None)


def spill_dir(staging: str, step: str) -> str:
    """Where ``step`` of a run writes its spill files."""
    return fs.join(staging, SPILL_DIR, step)


__all__ = ["MIN_CHARS", "SPILL_DIR", "STOWED", "PackFn", "RestoreFn", "SpillReader", "SpillWriter", "StowFn", "is_stowed",
           "restore_all", "spill_dir"]
