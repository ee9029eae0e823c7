"""The one module that opens Parquet files: for reading (a footer, a schema, row groups,
batches, a whole table) and for writing (the encoder behind :func:`afm.io.write_shard`).

Why one: opening a Parquet file is where the choices hide. A path is opened through
:func:`afm.fs.open_input`, so the same call reads a local file or ``gs://`` / ``s3://``
with pyarrow's ranged reads (a row group costs one request, not a download); an open
handle (what :func:`afm.readers.read_file` has) is read as it is; a file is written with
one set of settings (compression, row-group size). Modules that opened Parquet
themselves made these choices each their own way (one read only local paths, another
only what pyarrow's default filesystem reaches). Here they are made once, and
``tests/unit/project/test_layout.py`` checks that ``pyarrow.parquet`` is imported, and
its openers and writers called, nowhere else.

Above this module: :mod:`afm.readers` (every record of a Parquet file met once, damaged
row groups counted), :mod:`afm.io` (``write_shard`` publishes atomically, ``read_shard``
reads a whole shard), the training loader's footers and row groups
(:mod:`afm.training.data.shards`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from afm import fs

# An opened Parquet file (its footer parsed; row groups and batches read on demand), what
# :func:`open_parquet` returns, and the footer of one row group: names for type hints.
ParquetReader = pq.ParquetFile
RowGroupMeta = pq.RowGroupMetaData

Source = str | os.PathLike[str] | BinaryIO


def open_parquet(source: Source) -> ParquetReader:
    """``source`` opened for reading by row group or batch: a path on any filesystem
    (:func:`afm.fs.open_input`), or a binary file already open (the caller closes it).
    Reads the footer only; raises pyarrow's error when the file is not Parquet."""
    if isinstance(source, (str, os.PathLike)):
        return pq.ParquetFile(fs.open_input(os.fspath(source)))
    return pq.ParquetFile(source)


def schema_of(source: Source) -> pa.Schema:
    """The file's Arrow schema, with its metadata (``afm.record``: what the file holds),
    from the footer alone."""
    return open_parquet(source).schema_arrow


def row_count(source: Source) -> int:
    """The number of rows the file's footer declares."""
    return open_parquet(source).metadata.num_rows


def encode_tables(sink: BinaryIO, tables: pa.Table | Iterable[pa.Table], schema: pa.Schema, *,
                  compression: str | None = "zstd", row_group_size: int | None = None) -> None:
    """``tables`` (one, or an iterable encoded as it comes: a shard never has to be in
    memory whole) as one Parquet file with ``schema`` into the open ``sink``. Where the
    file goes and when it becomes visible is :func:`afm.io.write_shard`'s business."""
    writer = pq.ParquetWriter(sink, schema, compression=compression)
    for table in [tables] if isinstance(tables, pa.Table) else tables:
        writer.write_table(table, row_group_size=row_group_size)
    writer.close()  # the footer: only a complete file gets one


__all__ = ["ParquetReader", "RowGroupMeta", "encode_tables", "open_parquet", "row_count", "schema_of"]
