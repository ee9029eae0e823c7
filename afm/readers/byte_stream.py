"""Raw bytes of an input file as a stream of events, surviving damaged gzip.

Python's ``gzip`` module and warcio stop at the first corrupt byte of a ``.gz`` file and
everything after it vanishes (usually with a message on stderr and no exception the
caller sees). Web archives are gzipped *per record* precisely so that a reader can
start at any member: this module does that. It turns a file into a stream of

* ``bytes``: decompressed data, in order;
* :class:`MemberStart`: a gzip member begins (its compressed offset: what a CDX index or
  a reject names as the record's place); :class:`MemberEnd`: it ended cleanly, so its
  data passed gzip's CRC check (data before a corrupt member's error may be corrupt too,
  so readers hold a member's records until its end: a damaged member costs its records,
  never a wrong record);
* :class:`Damage`: bytes that could not be decoded (a corrupt member, garbage between
  members, a file that ends inside a member), with the compressed offsets it spans.

After a :class:`Damage` the stream resumes at the next gzip member whose first bytes
decompress cleanly and that the caller's ``is_start`` accepts (a WARC member begins with
``WARC/``, a JSONL line with ``{``), so one bad record costs one record. Plain files are
one stream of ``bytes``. The caller decides what a damage means for its records.

Members are inflated with ISA-L (``isal``, a curation dependency) where it is installed:
the same zlib interface and the same checks (a bad CRC or length is an error), at about
2.2x zlib's speed on web pages (0.18 against 0.40 ms a page, ``afm bench warc_read``);
Python's ``zlib`` otherwise, with the same output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b\x08"  # magic + deflate method: how every gzip member starts
READ_CHUNK = 1 << 20
# Compressed bytes handed to the inflater at a time. A WARC member is tens of KB; a slice of
# the whole read window (a MB) per member was copied twice (the input, and the decoder's
# unused tail), and under a local run's 128 kB mapping threshold (pipelines/beam/allocator.py)
# each copy was a fresh mapping the kernel faulted in: 600 faults, 1.4 ms a record.
INFLATE_CHUNK = 1 << 16
OUT_CHUNK = 1 << 22  # decompressed bytes per step: a bomb cannot allocate more at once
PROBE_BYTES = 1 << 16  # compressed bytes tried when testing a resync candidate
_KEEP = 64 << 20  # compressed bytes kept behind the current member for resyncing

try:
    from isal import isal_zlib as _inflater
except ImportError:  # pragma: no cover - a host without the curate extras
    import zlib as _inflater


@dataclass(frozen=True)
class MemberStart:
    """A gzip member begins at compressed byte ``offset``."""

    offset: int


@dataclass(frozen=True)
class MemberEnd:
    """The member that began last ended cleanly (its CRC and length checked) at
    compressed byte ``offset``: the data it held can be trusted."""

    offset: int


@dataclass(frozen=True)
class Damage:
    """Compressed bytes ``[offset, resumed_at)`` could not be decoded.

    ``resumed_at`` is None when nothing readable follows (a truncated or corrupt tail):
    then nobody can tell how many records were lost, which readers must say.
    """

    offset: int
    resumed_at: int | None
    reason: str  # corrupt_gzip | truncated | garbage | read_error
    error: str

    @property
    def tail(self) -> bool:
        return self.resumed_at is None


Event = bytes | MemberStart | MemberEnd | Damage


def is_gzip(head: bytes) -> bool:
    return head.startswith(b"\x1f\x8b")


def iter_events(fh: BinaryIO, *, gzip: bool | None = None,
                is_start: Callable[[bytes], bool] = lambda _b: True) -> Iterator[Event]:
    """Events of the file ``fh`` (see the module docstring). ``gzip=None`` decides from
    the first bytes (a gzip member that decompresses cleanly), so a gzipped file without
    a ``.gz`` name is read right; give ``gzip=True`` for ``.gz`` names, whose first member
    may be the damaged one."""
    reader = _Reader(fh)
    if gzip is None:
        reader.fill(PROBE_BYTES)
        head = bytes(reader.buf[:PROBE_BYTES])
        gzip = head.startswith(GZIP_MAGIC) and _GzipMembers(reader, is_start)._plausible(head)
    if not gzip:
        yield from reader.plain()
        return
    yield from _GzipMembers(reader, is_start).events()


class _Reader:
    """A growing window over a binary file: ``buf`` holds file bytes from ``base``."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.buf = bytearray()
        self.base = 0
        self.eof = False
        self.error: str | None = None

    def fill(self, n: int) -> bool:
        """Make ``buf`` hold at least ``n`` bytes; False when the file ends first."""
        while len(self.buf) < n and not self.eof:
            try:
                chunk = self.fh.read(READ_CHUNK)
            except OSError as exc:  # a failing disk or network read: end of what we have
                self.error = f"{type(exc).__name__}: {exc}"
                chunk = b""
            if not chunk:
                self.eof = True
            else:
                self.buf += chunk
        return len(self.buf) >= n

    def drop_before(self, index: int) -> None:
        """Forget bytes before ``buf[index]``."""
        if index > 0:
            del self.buf[:index]
            self.base += index

    def plain(self) -> Iterator[Event]:
        while True:
            if not self.buf and not self.fill(1):
                break
            data = bytes(self.buf)
            self.drop_before(len(self.buf))
            yield data
        if self.error:
            yield Damage(self.base, None, "read_error", self.error)


