"""The local runner's shuffle table, kept as encoded bytes instead of Python objects.

Beam's local runner (the FnApiRunner) groups every GroupByKey in its own process: its
``GroupingBuffer`` decodes each element and keeps, per key, a Python list of the decoded
values in a dict. For the many small records of a curate run's global stages (dedup's 14
LSH band keys a document, each with its node string; the joins' signatures) that is about
300 bytes of Python objects per element, several times the encoded element, and it is
held until the next stage has read the group. Measured on 20,000 documents, dedup's band
keys alone held 56 MB of objects there.

:class:`CompactGroupingBuffer` holds the same elements as one ``bytearray`` of encoded
keys and values and a few ``array`` columns (offsets and a hash of each key), about the
encoded size plus 32 bytes an element, and groups them when the runner reads the buffer:
a stable sort of the key hashes (numpy) gives every key's values in arrival order, and
groups come out in the order their keys first arrived, as Beam's own table gives them
(keys that share a 64-bit hash come out together, at the first one's place).
Only the global window is handled this way (every curate, dedup and tokenize graph);
anything else falls back to Beam's table. :func:`install` makes the FnApiRunner of this
process use it (Beam is pinned, ``constraints.txt``; ``tests/unit/pipelines/beam/
test_grouping.py`` checks it against Beam's table).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import numpy as np
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.runners.portability.fn_api_runner import execution
from apache_beam.transforms.window import GlobalWindow, GlobalWindows
from apache_beam.utils import windowed_value

_BeamGroupingBuffer = execution.GroupingBuffer


class CompactGroupingBuffer(_BeamGroupingBuffer):
    """A drop-in ``GroupingBuffer`` that keeps encoded bytes (see the module docstring)."""

    def __init__(self, pre_grouped_coder: Any, post_grouped_coder: Any, windowing: Any) -> None:
        super().__init__(pre_grouped_coder, post_grouped_coder, windowing)
        self._compact = windowing.is_default()
        if self._compact:
            self._value_coder = pre_grouped_coder.value_coder()
        self._data = bytearray()
        self._starts = array("q")  # where each element's key starts in _data
        self._key_lengths = array("q")
        self._value_lengths = array("q")
        self._hashes = array("q")

    def append(self, elements_data: bytes) -> None:
        if not self._compact:
            super().append(elements_data)
            return
        if self._grouped_output:
            raise RuntimeError("Grouping table append after read.")
        stream = create_InputStream(elements_data)
        coder = self._pre_grouped_coder.get_impl()
        key_impl, value_impl = self._key_coder.get_impl(), self._value_coder.get_impl()
        while stream.size() > 0:
            key, value = coder.decode_from_stream(stream, True).value
            self._add(key_impl.encode(key), value_impl.encode(value))

    def _add(self, key: bytes, value: bytes) -> None:
        self._starts.append(len(self._data))
        self._key_lengths.append(len(key))
        self._value_lengths.append(len(value))
        self._hashes.append(hash(key))
        self._data += key
        self._data += value

    def extend(self, input_buffer: Any) -> None:
        if not self._compact or not isinstance(input_buffer, CompactGroupingBuffer) or not input_buffer._compact:
            super().extend(input_buffer)
            return
        for key, value in input_buffer._elements():
            self._add(key, value)

    def _elements(self) -> Iterator[tuple[bytes, bytes]]:
        data = memoryview(self._data)
        for start, k, v in zip(self._starts, self._key_lengths, self._value_lengths, strict=True):
            yield bytes(data[start : start + k]), bytes(data[start + k : start + k + v])

    def _groups(self) -> Iterator[tuple[bytes, list[int]]]:
        """``(encoded key, element indices in arrival order)`` in first-arrival order."""
        if not self._hashes:
            return
        hashes = np.frombuffer(self._hashes, dtype=np.int64)
        order = np.argsort(hashes, kind="stable")
        sorted_hashes = hashes[order]
        bounds = np.flatnonzero(np.diff(sorted_hashes)) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [len(order)]))
        firsts = order[starts]  # stable: the first element of each run arrived first
        data = memoryview(self._data)

        def key_of(i: int) -> bytes:
            start = self._starts[i]
            return bytes(data[start : start + self._key_lengths[i]])

        for run in np.argsort(firsts, kind="stable"):
            members = order[starts[run] : ends[run]].tolist()
            if len(members) == 1:
                yield key_of(members[0]), members
                continue
            by_key: dict[bytes, list[int]] = {}  # equal hashes: split keys that differ
            for i in members:
                by_key.setdefault(key_of(i), []).append(i)
            yield from by_key.items()

    def partition(self, n: int) -> list[list[bytes]]:
        if not self._compact:
            return super().partition(n)
        if not self._grouped_output:
            window = GlobalWindows.windowed_value(
                None, timestamp=GlobalWindow().max_timestamp(),
                pane_info=windowed_value.PaneInfo(
                    is_first=True, is_last=True, timing=windowed_value.PaneInfoTiming.ON_TIME,
                    index=0, nonspeculative_index=0)).with_value
            post = self._post_grouped_coder.get_impl()
            key_impl, value_impl = self._key_coder.get_impl(), self._value_coder.get_impl()
            streams = [create_OutputStream() for _ in range(n)]
            data = memoryview(self._data)
            for idx, (key, members) in enumerate(self._groups()):
                values = []
                for i in members:
                    start = self._starts[i] + self._key_lengths[i]
                    values.append(value_impl.decode(bytes(data[start : start + self._value_lengths[i]])))
                post.encode_to_stream(window((key_impl.decode(key), values)), streams[idx % n], True)
            del data
            self._grouped_output = [[s.get()] for s in streams]
            self._data = bytearray()
            self._starts, self._key_lengths, self._value_lengths, self._hashes = (
                array("q"), array("q"), array("q"), array("q"))
        return self._grouped_output


def install() -> None:
    """Make this process's FnApiRunner group with :class:`CompactGroupingBuffer`."""
    execution.GroupingBuffer = CompactGroupingBuffer


__all__ = ["CompactGroupingBuffer", "install"]
