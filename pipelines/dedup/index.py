"""The accepted-corpus index of incremental de-duplication (Parquet, any filesystem).

An index directory (local, ``gs://``, ``s3://``: every access goes through
:mod:`afm.fs`, so workers read and write it wherever it lives) holds

* ``_index.json``: the MinHash parameters the index was built with (an index built with
  other ones cannot be compared and is refused);
* ``batch-<run id>/part-<hash>.parquet``: the sketches of the documents one successful
  run kept, one directory per run (``part-*.parquet`` at the top: an older layout);
* ``.staging-<run id>/``: the parts of a run that has not succeeded yet. It becomes
  ``batch-<run id>`` in one rename after the run's output was promoted, and is never
  read before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from afm import fs
from afm.io import read_shard, write_shard

INDEX_META = "_index.json"
INDEX_GLOB_PREFIX = "part-"
BATCH_PREFIX = "batch-"  # one committed directory of parts per successful run
STAGING_PREFIX = ".staging-"  # a run's parts until it has succeeded


def index_schema(bands: int, num_perm: int) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("key", pa.string(), nullable=False),
            pa.field("content_hash", pa.binary(16), nullable=False),
            # ``bands`` little-endian int64 bucket keys (afm.filters.minhash.band_keys)
            pa.field("band_keys", pa.binary(8 * bands), nullable=False),
            # ``num_perm`` little-endian uint32 MinHash values (datasketch hashvalues)
            pa.field("signature", pa.binary(4 * num_perm), nullable=False),
        ],
        metadata={"afm.record": "dedup_index"},
    )


def index_files(index_dir: str) -> list[str]:
    """The index's committed Parquet parts, sorted: ``part-*.parquet`` at the top and in
    every committed ``batch-*`` directory; staging directories are never read."""
    out = []
    for entry in fs.list_dir(index_dir):
        full = fs.join(index_dir, entry)
        if entry.startswith(INDEX_GLOB_PREFIX) and entry.endswith(".parquet"):
            out.append(full)
        elif entry.startswith(BATCH_PREFIX):
            out += [fs.join(full, f) for f in fs.list_dir(full)
                    if f.startswith(INDEX_GLOB_PREFIX) and f.endswith(".parquet")]
    return out


def stale_staging(index_dir: str) -> list[str]:
    """Staging directories left by runs that never committed (killed or failed)."""
    return [e for e in fs.list_dir(index_dir) if e.startswith(STAGING_PREFIX)]


def check_index(index_dir: str, want: dict[str, Any], create: bool) -> None:
    """Validate (or create) ``index_dir/_index.json`` against ``want``: an index built
    with other MinHash parameters cannot be compared and must fail loudly."""
    path = fs.join(index_dir, INDEX_META)
    if fs.isfile(path):
        have = json.loads(fs.read_bytes(path))
        diff = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
        if diff:
            raise ValueError(f"dedup index {index_dir} was built with other parameters: {diff}")
    elif index_files(index_dir):
        raise ValueError(f"dedup index {index_dir} has parts but no {INDEX_META}")
    elif create:
        fs.mkdirs(index_dir)
        fs.write_bytes(path, json.dumps(want, indent=2, sort_keys=True).encode())


def read_index_file(path: str) -> Iterator[tuple[str, bytes, bytes, bytes]]:
    """``(key, content_hash, band_keys, signature)`` of every row of one part."""
    table = read_shard(path, columns=["key", "content_hash", "band_keys", "signature"])
    yield from zip(*(table.column(i).to_pylist() for i in range(4)))


def staging_dir(index_dir: str, run_id: str) -> str:
    return fs.join(index_dir, STAGING_PREFIX + run_id)


def commit(index_dir: str, run_id: str) -> str | None:
    """Turn a run's staging directory into ``batch-<run id>`` (one rename); None when the
    run staged nothing."""
    staging = staging_dir(index_dir, run_id)
    if not fs.isdir(staging):
        return None
    final = fs.join(index_dir, BATCH_PREFIX + run_id)
    fs.rename(staging, final)
    return final


def abort(index_dir: str, run_id: str) -> None:
    fs.delete([staging_dir(index_dir, run_id)])


class WriteIndexRows(beam.DoFn):
    """Buffer index rows; write one Parquet part per bundle into the run's staging
    directory. Content-named, so a retried bundle rewrites the same file."""

    def __init__(self, staging: str, bands: int, num_perm: int):
        self.staging, self.bands, self.num_perm = staging, bands, num_perm

    def start_bundle(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def process(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def finish_bundle(self) -> None:
        if not self.rows:
            return
        import pyarrow as pa


        self.rows.sort(key=lambda r: r["key"])
        digest = hashlib.sha1("\0".join(r["key"] for r in self.rows).encode("utf-8", "surrogatepass"))
        schema = index_schema(self.bands, self.num_perm)
        write_shard(fs.join(self.staging, f"{INDEX_GLOB_PREFIX}{digest.hexdigest()[:16]}.parquet"),
                    pa.Table.from_pylist(self.rows, schema=schema), schema)
        self.rows = []