class _GzipMembers:
    def __init__(self, reader: _Reader, is_start: Callable[[bytes], bool]) -> None:
        self.r = reader
        self.is_start = is_start

    def events(self) -> Iterator[Event]:
        r = self.r
        pos = 0  # index in r.buf of the next member
        while True:
            r.fill(pos + len(GZIP_MAGIC))
            if pos >= len(r.buf):
                break
            if bytes(r.buf[pos : pos + 3]) != GZIP_MAGIC:
                if r.eof and not bytes(r.buf[pos:]).strip(b"\x00\r\n\t "):
                    break  # padding after the last member is harmless
                start = r.base + pos
                nxt = self._resync(pos + 1)
                yield Damage(start, None if nxt is None else r.base + nxt, "garbage",
                             "bytes that are not a gzip member")
                if nxt is None:
                    break
                pos = nxt
                continue
            start_abs = r.base + pos
            yield MemberStart(start_abs)
            outcome: list[str] = []
            end = yield from self._inflate(pos, outcome)
            if end is not None:  # a complete member
                yield MemberEnd(r.base + end)
                pos = end
                if pos > _KEEP:
                    r.drop_before(pos)
                    pos = 0
                continue
            reason, error = outcome
            pos = start_abs - r.base  # the member start is still in the window
            nxt = self._resync(max(pos, 0) + 1)
            if reason == "truncated":
                if nxt is None:  # a real truncation: nothing readable follows
                    yield Damage(start_abs, None, "truncated", error)
                    break
                # The member ran into the ones after it: its end is damaged, not missing.
                reason, error = "corrupt_gzip", "the member does not end where the next begins"
            yield Damage(start_abs, None if nxt is None else r.base + nxt, reason, error)
            if nxt is None:
                break
            pos = nxt
        if r.error:
            yield Damage(r.base + len(r.buf), None, "read_error", r.error)

    def _inflate(self, pos: int, outcome: list[str]) -> Iterator[Event]:
        """Decompress the member at ``buf[pos]``, yielding its data; returns the index
        just past it, or None with ``outcome = [reason, error]``."""
        r = self.r
        d = _inflater.decompressobj(31)
        p = pos
        pending = b""
        while True:
            if pending:
                data = pending
            else:
                if p >= len(r.buf) and not r.fill(p + 1):
                    try:
                        tail = d.flush()
                    except _inflater.error:
                        tail = b""
                    if tail:
                        yield tail
                    outcome += ["truncated", "the file ends inside a gzip member"]
                    return None
                data = r.buf[p : p + INFLATE_CHUNK]  # one copy, small enough for the heap to reuse
                p += len(data)
            try:
                out = d.decompress(data, OUT_CHUNK)
            except _inflater.error as exc:
                outcome += ["corrupt_gzip", f"gzip: {exc}"]
                return None
            pending = d.unconsumed_tail
            if out:
                yield out
            if d.eof:
                end = p - len(d.unused_data)
                return end
            # Keep the window bounded on huge members (whole-file gzip): resyncing past
            # damage in such a member is hopeless anyway.
            if p - pos > 2 * _KEEP and not pending:
                keep_from = p - _KEEP
                r.drop_before(keep_from)
                p -= keep_from
                pos -= keep_from

    def _resync(self, index: int) -> int | None:
        """Index of the next member at or after ``buf[index]`` that decompresses cleanly
        and passes ``is_start``; None when the file has none."""
        r = self.r
        while True:
            r.fill(index + PROBE_BYTES)
            found = r.buf.find(GZIP_MAGIC, index)
            if found < 0:
                if r.eof:
                    return None
                keep = max(index, len(r.buf) - len(GZIP_MAGIC))
                r.drop_before(keep)
                index = 0
                continue
            r.fill(found + PROBE_BYTES)
            if self._plausible(bytes(r.buf[found : found + PROBE_BYTES])):
                return found
            index = found + 1

    def _plausible(self, probe: bytes) -> bool:
        d = _inflater.decompressobj(31)
        try:
            out = d.decompress(probe, 4096)
        except _inflater.error:
            return False
        if not out and not d.eof:
            return False
        return self.is_start(out)
