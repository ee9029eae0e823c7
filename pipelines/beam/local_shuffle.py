"""Shuffles of Beam's local runner that move to disk when they grow.

Beam's local runner (the FnApiRunner) runs a graph one fused stage at a time and keeps what
each stage wrote for the stages after it in the launcher's memory until they have read it:
a ``ListBuffer`` of encoded chunks, or, in front of a GroupByKey, a ``GroupingBuffer``, a
dict from every encoded key to its *decoded* values. Both hold the whole corpus's worth of
whatever crosses a stage boundary, and the grouping table holds it as Python objects: one
key, one list and one value object per element, about 300 bytes beyond the data, so the
LSH band keys of de-duplication alone (14 a document) cost about 4 kB a document. Measured
with ``afm bench curate_memory`` this made a run's memory grow with the corpus.

Here both buffers keep what is appended as the encoded chunks it arrives in, in memory up to
:data:`SPILL_ABOVE` bytes a buffer and then in an unlinked temporary file (gone with the
process, even after a crash). When a stage reads a buffer:

* a list buffer gives each worker its share of the chunks, read back from the file and
  joined into one message (as Beam sends a grouped buffer's share: more messages than the
  worker's receive queue holds would stall a runner that sends every input before it starts
  the bundle);
* a grouping buffer is grouped by *external hashing*: every element is decoded once and
  written to one of ``ceil(bytes / BUCKET_BYTES)`` bucket files by its encoded key, then
  each bucket is grouped in memory on its own (all values of a key are in one bucket) and
  encoded as Beam encodes a grouped buffer. Only one bucket's table is ever in memory.

Below :data:`SPILL_ABOVE` a buffer behaves exactly as Beam's own. What is left in memory is
one stage's input while that stage runs (encoded, as before), not every boundary's at once.
The patch is Beam-version specific (the two classes are internal; Beam is pinned in
``constraints.txt``): :func:`check_beam_internals` fails loudly when they change, and it is
installed only around a local run (:func:`disk_backed_shuffles`), never on a cluster runner,
whose shuffles are the cluster's.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.runners.portability.fn_api_runner import execution, fn_runner

_BeamListBuffer = execution.ListBuffer  # Beam's own classes, whatever is installed later
_BeamGroupingBuffer = execution.GroupingBuffer
SPILL_ABOVE = 16 << 20  # bytes a buffer keeps in memory before it moves to a file
BUCKET_BYTES = 32 << 20  # encoded bytes a grouping bucket holds (its table is a few times this)
_settings = {"directory": None, "spill_above": SPILL_ABOVE, "bucket_bytes": BUCKET_BYTES}


class _SpillFile:
    """An unlinked temporary file that chunks are appended to and read back from by
    offset; appends are locked (a buffer collects the outputs of every worker's bundle
    from several threads), reads are positional (``os.pread``) and need no lock."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(dir=_settings["directory"], buffering=0)
        self._lock = threading.Lock()
        self._end = 0

    def write(self, chunk: bytes) -> tuple[int, int]:
        with self._lock:
            offset = self._end
            self._file.write(chunk)
            self._end += len(chunk)
        return offset, len(chunk)

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self._file.fileno(), length, offset)


class _Chunks:
    """Encoded chunks in the order they were appended: in memory up to the spill limit,
    then in a :class:`_SpillFile`."""

    def __init__(self) -> None:
        self.entries: list[bytes | tuple[int, int]] = []
        self.memory_bytes = 0
        self.total_bytes = 0
        self.file: _SpillFile | None = None
        self._lock = threading.Lock()

    def append(self, chunk: bytes) -> None:
        with self._lock:
            self.total_bytes += len(chunk)
            if self.file is None and self.memory_bytes + len(chunk) > _settings["spill_above"]:
                self._move_to_disk()
            if self.file is None:
                self.entries.append(chunk)
                self.memory_bytes += len(chunk)
            else:
                self.entries.append(self.file.write(chunk))

    def _move_to_disk(self) -> None:
        self.file = _SpillFile()
        self.entries = [self.file.write(c) if isinstance(c, bytes) else c for c in self.entries]
        self.memory_bytes = 0

    @property
    def on_disk(self) -> bool:
        return self.file is not None

    def read(self, entry: bytes | tuple[int, int]) -> bytes:
        if isinstance(entry, bytes):
            return entry
        assert self.file is not None
        return self.file.read(*entry)

    def __iter__(self) -> Iterator[bytes]:
        for entry in list(self.entries):
            yield self.read(entry)

    def __len__(self) -> int:
        return len(self.entries)

    def share(self, k: int, n: int) -> _Share:
        return _Share(self, self.entries[k::n])


