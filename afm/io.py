"""Parquet and JSONL I/O for document records, with atomic (temp + rename) writes.

Readers never see a half-written shard: every writer here writes ``NAME.tmp-<pid>`` and
renames it into place only after the file is closed.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from afm.schema import DOCUMENT_SCHEMA, from_table, to_table


def atomic_path(path: str | os.PathLike[str]) -> Path:
    """The temporary sibling name a writer uses before renaming into ``path``."""
    p = Path(path)
    return p.with_name(f".{p.name}.tmp-{os.getpid()}")


def write_parquet(
    records: list[dict[str, Any]],
    path: str | os.PathLike[str],
    schema: pa.Schema = DOCUMENT_SCHEMA,
    compression: str = "zstd",
) -> Path:
    """Write records as one Parquet file with ``schema``, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic_path(path)
    pq.write_table(to_table(records, schema), tmp, compression=compression)
    os.replace(tmp, path)
    return path


def read_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Documents from Parquet, JSONL or JSONL.gz (decided by the suffix)."""
    p = str(path)
    if p.endswith(".parquet"):
        pf = pq.ParquetFile(p)
        for batch in pf.iter_batches(batch_size=1024):
            yield from from_table(pa.Table.from_batches([batch]))
    elif p.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        opener = gzip.open if p.endswith(".gz") else open
        with opener(p, "rt", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{p}:{lineno}: not valid JSON ({exc.msg})") from exc
    else:
        raise ValueError(f"{p}: unsupported file type (expected .parquet, .jsonl or .jsonl.gz)")


def expand_inputs(patterns: Iterable[str]) -> list[str]:
    """Files named by paths, directories (searched recursively) and globs, sorted."""
    import glob

    out: list[str] = []
    for pattern in patterns:
        if os.path.isdir(pattern):
            for root, _dirs, files in os.walk(pattern):
                out.extend(os.path.join(root, f) for f in files if not f.startswith("."))
        elif any(c in pattern for c in "*?["):
            out.extend(glob.glob(pattern, recursive=True))
        elif os.path.exists(pattern):
            out.append(pattern)
        else:
            raise FileNotFoundError(f"input not found: {pattern}")
    return sorted(set(out))
