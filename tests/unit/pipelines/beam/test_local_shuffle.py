"""The local runner's shuffles on disk (pipelines/beam/local_shuffle.py): the same results as
Beam's own buffers, in one process and with worker processes, every buffer moved to disk."""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

beam = pytest.importorskip("apache_beam")

from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from apache_beam.runners.portability.fn_api_runner import FnApiRunner, execution, fn_runner  # noqa: E402
from apache_beam.testing.util import assert_that, equal_to  # noqa: E402

from afm.pipelines.beam import local_shuffle  # noqa: E402
from afm.pipelines.beam.local_shuffle import (  # noqa: E402
    SpillingGroupingBuffer,
    SpillingListBuffer,
    disk_backed_shuffles,
)

N = 6000
KEYS = 97


def _expected() -> list:
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(N):
        groups[i % KEYS].append(i)
    few = sum(range(5))
    return ([((k, sum(v), len(v)), few) for k, v in groups.items()]
            + [((-1, i, 1), few) for i in range(0, N, 500)])


def _pipeline(p: beam.Pipeline) -> None:
    """A GroupByKey, a Flatten of branches from different stages, a side input and a
    combiner: every kind of buffer the local runner keeps between stages."""
    xs = p | beam.Create(range(N))
    grouped = (xs | "key" >> beam.Map(lambda i: (i % KEYS, i)) | beam.GroupByKey()
               | "sum" >> beam.Map(lambda kv: (kv[0], sum(kv[1]), len(list(kv[1])))))
    side = xs | "few" >> beam.Filter(lambda i: i < 5)
    marks = (xs | "mark" >> beam.Map(lambda i: (-1, i, 1))
             | "every 500th" >> beam.Filter(lambda t: t[1] % 500 == 0))
    out = ((grouped, marks) | beam.Flatten()
           | "with side" >> beam.Map(lambda t, s: (t, sum(s)), s=beam.pvalue.AsList(side)))
    assert_that(out, equal_to(_expected()))
    assert_that(xs | beam.combiners.Count.Globally(), equal_to([N]), label="count")


@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_everything_on_disk_gives_the_same_results(mode: str, tmp_path) -> None:
    opts = PipelineOptions([f"--direct_running_mode={mode}", "--direct_num_workers=2"])
    made: list[str] = []
    original = local_shuffle._SpillFile.__init__

    def counting(self) -> None:
        original(self)
        made.append(self._file.name)

    local_shuffle._SpillFile.__init__ = counting
    try:
        # Every buffer on disk from its first chunk; buckets of 2 kB: many of them.
        with disk_backed_shuffles(str(tmp_path), spill_above=0, bucket_bytes=2000):
            with beam.Pipeline(runner=FnApiRunner(), options=opts) as p:
                _pipeline(p)
    finally:
        local_shuffle._SpillFile.__init__ = original
    assert len(made) > 10  # list buffers and grouping buckets both went to disk
    assert os.listdir(tmp_path) == []  # unlinked files: nothing left behind


def test_installed_only_inside_the_block() -> None:
    beam_list, beam_group = execution.ListBuffer, execution.GroupingBuffer
    with disk_backed_shuffles():
        assert execution.ListBuffer is SpillingListBuffer and fn_runner.ListBuffer is SpillingListBuffer
        assert execution.GroupingBuffer is SpillingGroupingBuffer
        with disk_backed_shuffles(spill_above=1):  # re-entrant
            assert local_shuffle._settings["spill_above"] == 1
        assert execution.ListBuffer is SpillingListBuffer
        assert local_shuffle._settings["spill_above"] == local_shuffle.SPILL_ABOVE
    assert execution.ListBuffer is beam_list and execution.GroupingBuffer is beam_group


def test_a_list_buffer_moves_to_disk_past_its_limit(tmp_path) -> None:
    with disk_backed_shuffles(str(tmp_path), spill_above=10):
        buf = SpillingListBuffer(None)
        buf.append(b"abcd")
        assert not buf._spilled
        buf.append(b"efghijkl")  # 12 bytes > 10: on disk from here
        buf.append(b"mn")
        assert buf._spilled
        assert list(buf) == [b"abcd", b"efghijkl", b"mn"]
        shares = buf.partition(2)
        assert [b"".join(s) for s in shares] == [b"abcdmn", b"efghijkl"]
        assert list(buf.copy()) == list(buf)
        buf.clear()
        with pytest.raises(RuntimeError):
            list(buf)
