"""``afm bench warc_read``: curate's reader with ISA-L and with zlib, on the same real pages."""

from __future__ import annotations

import gzip
import zlib

import pytest

from afm.app.bench.common import BenchOptions
from afm.app.bench.pipelines.reading import _inflate_all, bench_warc_read
from afm.readers import byte_stream

isal_zlib = pytest.importorskip("isal.isal_zlib", reason="isal is a curation dependency")


@pytest.mark.parametrize("inflater", [zlib, isal_zlib], ids=["zlib", "isal"])
def test_the_inflate_reads_every_member(inflater) -> None:
    members = [gzip.compress(bytes([i]) * (1000 + 70_000 * i)) for i in range(4)]
    assert _inflate_all(b"".join(members), inflater) == sum(1000 + 70_000 * i for i in range(4))


def test_both_readers_read_every_page_and_the_reader_is_restored(shared_eval, tmp_path) -> None:
    rows = {r.metric: r for r in bench_warc_read(BenchOptions(quick=True, shared_dir=shared_eval.parent,
                                                              workdir=tmp_path))}
    assert rows["pages read"].ours == 60
    assert rows["curate's WARC reader, ISA-L inflate vs zlib"].ours > 0
    assert rows["the inflate alone, ISA-L vs zlib"].baseline > 0
    assert byte_stream._inflater is isal_zlib