class _Share:
    """One worker's share of a spilled list buffer: its chunks, read and joined into one
    message when the runner sends it."""

    def __init__(self, chunks: _Chunks, entries: list[bytes | tuple[int, int]]):
        self._chunks = chunks
        self._entries = entries

    def __len__(self) -> int:
        return 1 if self._entries else 0

    def __iter__(self) -> Iterator[bytes]:
        if self._entries:
            yield b"".join(self._chunks.read(e) for e in self._entries)


class SpillingListBuffer(_BeamListBuffer):
    """Beam's ``ListBuffer``, whose chunks move to a file past :data:`SPILL_ABOVE`."""

    def __init__(self, coder_impl: Any) -> None:
        super().__init__(coder_impl)
        self._chunks = _Chunks()
        self._inputs = self._chunks.entries  # Beam's own code sees the in-memory chunks

    @property
    def _spilled(self) -> bool:
        return self._chunks.on_disk

    def copy(self) -> SpillingListBuffer:
        new = SpillingListBuffer(self._coder_impl)
        for chunk in self._chunks:
            new.append(chunk)
        return new

    def extend(self, extra: Any) -> None:
        self._check_writable()
        assert isinstance(extra, _BeamListBuffer)
        for chunk in extra:
            self.append(chunk)

    def append(self, element: bytes) -> None:
        self._check_writable()
        self._chunks.append(element)
        self._inputs = self._chunks.entries

    def _check_writable(self) -> None:
        if self.cleared:
            raise RuntimeError("Trying to append to a cleared ListBuffer.")
        if self._grouped_output:
            raise RuntimeError("ListBuffer append after read.")

    def partition(self, n: int) -> list[Any]:
        if not self._spilled:
            return super().partition(n)
        if self.cleared:
            raise RuntimeError("Trying to partition a cleared ListBuffer.")
        return [self._chunks.share(k, n) for k in range(n)]

    def __iter__(self) -> Iterator[bytes]:
        if self.cleared:
            raise RuntimeError("Trying to iterate through a cleared ListBuffer.")
        return iter(self._chunks)

    def clear(self) -> None:
        super().clear()
        self._chunks = _Chunks()
        self._inputs = self._chunks.entries

    def reset(self) -> None:
        super().reset()
        self._inputs = self._chunks.entries


