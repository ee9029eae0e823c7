"""The local runner's compact shuffle table (afm.pipelines.beam.grouping) groups exactly as
Beam's own table: the same keys in the same order, each with its values in arrival order,
split the same way over workers, also when two keys share a hash."""

from __future__ import annotations

import random

import pytest
from afm.pipelines.beam import grouping
from apache_beam import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.runners.portability.fn_api_runner import execution
from apache_beam.transforms import core, window
from apache_beam.utils.windowed_value import WindowedValue

PRE = coders.WindowedValueCoder(coders.TupleCoder([coders.StrUtf8Coder(), coders.PickleCoder()]))
POST = coders.WindowedValueCoder(coders.TupleCoder([coders.StrUtf8Coder(),
                                                    coders.IterableCoder(coders.PickleCoder())]))
WINDOWING = core.Windowing(window.GlobalWindows())


def _encoded(elements: list[tuple[str, object]]) -> bytes:
    out = create_OutputStream()
    for kv in elements:
        PRE.get_impl().encode_to_stream(WindowedValue(kv, 0, [window.GlobalWindow()]), out, True)
    return out.get()


def _decoded(parts: list[list[bytes]]) -> list[list[tuple[str, list]]]:
    result = []
    for part in parts:
        stream, groups = create_InputStream(b"".join(part)), []
        while stream.size() > 0:
            key, values = POST.get_impl().decode_from_stream(stream, True).value
            groups.append((key, list(values)))
        result.append(groups)
    return result


def _elements(seed: int) -> list[tuple[str, object]]:
    rng = random.Random(seed)
    hot = [("hot", i) for i in range(300)]
    rest = [(f"k{rng.randrange(400)}", (i, "x" * rng.randrange(50))) for i in range(2000)]
    mixed = hot + rest
    rng.shuffle(mixed)
    return mixed


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_groups_as_beams_own_table(workers: int) -> None:
    elements = _elements(workers)
    beams, compact = (execution.GroupingBuffer(PRE, POST, WINDOWING),
                      grouping.CompactGroupingBuffer(PRE, POST, WINDOWING))
    for start in range(0, len(elements), 500):  # several appends, as bundles arrive
        chunk = _encoded(elements[start : start + 500])
        beams.append(chunk)
        compact.append(chunk)
    assert _decoded(compact.partition(workers)) == _decoded(beams.partition(workers))
    assert compact.partition(workers) is compact.partition(workers)  # read once, kept


def test_keys_sharing_a_hash_stay_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grouping, "hash", lambda _key: 7, raising=False)
    elements = _elements(9)[:300]
    beams, compact = (execution.GroupingBuffer(PRE, POST, WINDOWING),
                      grouping.CompactGroupingBuffer(PRE, POST, WINDOWING))
    beams.append(_encoded(elements))
    compact.append(_encoded(elements))
    assert _decoded(compact.partition(2)) == _decoded(beams.partition(2))


def test_extend_merges_two_tables() -> None:
    elements = _elements(4)
    beams = execution.GroupingBuffer(PRE, POST, WINDOWING)
    beams.append(_encoded(elements))
    first, second = (grouping.CompactGroupingBuffer(PRE, POST, WINDOWING) for _ in range(2))
    first.append(_encoded(elements[:1000]))
    second.append(_encoded(elements[1000:]))
    first.extend(second)
    assert _decoded(first.partition(2)) == _decoded(beams.partition(2))