class SpillingGroupingBuffer(_BeamGroupingBuffer):
    """Beam's ``GroupingBuffer``, keeping the encoded elements as they come (in memory,
    then in a file) and grouping them when a stage reads them: in one table as Beam does
    while they are few, by external hashing once they have moved to disk."""

    def __init__(self, pre_grouped_coder: Any, post_grouped_coder: Any, windowing: Any) -> None:
        super().__init__(pre_grouped_coder, post_grouped_coder, windowing)
        self._chunks = _Chunks()

    def append(self, elements_data: bytes) -> None:
        if self._grouped_output:
            raise RuntimeError("Grouping table append after read.")
        self._chunks.append(elements_data)

    def extend(self, input_buffer: Any) -> None:
        if isinstance(input_buffer, _BeamListBuffer):
            return  # as Beam's: see GroupingBuffer.extend
        assert isinstance(input_buffer, SpillingGroupingBuffer), f"Input was not GroupingBuffer: {input_buffer}"
        for chunk in input_buffer._chunks:
            self.append(chunk)

    def partition(self, n: int) -> list[list[bytes]]:
        if self._grouped_output:
            return self._grouped_output
        if not self._chunks.on_disk:
            for chunk in self._chunks:
                super().append(chunk)
            self._chunks = _Chunks()
            return super().partition(n)
        self._grouped_output = self._group_on_disk(n)
        self._chunks = _Chunks()
        return self._grouped_output

    def _group_on_disk(self, n: int) -> list[list[bytes]]:
        buckets = max(n, math.ceil(self._chunks.total_bytes / _settings["bucket_bytes"]))
        files = self._scatter(buckets)
        streams = [create_OutputStream() for _ in range(n)]
        for b, bucket in enumerate(files):
            table = self._read_bucket(bucket)
            self._table = table
            part = super().partition(1)[0][0]  # Beam's own encoding of a grouped table
            self._grouped_output = None
            streams[b % n].write(part, False)
        self._table = defaultdict(list)
        return [[s.get()] for s in streams]

    def _scatter(self, buckets: int) -> list[_Chunks]:
        """Every element, re-encoded, into the bucket of its encoded key."""
        coder = self._pre_grouped_coder.get_impl()
        key_coder = self._key_coder.get_impl()
        files = [_Chunks() for _ in range(buckets)]
        for f in files:
            f._move_to_disk()
        pending = [create_OutputStream() for _ in range(buckets)]
        for chunk in self._chunks:
            stream = create_InputStream(chunk)
            while stream.size() > 0:
                element = coder.decode_from_stream(stream, True)
                b = hash(key_coder.encode(element.value[0])) % buckets
                coder.encode_to_stream(element, pending[b], True)
                if pending[b].size() > 1 << 20:
                    files[b].append(pending[b].get())
                    pending[b] = create_OutputStream()
        for b, out in enumerate(pending):
            if out.size():
                files[b].append(out.get())
        return files

    def _read_bucket(self, bucket: _Chunks) -> defaultdict[bytes, list[Any]]:
        table: defaultdict[bytes, list[Any]] = defaultdict(list)
        coder = self._pre_grouped_coder.get_impl()
        key_coder = self._key_coder.get_impl()
        trivial = self._windowing.is_default()
        for chunk in bucket:
            stream = create_InputStream(chunk)
            while stream.size() > 0:
                element = coder.decode_from_stream(stream, True)
                key, value = element.value
                table[key_coder.encode(key)].append(value if trivial else element.with_value(value))
        return table


def check_beam_internals() -> None:
    """Fail with a clear message when the installed Beam's local runner no longer has the
    buffers this module replaces (they are internal to Beam)."""
    for module, name in ((execution, "ListBuffer"), (execution, "GroupingBuffer"), (fn_runner, "ListBuffer")):
        if not isinstance(getattr(module, name, None), type):
            raise RuntimeError(f"{module.__name__}.{name} is gone: afm.pipelines.beam.local_shuffle "
                               "does not fit this Beam version (see constraints.txt)")


_install_lock = threading.Lock()
_installed = 0


@contextlib.contextmanager
def disk_backed_shuffles(directory: str | None = None, spill_above: int | None = None,
                         bucket_bytes: int | None = None) -> Iterator[None]:
    """Within the block, the local runner's buffers are :class:`SpillingListBuffer` and
    :class:`SpillingGroupingBuffer` (spill files in ``directory``, default the system's
    temporary directory). Re-entrant; the previous limits come back at the end."""
    global _installed
    check_beam_internals()
    previous = dict(_settings)
    with _install_lock:
        _settings.update({k: v for k, v in (("directory", directory), ("spill_above", spill_above),
                                              ("bucket_bytes", bucket_bytes)) if v is not None})
        if _installed == 0:
            execution.ListBuffer = fn_runner.ListBuffer = SpillingListBuffer
            execution.GroupingBuffer = SpillingGroupingBuffer
        _installed += 1
    try:
        yield
    finally:
        with _install_lock:
            _installed -= 1
            if _installed == 0:
                execution.ListBuffer = fn_runner.ListBuffer = _BeamListBuffer
                execution.GroupingBuffer = _BeamGroupingBuffer
            _settings.update(previous)


